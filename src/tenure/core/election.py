"""Leader election (etcd's ``concurrency.Election``, Curator's ``LeaderLatch``), sans I/O.

Redisson has no election, so the wire layout is tenure's own (docs/wire.md, "Election"). For
an election named ``n`` (with the client's ``name_prefix``), every key shares ``n``'s hash
tag, so one election lives in one cluster slot:

- ``{n}:tenure_election``: HASH of the leader — ``owner`` (its owner field), ``value``,
  ``term``, ``client`` (the client's name) — whose expiry is the leader's lease, renewed
  by its client's watchdog as a lock hold is.
- ``{n}:tenure_election_term``: STRING counter, INCR for every new leadership, no TTL: terms
  strictly increase across leaderships, crashes and restarts of a persisting server, and
  serve as fencing tokens ([`tenure.fenced_write()`][tenure.fencing.fenced_write]).
- ``{n}:tenure_election_queue``: LIST of candidates' owner fields in the order they started
  campaigning; ``{n}:tenure_election_deadlines``: ZSET owner -> server epoch ms after which
  that candidate counts as gone (its campaign refreshes it every ``watchdog_timeout / 3``);
  ``{n}:tenure_election_candidates``: HASH owner -> value, ``owner|lease`` -> lease ms,
  ``owner|client`` -> client name.
- ``{n}:tenure_election_log``: STREAM of leader changes (capped near 128 entries): owner
  (empty when vacant), value, term, client, lease; observers read it from the last change
  they saw, so none is missed.
- channel ``redisson_lock__channel:{n}:tenure_election``: the new term when a leader is
  elected or proclaims a value, ``0`` when the leadership falls vacant, ``-<lease ms>`` on
  each renewal (waiters and observers move their lease-end re-check instead of polling).

Every script that finds nobody leading elects the first live candidate at once, with that
candidate's own value and lease (``_election.lua``'s ``settle``): a resignation hands over
inside the resign script itself, and the candidate learns it from the channel. A crashed
leader's lease runs out; the first waiter to re-check at its end elects the next one.

A candidate is the [`tenure.Election`][tenure.Election] object (not a thread or task): its owner
field
is drawn once per object and client, and lives while the object does.
"""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from tenure import keys, scripts
from tenure.core.args import check_name, check_wait, to_ms
from tenure.core.context import Context
from tenure.core.effects import (
    CLEAN_UP_TRIES,
    MIN_WAIT,
    WATCH_HOLDS,
    Call,
    Command,
    Deadline,
    Flow,
    Subscribe,
    Unsubscribe,
    Wait,
)
from tenure.core.fenced import check_persistence_once
from tenure.core.lock import LockCore, LossCallback
from tenure.core.parking import WAKE_ANY
from tenure.core.waiting import subscribed
from tenure.errors import LockLostError, NotOwnedError

LEADER = "tenure_election"
"""Suffix of the leader HASH; the other keys add theirs to it."""
VACANT = "0"
"""Channel message: the leadership fell vacant."""
WAKE_ALL = frozenset({WAKE_ANY})
"""Every election message wakes every waiter and observer of the client on the channel."""
LEADERSHIP_LOST = -1
"""election_campaign.lua's first reply element when the leadership its client records for
the caller is no longer the caller's: nothing was done."""


def leader_key(key: str) -> str:
    """The leader HASH of the election whose wire name is ``key``."""
    return keys.suffix_name(key, LEADER)


def election_keys(key: str) -> list[str]:
    """KEYS of every election script: leader, term, queue, deadlines, candidates, log."""
    return [
        leader_key(key),
        keys.suffix_name(key, LEADER + "_term"),
        keys.suffix_name(key, LEADER + "_queue"),
        keys.suffix_name(key, LEADER + "_deadlines"),
        keys.suffix_name(key, LEADER + "_candidates"),
        keys.suffix_name(key, LEADER + "_log"),
    ]


def election_channel(key: str) -> str:
    """The election's channel (Lock-family naming, so renewal messages are understood)."""
    return keys.lock_channel(leader_key(key))


def check_value(value: Any) -> str:
    """A candidate's value: a ``str`` that UTF-8 can encode (may be empty)."""
    if not isinstance(value, str):
        raise TypeError(f"value must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"value cannot be encoded as UTF-8: {error.reason}") from None
    return value


def default_client_name() -> str:
    """``<hostname>:<pid>``: who a leader is, when the client has no name of its own."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Leader:
    """The leader of an election, as read at one moment.

    Attributes:
        value: what the leader campaigned with or last proclaimed (str).
        term: the leadership's term (int), strictly increasing per election name; a fencing
            token for the leader's writes ([`tenure.fenced_write()`][tenure.fencing.fenced_write]).
        remaining_lease: seconds until the leadership expires unless renewed (float);
            ``math.inf`` without expiry; None if unknown.
        client_name: the leader's client name (``<hostname>:<pid>`` by default); None when
            the writer gave none.
        owner: the leader's owner field on the wire (``<client uuid>:<number>``).
    """

    value: str
    term: int
    remaining_lease: float | None
    client_name: str | None
    owner: str

    def same(self, other: Leader | None) -> bool:
        """True for the same leadership with the same value (the lease aside)."""
        return other is not None and (self.owner, self.term, self.value) == (
            other.owner,
            other.term,
            other.value,
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _lease(ms: Any) -> float | None:
    if ms is None or _text(ms) == "":
        return None
    pttl = int(ms)
    return None if pttl == -2 else math.inf if pttl == -1 else pttl / 1000


def parse_leader(reply: Any) -> Leader | None:
    """The leader part of an ``election_leader.lua`` reply (None when vacant)."""
    owner, value, term, client, pttl = reply[:5]
    if not _text(owner):
        return None
    return Leader(_text(value), int(term), _lease(pttl), _text(client) or None, _text(owner))


def parse_change(fields: Any) -> Leader | None:
    """One change-log entry's fields (a flat field/value list) -> the leader it names."""
    found = {_text(k): _text(v) for k, v in zip(fields[::2], fields[1::2], strict=True)}
    if not found.get("owner"):
        return None
    return Leader(
        found.get("value", ""),
        int(found.get("term") or 0),
        _lease(found.get("lease")),
        found.get("client") or None,
        found["owner"],
    )


class ElectionCore(LockCore):
    """One named election of one client: the flows behind [`tenure.Election`][tenure.Election].

    Built on `LockCore` for what a leadership shares with a lock hold: the hold
    table entry the watchdog renews, loss reports (``lost``, ``on_lost``, loss
    listeners). The leader HASH is the hold's key, the candidate's owner its field.
    """

    renewal_script: ClassVar[scripts.Script] = scripts.get("election_renew")
    campaign_script: ClassVar[scripts.Script] = scripts.get("election_campaign")
    resign_script: ClassVar[scripts.Script] = scripts.get("election_resign")
    give_up_script: ClassVar[scripts.Script] = scripts.get("election_give_up")
    proclaim_script: ClassVar[scripts.Script] = scripts.get("election_proclaim")
    leader_script: ClassVar[scripts.Script] = scripts.get("election_leader")

    def __init__(
        self,
        ctx: Context,
        name: str,
        on_lost: LossCallback | None = None,
        client_name: str | None = None,
    ) -> None:
        super().__init__(ctx, check_name(name), on_lost)
        wire = ctx.wire_name(name)
        self.keys = election_keys(wire)
        self.key = self.keys[0]
        self.channel = election_channel(wire)
        self._client_name = client_name
        self._terms: dict[str, int] = {}

    def per_owner(self) -> list[dict[str, Any] | set[str]]:
        return [*super().per_owner(), self._terms]

    @property
    def client_name(self) -> str:
        """Who this client is, written beside its leadership: the client's ``name=`` when
        it has one, else ``<hostname>:<pid>``."""
        named = self._client_name or getattr(self.ctx, "client_name", None)
        return named if isinstance(named, str) and named else default_client_name()

    def entry_ms(self) -> int:
        """How long a candidate's entry lasts without a refresh (ms): ``watchdog_timeout``,
        three of its refreshes."""
        return to_ms(self.ctx.watchdog_timeout)

    def refresh_period(self) -> float:
        """Seconds between a waiting candidate's refreshes of its entry."""
        return self.ctx.watchdog_timeout / 3

    # ----------------------------------------------------------------- campaign
    def campaign(self, owner: str, value: object, timeout: object) -> Flow[int | None]:
        """Campaign until ``owner`` leads; its term, or None when ``timeout`` ran out.
        Arguments are checked now, before the flow runs any I/O."""
        checked = check_value(value)
        wait = check_wait(True, timeout)
        campaigning = self._campaign(owner, checked, wait)
        if self.ctx.persistence_checked:
            return campaigning
        return self._checked_first(campaigning)

    def _checked_first(self, campaigning: Flow[int | None]) -> Flow[int | None]:
        """The client's one persistence check, then ``campaigning``: terms are fencing
        tokens, which go backwards after a restart of a server that persists nothing (the
        same once-per-client warning as a FencedLock's)."""
        if not self.ctx.persistence_checked:
            yield from check_persistence_once(self.ctx, f"election {self.name!r}", "terms")
        return (yield from campaigning)

    def _attempt(self, owner: str, value: str, until: float) -> Flow[tuple[int | None, int]]:
        """One campaign script: (term, 0) when ``owner`` leads, else (None, the leader's
        remaining lease in ms). ``until``: the campaign's deadline (monotonic), to which a
        script that surely did not reach a server is sent again (a failover).

        Raises LockLostError when the leadership the hold table records for ``owner`` is
        no longer its own on the server (its lease ran out, say after a pause, before a
        renewal found it gone): the loss is reported (``lost``, ``on_lost``, the blocks
        run under it cancelled) and nothing is done. A new term granted over it, as a
        re-entry, would hide the loss: the blocks begun under the old term would run on,
        though another candidate may have led in between (reviewer R8, F2)."""
        hold = self.ctx.holds.get(self.key, owner)
        recorded = self._terms.get(owner) if hold is not None else None
        args: list[str | int] = [
            self.lease_ms(None),
            owner,
            value,
            self.entry_ms(),
            self.channel,
            self.client_name,
            "" if recorded is None else recorded,
        ]
        sent = time.monotonic()
        reply = yield Call(self.campaign_script, self.keys, args, changes=True, until=until)
        if int(reply[0]) == LEADERSHIP_LOST:
            if hold is not None and self.ctx.holds.get(self.key, owner) is hold:
                self.ctx.holds.discard(self.key, owner)
                self.hold_lost(owner)  # (else the keeper took it off: it reports it)
            raise LockLostError(
                f"election {self.name!r}: the leadership of term {recorded} was lost; "
                "nothing was done (campaign again for a new term)"
            )
        if int(reply[0]) != 1:
            return None, int(reply[1])
        term = int(reply[1])
        hold = self.ctx.holds.get(self.key, owner)
        if hold is None:
            self._sent[owner] = sent
            self.granted(owner, None)
        else:  # campaigning again while leading: the lease was re-applied
            self.ctx.holds.reapplied(hold, self.applied_lease(None), sent)
        self._terms[owner] = term
        return term, 0

    def _campaign(self, owner: str, value: str, wait: float) -> Flow[int | None]:
        deadline = Deadline(wait)
        channel: str | None = None
        leading: bool | None = None  # before this campaign (None: not looked at yet)
        try:
            leading = self.ctx.holds.get(self.key, owner) is not None
            sent = time.monotonic()
            term, ttl = yield from self._attempt(owner, value, deadline.end)
            if term is None and deadline.remaining() > 0:
                subscribe = Subscribe(self.channel, WAKE_ALL, since=sent)
                # Before the yield: an interrupt landing once the subscription was made
                # (after the listener's answer) is thrown there, and must leave the channel.
                channel = subscribe.channel
                fresh = yield subscribe
                while True:
                    if fresh is not True:
                        term, ttl = yield from self._attempt(owner, value, deadline.end)
                    fresh = False
                    if term is not None or deadline.remaining() <= 0:
                        break
                    yield Wait(channel, self._sleep(ttl, deadline))
        except GeneratorExit:
            raise
        except BaseException as error:
            # The script may have run (elected us) with its reply lost, or its grant may be
            # recorded already (the interrupt came as `_attempt()` returned): step down.
            second: BaseException | None = None
            tries = 0
            while tries < CLEAN_UP_TRIES:  # (see `_step_down()`: no call before the try)
                tries += 1
                try:
                    late = yield from self._step_down(owner, channel, leading is False)
                    second = late or second
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    second = interrupt
            if second is not None:
                raise second from error
            raise
        try:
            if channel is not None:
                try:
                    yield Unsubscribe(channel)
                except GeneratorExit:
                    raise
                except BaseException:
                    yield Unsubscribe(channel, pass_on=True)  # perhaps before it left
                    raise
            if term is None:
                yield from self.give_up(owner)
                return None
            yield WATCH_HOLDS
        except GeneratorExit:
            raise
        except BaseException as error:
            # Elected, but the caller never learns it (cancelled, a signal handler raised):
            # the leadership leaves the hold table (never renewed) and steps down on the
            # server, as an interrupted lock acquire gives its grant back.
            second = None
            tries = 0
            while tries < CLEAN_UP_TRIES:  # (see `_step_down()`: no call before the try)
                tries += 1
                try:
                    late = yield from self._step_down(owner, None, term is not None)
                    second = late or second
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    second = interrupt
            if second is not None:
                raise second from error
            raise
        return term

    def _step_down(
        self, owner: str, channel: str | None, drop: bool
    ) -> Flow[BaseException | None]:
        """The clean-up of a campaign an interrupt cut short: a leadership it may have
        recorded leaves the hold table (``drop``: not one the caller held before it; no
        I/O, never renewed again), the waiter leaves ``channel`` (`_leave()`: its
        interrupts are returned), and `give_up()` steps down on the server what the table
        no longer knows. Each step is idempotent: the
        caller runs it again from the top when another interrupt lands in it (a sync
        signal handler runs between bytecodes, and a leadership left in the table would
        be renewed for ever: a leader nobody knows of)."""
        if drop:
            self.ctx.holds.discard(self.key, owner)
        late = yield from self._leave(channel)
        yield from self._give_up_quietly(owner)
        return late

    def _sleep(self, ttl_ms: int, deadline: Deadline) -> float:
        """Until the leader's lease ends (someone must then elect the next), the next
        refresh of the caller's entry, or the deadline; a message cuts it short."""
        lease_left = ttl_ms / 1000 if ttl_ms >= 0 else math.inf
        return max(MIN_WAIT, min(lease_left, self.refresh_period(), deadline.remaining()))

    def give_up(self, owner: str) -> Flow[None]:
        """``owner`` stops campaigning: its entry goes; elected meanwhile without its
        client knowing (a lost reply), it steps down at once."""
        known = "1" if self.ctx.holds.get(self.key, owner) is not None else "0"
        yield Call(self.give_up_script, self.keys, [owner, self.channel, known], changes=True)

    # ----------------------------------------------------------------- leading
    def resign(self, owner: str) -> Flow[None]:
        """``owner`` steps down; the first live candidate is elected in the same script."""
        hold = self.ctx.holds.discard(self.key, owner)
        if hold is None and (
            owner in self._lost_unreported or self.ctx.holds.loss_at_release(self.key, owner)
        ):
            # Lost (reported, or taken off by the keeper and not reported yet): say so, as a
            # lock's release does, with no I/O; the report that follows adds no error.
            self._lost_unreported.discard(owner)
            raise LockLostError(f"election {self.name!r}: the leadership was lost before resign")
        reply = yield Call(self.resign_script, self.keys, [owner, self.channel], changes=True)
        if reply is None:
            self._not_leader(owner, hold is not None)

    def proclaim(self, owner: str, value: object) -> Flow[int]:
        """The leader ``owner`` changes its value; the term. Checked before any I/O."""
        checked = check_value(value)
        return self._proclaim(owner, checked)

    def _proclaim(self, owner: str, value: str) -> Flow[int]:
        hold = self.ctx.holds.get(self.key, owner)
        if hold is None and owner in self._lost_unreported:
            self._lost_unreported.discard(owner)
            raise LockLostError(f"election {self.name!r}: the leadership was lost")
        reply = yield Call(
            self.proclaim_script, self.keys, [owner, value, self.channel], changes=True
        )
        if reply is None:
            if hold is not None and self.ctx.holds.get(self.key, owner) is hold:
                self.ctx.holds.discard(self.key, owner)
            self._not_leader(owner, hold is not None)
        return int(reply)

    def _not_leader(self, owner: str, held: bool) -> None:
        """Raise for a leader-only call the server refused."""
        if held:
            self.hold_lost(owner)
        if owner in self._lost_unreported:
            self._lost_unreported.discard(owner)
            raise LockLostError(f"election {self.name!r}: the leadership was lost")
        raise NotOwnedError(f"election {self.name!r}: the caller is not the leader")

    # ----------------------------------------------------------------- reading
    def leader(self, settle: bool = False) -> Flow[Leader | None]:
        """The leader now, or None. ``settle``: a lease-end re-check — if nobody leads,
        elect the first live candidate, or tell the channel the leadership is vacant."""
        args = [self.channel if settle else "", ""]
        return parse_leader((yield Call(self.leader_script, self.keys, args, changes=settle)))

    def is_leader(self, owner: str) -> Flow[bool]:
        reply = yield Command(("HGET", self.key, "owner"))
        return reply is not None and _text(reply) == owner

    def valid_for(self, owner: str) -> float:
        """Seconds ``owner``'s leadership is surely still valid on the local monotonic
        clock (last confirmed grant or renewal + lease - clock-drift allowance - now);
        0.0 when lost or not leading. No I/O."""
        hold = self.ctx.holds.get(self.key, owner)
        if hold is None or owner in self._lost:
            return 0.0
        return max(0.0, hold.valid_until - time.monotonic())

    def checkpoint(self, owner: str) -> None:
        """Raise unless ``owner`` surely still leads (no I/O): LockLostError when its
        leadership was lost or its validity ran out, NotOwnedError when it does not lead."""
        if self.valid_for(owner) > 0:
            return
        if owner in self._lost or self.ctx.holds.get(self.key, owner) is not None:
            raise LockLostError(f"election {self.name!r}: the leadership was lost")
        raise NotOwnedError(f"election {self.name!r}: the caller is not the leader")

    def term(self, owner: str) -> int | None:
        """The term of ``owner``'s latest leadership (None if it never led)."""
        return self._terms.get(owner)

    # ----------------------------------------------------------------- observing
    def observe_round(self, since: str | None) -> Flow[tuple[list[Leader | None], str]]:
        """The next leader changes for an observer, and the id of the last one.

        ``since`` None (the first round): the current leader alone. Else the changes logged
        after change ``since`` (the election's change log keeps the last ~128), waiting
        for them on the channel: subscribed before reading, so none is missed, then asleep
        until a message or the leader's lease end. Renewal messages move that lease end
        without waking anyone, so an observer sends nothing while the leader lives. Every
        read re-checks the leadership: if nobody leads it elects the first live candidate,
        or logs the vacancy (once) and tells the channel. Unsubscribes before returning:
        nothing is held between two rounds."""
        return (yield from subscribed(Subscribe(self.channel, WAKE_ALL), self._observe(since)))

    def _observe(self, since: str | None) -> Flow[tuple[list[Leader | None], str]]:
        """`observe_round()`'s loop, run subscribed."""
        while True:
            reply = yield Call(
                self.leader_script, self.keys, [self.channel, since or ""], changes=True
            )
            leader, newest = parse_leader(reply), _text(reply[5])
            if since is None:
                return [leader], newest
            changes: list[Leader | None] = [parse_change(fields) for _, fields in reply[6]]
            if changes:
                return changes, _text(reply[6][-1][0])
            lease = leader.remaining_lease if leader is not None else None
            seconds = math.inf if lease is None else max(MIN_WAIT, lease)
            yield Wait(self.channel, seconds, math.inf)
