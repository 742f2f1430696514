"""The reentrant lock algorithm (Redisson's RLock), sans I/O. Other locks subclass it.

Acquire (docs/internals.md, "Acquire"): one script grants the lock when it is free or already
the caller's, else returns the holder's remaining lease. A waiter subscribes to the lock's
channel, tries again (closing the race with an unlock published before the subscription),
then sleeps until an unlock message or the holder's lease end, whichever comes first, and
loops. No polling.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from typing import Any, ClassVar, TypeVar

from tenure import keys, scripts
from tenure.core.args import MAX_SECONDS, check_lease, check_name, check_positive, check_wait, to_ms
from tenure.core.clock import validity
from tenure.core.context import Context, WakeChecks
from tenure.core.effects import (
    CLEAN_UP_TRIES,
    WATCH_HOLDS,
    Background,
    Call,
    Command,
    Deadline,
    Drain,
    Flow,
    Settle,
    Sleep,
    Subscribe,
    Unsubscribe,
    Wait,
    wait_for,
)
from tenure.core.holds import Hold, LossScope
from tenure.errors import (
    BackendError,
    ClientClosedError,
    LockError,
    LockKindError,
    LockLostError,
    NotOwnedError,
    ReplicationError,
    ServerError,
)

log = logging.getLogger("tenure")

WOKE_SELF, WOKE_OTHER = -1, -2
"""lock_release's replies for a lock freed whose unlock went to one client alone, through
the wake queue: this client (its other waiters) or another one."""
FREED_TARGETED = (WOKE_SELF, WOKE_OTHER)
REENTRY_LOST = (b"lost", "lost")
"""An acquire script's reply to an attempt made as a re-entry when the caller held nothing
on the server: its earlier hold was lost, and nothing was granted."""
T = TypeVar("T")

LossCallback = Callable[[], None]

PRUNE_FIRST = 64
"""Per-owner entries a lock object keeps before it first looks for owners that ended."""
PRUNE_EVERY = 16
"""Grants between two counts of the per-owner entries (`LockCore._prune()`)."""


RECONCILE_PAUSE = (0.05, 0.25)
"""First and longest pause (seconds) between reconcile attempts while the server is away:
at most 0.25 s, so an orphan hold goes within 0.5 s of the server answering again (the
bound of a fair waiter's give-up, `tenure.core.fair.GIVE_UP_PAUSE`)."""
RECONCILE_RECHECK = 0.1
"""Pause before the second "nothing to undo" check of a reconcile."""
RECONCILE_WAIT = 1.5
"""Longest an owner's acquire waits for a reconcile of its holds on the same lock to end
(the longest reconcile pause plus its recheck, with a margin); after it, BackendError."""
RECONCILE_POLL = 0.01
"""Seconds between looks at a pending reconcile (only after an acquire that failed)."""
HANDOFF = threading.RLock()
"""Held while a release hands its hold over to a pending reconcile of the same owner (takes
it off the table and finds the reconcile still running), and while a reconcile makes its
last read of the table and ends: the hold is then either seen by that read or given to a
new reconcile, never to neither (a signal handler here may release again: reentrant)."""
WAKE_CHECK_GRACE = 0.1
"""Seconds after an unlock that woke one other client alone (the wake queue) before the
releasing client looks whether the lock is still free, and if so wakes the next client: the
one woken may be paused or closing, and nobody else would look before the old lease end."""
WAKE_CHECK_LINGER = 1.0
"""Seconds the client's flow of back-up looks (`wake_checks()`) stays after its last look
with none pending: the next targeted unlock within it starts no thread or task. (A thread
started per release ran on the releasing client's CPU while the woken client acquired: the
handoff's p99 was 2.1-2.8x python-redis-lock's, against 1.0-1.5x before.)"""
WAKE_CHECK_STALE = 1.0
"""Seconds without a turn after which a release takes the client's flow of back-up looks
for stuck (in a call to a slow server) or gone (its event loop closed), and starts another."""


def guard(call: Call, field: str, recorded: int | None) -> Call:
    """``call`` (a release) behind the reconcile guard when ``recorded`` is given."""
    if recorded is None:
        return call
    return replace(call, script=scripts.guarded(call.script), args=[*call.args, field, recorded])


def wake_checks(checks: WakeChecks) -> Flow[None]:
    """The one background flow of a client's back-up looks after its targeted unlocks
    (`WAKE_CHECK_GRACE`): each look once it is due, then a sleep up to the next one, at most
    the grace (an unlock arms its look a grace ahead: never before this flow's next turn).
    It ends `WAKE_CHECK_LINGER` after its last look with none pending. A server error in
    one look is logged and the others go on; a failed connection (or the client closed) ends
    the flow, and the next one makes the looks it did not, the failed one included (its
    script may not have run)."""
    linger_until = time.monotonic() + WAKE_CHECK_LINGER
    while True:
        turn = checks.take(time.monotonic(), linger_until, WAKE_CHECK_GRACE)
        if turn is None:
            return
        ready, pause = turn
        for i, lock in enumerate(ready):
            try:
                yield from lock._wake_check()
            except ServerError as error:  # a script refused for this lock alone
                log.warning("lock %r: the look after an unlock failed: %s", lock.name, error)
            except BaseException:
                checks.put_back(ready[i:], time.monotonic())
                raise
        if ready:
            linger_until = time.monotonic() + WAKE_CHECK_LINGER
        try:
            yield Sleep(pause)
        except BaseException:  # cancelled (its event loop closing): the next arm starts one
            checks.put_back([], time.monotonic())
            raise


def arm_look(lock: LockCore) -> Flow[None]:
    """Arm ``lock``'s back-up look after a targeted unlock; start the client's flow of
    looks when `WakeChecks.arm()` says none runs. An interrupt thrown in here (at the
    Background, perhaps before the runner started the flow it marked running) lets the
    next arm start one: else every armed look waited for an arm `WAKE_CHECK_STALE` later."""
    checks = lock.ctx.wake_checks
    try:
        if checks.arm(lock, time.monotonic() + WAKE_CHECK_GRACE, WAKE_CHECK_STALE):
            yield Background(wake_checks(checks))
    except BaseException:
        checks.put_back([], time.monotonic())
        raise


class LateGrant(Exception):
    """A grant answered after its lease could have run out: undone, not acquired."""


class LockCore:
    """One named lock of one client: the flows behind every public lock method.

    Subclasses change the hooks (`attempt()`, `field()`, `wait_channel()`,
    `give_up()`, the scripts), never the waiting loop.
    """

    acquire_script: ClassVar[scripts.Script] = scripts.get("lock_acquire")
    release_script: ClassVar[scripts.Script] = scripts.get("lock_release")
    force_release_script: ClassVar[scripts.Script] = scripts.get("lock_force_release")
    renewal_script: ClassVar[scripts.Script] = scripts.get("lock_renew")
    extend_script: ClassVar[scripts.Script] = scripts.get("lock_extend")
    wake_all: ClassVar[frozenset[str]] = frozenset()
    shared: ClassVar[bool] = False
    """Holds of this kind are shared (read holds): a waiter that takes one passes its
    wake-up on to the next waiter of its client, whom the lock may serve too."""
    shares_recheck: ClassVar[bool] = True
    """The waiters of one client share the lease-end re-check (`Wait`'s patience: the
    oldest makes it). False where one waiter's refusal says nothing of another's chance
    (a ReadWriteLock: a writer refused in read mode, a reader behind it would get in)."""
    unlock_message: ClassVar[str] = keys.UNLOCK_MESSAGE
    reentry_sets_expiry: ClassVar[bool] = True
    """A re-entry's grant sets the lock's expiry to its own lease (Redisson's ``PEXPIRE``),
    shorter or not than the hold's; a ReadWriteLock's re-entry never shortens it (the read
    side keeps the longer expiry, the write side adds the lease to what is left)."""

    def __init__(self, ctx: Context, name: str, on_lost: LossCallback | None = None) -> None:
        self.ctx = ctx
        self.name = check_name(name)
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        self.on_lost = on_lost
        """Called with no argument when a hold is reported lost (the front binds itself)."""
        self.key = ctx.wire_name(name)
        self.channel = keys.lock_channel(self.key)
        self._lost: set[str] = set()
        self._lost_unreported: set[str] = set()
        self._sent: dict[str, float] = {}
        self._prune_at = PRUNE_FIRST
        self._prune_in = 1  # grants until the next count of the per-owner entries
        self._lease_ms: tuple[float, int] = (math.nan, 0)  # `lease_ms()`: seconds, ms
        self._is_grant = self.is_grant  # bound once: every acquire Call carries it
        self._loss_listeners: list[weakref.WeakMethod[Callable[[LockCore, str], None]]] = []
        self.on_doubt: LossCallback | None = None
        """Called with no argument when a hold goes in doubt (the front binds itself)."""
        self._doubt_listeners: list[weakref.WeakMethod[Callable[[LockCore, str], None]]] = []
        self._caps: dict[str, float] = {}
        """Owner -> ``max_hold`` of its acquire under way (`capped()`)."""
        self._settling = False
        """A `Settle` of the lock channel's count is under way (one per lock object)."""
        self._settle_failed = False
        """A `Settle` failed: none is tried again through this object (unlocks then go
        to the lock's channel: safe, as every listener hears them)."""
        self._registering: dict[str, bool] = {}
        """Owner -> its attempts are made while it listens on this client's channel (a
        refusal registers the client in the wake queue)."""
        self._until: dict[str, float] = {}
        """Owner -> end of its acquire's wait, while an attempt of it is under way: its
        script is sent again until then when it surely did not reach a server."""
        self.look_key = (type(self), self.key)
        """The client keeps one back-up look per kind and key, whichever lock object
        armed it last (`tenure.core.context.WakeChecks`)."""

    # ----------------------------------------------------------------- hooks
    def field(self, owner: str) -> str:
        """The hash field holding ``owner``'s hold count."""
        return owner

    def lease_ms(self, lease: float | None) -> int:
        """Wire lease of a hold: its own lease, or the watchdog's (the last one named is
        kept: a lock is mostly taken with one lease, twice per acquire and release)."""
        seconds = lease if lease is not None else self.ctx.watchdog_timeout
        last, ms = self._lease_ms
        if seconds != last:
            ms = to_ms(seconds)
            self._lease_ms = (seconds, ms)
        return ms

    def attempt(
        self, owner: str, lease: float | None, wait: float, again: bool = False
    ) -> Flow[int | None]:
        """One try. Returns None when granted, else the holder's remaining lease in ms.

        ``wait`` is the caller's whole wait in seconds (0 for one attempt), for locks whose
        script needs it (FairLock's queue deadline). ``again``: a retry within that wait,
        after a refused first attempt. Unless the owner holds this lock already (a late
        re-entry undone), the script then skips the re-entry and kind checks its first
        attempt made: a refusal costs one call on the server instead of two.
        """
        args: list[Any] = [self.lease_ms(lease), owner]
        hold = self.ctx.holds.get(self.key, self.field(owner))
        flag: Any = ""
        if hold is not None:
            flag = 2  # a re-entry: granted only on top of the hold the server still has
            args.append(2)
        elif again:
            flag = 1
            args.append(1)
        keys_ = [self.key]
        if (self._registering.get(owner) or self.ctx.hears(self.channel)) and self.targeted:
            # A waiter listening on its client channel: a refusal registers its client in
            # the wake queue, so the unlock can wake this client alone. Also a first
            # attempt made while this client's subscription lingers: a refusal there may
            # find it fresh and skip the retry, and the client must not stay in the queue
            # as "not seen waiting" (a half, put back by its own release): an unlock goes
            # to such a client only when no client seen waiting is left, so a client with
            # two waiters would take every unlock for the whole wait (reviewer R6, F1).
            keys_.append(self.wake_queue)
            args[2:] = [flag, self.ctx.identity.client_id]
        # Built as acquire_call() sends it (no copy on the way: this is every acquire).
        call = Call(
            self.acquire_script, keys_, args, changes=self._is_grant, until=self._until.get(owner)
        )
        reply = yield from self.acquire_call(owner, call, lease)
        if reply is not None:
            if reply in REENTRY_LOST:
                self.reentry_lost(owner, hold)
            return int(reply)
        self.granted(owner, lease)
        return None

    def reentry_lost(self, owner: str, hold: Hold | None) -> None:
        """An attempt made as a re-entry (``owner`` had ``hold`` in the table) found no hold
        of it on the server, and took nothing: report the loss (the ``lost`` flag, scopes
        cancelled, ``on_lost``; unless the keeper took the hold off meanwhile, as it then
        reports it) and raise LockLostError. The release of the earlier hold raises it too.

        A fresh grant counted as a re-entry would hide the loss: the inner release would
        free the lock while the outer body still runs (reviewer R8, F1)."""
        field = self.field(owner)
        if hold is not None:
            # Taken off in one step: a look, then a discard, let the keeper take it off as
            # lost in between and report it a second time (``on_lost`` twice).
            if self.ctx.holds.take(hold):
                self.hold_lost(owner)
            else:  # taken off as lost by the keeper meanwhile: a look makes its report now
                self.ctx.holds.get(self.key, field)
        raise LockLostError(
            f"lock {self.name!r}: the caller's earlier hold on this lock was lost; "
            "nothing was taken"
        )

    def acquire_call(self, owner: str, call: Call, lease: float | None) -> Flow[Any]:
        """Send an acquire script; its reply. Every `attempt()` sends through here.

        The grant's lease counts from just before the script is sent (monotonic clock). A
        grant whose reply came too late to leave any validity (elapsed + clock drift reaches
        the lease, e.g. a server or process paused meanwhile) may already belong to someone
        else: it is undone and raises `LateGrant`, and the caller goes on waiting.
        With ``wait_for_replicas``, a grant that too few replicas acknowledged is undone
        (one hold released again, Redisson's ``checkLockSyncedSlaves``) before the
        `ReplicationError` goes on to the caller; an attempt that granted nothing
        does not wait for replicas.
        """
        until = self._until.get(owner)
        if call.until != until or (
            call.changes is not self._is_grant and call.changes != self.is_grant
        ):
            call = replace(call, changes=self._is_grant, until=until)
        if self.ctx.reconciling:
            yield from self.after_reconcile(owner, until)
        sent = time.monotonic()
        if self.reentry_sets_expiry:
            hold = self.ctx.holds.get(self.key, self.field(owner))
            if hold is not None:
                # A re-entry, whose grant may shorten the lock's expiry: until the reply,
                # the hold counts valid no longer than the re-entry's lease (a reply read
                # late, after the key expired, must not leave 29 s believed; found by the
                # simulator: tests/test_sim.py).
                self.ctx.holds.narrowed(hold, self.applied_lease(lease), sent)
        try:
            reply = yield call
        except ReplicationError as error:
            if self.is_grant(error.reply):
                yield from self.undo_grant(owner)
            raise
        except (GeneratorExit, LockKindError):  # the script refused before writing
            raise
        except BaseException as error:
            # Timeout, lost connection, cancellation, KeyboardInterrupt: the script may have
            # run, now or later. Bring the server back to the holds the caller knows of.
            late = yield from self._reconcile_later(owner)
            if late is not None:
                raise late from error
            raise
        if self.is_grant(reply):
            applied = self.applied_lease(lease)
            if validity(applied, time.monotonic() - sent) <= 0:
                log.warning(
                    "lock %r: a grant to %s answered after its %.3f s lease: undone, waiting on",
                    self.name, owner, applied,
                )
                yield from self.undo_grant(owner)
                raise LateGrant
            self._sent[owner] = sent
        return reply

    def after_reconcile(self, owner: str, until: float | None = None) -> Flow[None]:
        """Wait while a reconcile of ``owner``'s holds on this lock runs (any lock object of
        this client may have started it). The reconcile releases what the server holds
        beyond the count recorded here; a new grant landing between its read of that count
        and its script would be taken for an orphan and undone under its holder.

        One look at the server first (``EXISTS``): a server still away fails it at once,
        and the caller gets that error within its socket timeout, not after the wait.
        ``until``: the end of an acquire's wait (monotonic): the wait ends there, as a
        refusal (`LateGrant`: a non-blocking acquire right after a cancelled release
        answers after the look, not after the reconcile's 0.1 s recheck; reviewer R6, F2).

        Raises BackendError: the look failed (its own error), or the reconcile has not
        ended after `RECONCILE_WAIT` seconds (the server has not answered it since).
        LateGrant: ``until`` came first."""
        pending = (self.key, self.field(owner))
        if pending not in self.ctx.reconciling:
            return
        yield Command(("EXISTS", self.key))
        waited, deadline = 0.0, time.monotonic() + RECONCILE_WAIT
        while pending in self.ctx.reconciling:
            if until is not None and time.monotonic() >= until:
                raise LateGrant
            # (Both: on a loaded machine the looks take longer than their pause.)
            if waited >= RECONCILE_WAIT or time.monotonic() >= deadline:
                raise BackendError(
                    f"lock {self.name!r}: an earlier acquire or release by this owner failed "
                    "and the server has not answered since (its outcome is being reconciled)"
                )
            yield Sleep(RECONCILE_POLL)  # a fault path only: a short look, no event needed
            waited += RECONCILE_POLL

    def is_grant(self, reply: Any) -> bool:
        """True if an acquire script's ``reply`` means the hold was granted."""
        return reply is None

    def undo_grant(self, owner: str) -> Flow[None]:
        """Release the one hold just granted to ``owner`` (not yet in the hold table)."""
        field = self.field(owner)
        hold = self.ctx.holds.get(self.key, field)
        lease = hold.leases[-1] if hold is not None and hold.leases else None
        try:
            yield from self.send_release(owner, lease)
        except (BackendError, ServerError) as error:  # a ReplicationError: undone there
            if not isinstance(error, ReplicationError):
                log.warning("lock %r: undoing an unreplicated grant failed: %s", self.name, error)

    def applied_lease(self, lease: float | None) -> float:
        """Seconds of lease a grant applies: its own, or the watchdog's."""
        return lease if lease is not None else self.ctx.watchdog_timeout

    def reconcile(self, owner: str, release: bool = False, sent: bool = True) -> Flow[None]:
        """After an acquire whose outcome is unknown (or a ``release`` that an interrupt or
        a BackendError cut short): release holds of ``owner`` that the server has beyond the
        count its client recorded (issue: orphan holds), atomically
        (`tenure.scripts.guarded()`), until the server says there are none. A release that
        waited for this flow in vain hands its hold over to it (`HANDOFF`).

        Runs in the background: retried with a growing pause (up to 0.25 s) while the server
        does not answer; it stops at once when the client is closed (ClientClosedError).
        Once the server answered "nothing to undo", it checks once more a moment later: a
        script still queued on the broken connection may run just after the first check.
        Not when that script was surely never ``sent`` (the owner's next acquire waits for
        this flow to end).
        """
        pause = RECONCILE_PAUSE[0]
        settled, enough = 0, 2 if sent else 1
        pending = (self.key, self.field(owner))
        recorded = 0
        try:
            while True:
                if settled >= enough:
                    with HANDOFF:
                        if self._recorded(owner) >= recorded:
                            self.ctx.reconciling.discard(pending)
                            return
                    # A release of this owner handed its hold over meanwhile (it waited for
                    # this flow in vain, `release()`): take that one off too.
                    settled = enough - 1
                field = self.field(owner)
                hold = self.ctx.holds.get(self.key, field)
                recorded = len(hold.leases) if hold is not None else 0
                lease = hold.leases[-1] if hold is not None and hold.leases else None
                try:
                    reply = yield from self.send_release(owner, lease, recorded)
                except LockKindError:  # another kind's key: nothing of ours to undo
                    return
                except ClientClosedError:  # it sends nothing more: the holds expire
                    raise
                except BackendError as error:
                    if isinstance(error, ReplicationError):
                        reply = error.reply
                    else:
                        yield Sleep(pause)
                        pause = min(2 * pause, RECONCILE_PAUSE[1])
                        continue
                if reply is None:
                    settled += 1
                    if settled < enough:
                        yield Sleep(RECONCILE_RECHECK)
                else:
                    if release:
                        log.info("lock %r: finished a release by %s cut short", self.name, owner)
                    else:
                        log.warning(
                            "lock %r: undid a grant to %s with a lost reply", self.name, owner
                        )
                    freed = int(reply)
                    if (freed >= 2 or freed == WOKE_SELF) and self.ctx.hears(self.channel):
                        yield Drain(self.channel)  # our own unlock: as release() reads it
                    if freed in FREED_TARGETED:  # the back-up look, as after a release()
                        yield from arm_look(self)
        finally:
            self.ctx.reconciling.discard(pending)

    def granted(self, owner: str, lease: float | None) -> Hold:
        """Record a hold the server just granted to ``owner`` (its script went through
        `acquire_call()`, which noted when it was sent)."""
        if self._lost:  # mostly empty: every grant comes here
            self._lost.discard(owner)
            self._lost_unreported.discard(owner)
        sent = self._sent.pop(owner, None)
        self._prune_in -= 1
        if self._prune_in <= 0:
            self._prune()
        return self.ctx.holds.push(
            self,
            self.key,
            owner,
            self.field(owner),
            self.renewal_script,
            lease,
            applied=self.applied_lease(lease),
            sent=time.monotonic() if sent is None else sent,
            cap=self._caps.get(owner),
            shortens=self.reentry_sets_expiry,
        )

    def per_owner(self) -> list[dict[str, Any] | set[str]]:
        """The per-owner state this object keeps (subclasses add theirs)."""
        return [self._lost, self._lost_unreported]

    def _prune(self) -> None:
        """Forget the per-owner state of owners that ended, once it doubled since the last
        look (amortised O(1) per grant; counted every `PRUNE_EVERY` grants, `granted()`
        counts down): a service that runs one task per request must not keep an entry per
        request for ever."""
        self._prune_in = PRUNE_EVERY
        tables = self.per_owner()
        if sum(len(t) for t in tables) < self._prune_at:
            return
        alive = self.ctx.identity.alive
        for table in tables:
            for owner in [o for o in table if not alive(o)]:
                if isinstance(table, set):
                    table.discard(owner)
                else:
                    del table[owner]
        self._prune_at = max(PRUNE_FIRST, 2 * sum(len(t) for t in tables))

    def wait_channel(self, owner: str) -> str:
        """The channel on which ``owner`` waits for an unlock."""
        return self.channel

    @cached_property
    def wake_queue(self) -> str:
        """The Lock's wake queue (`tenure.keys.lock_wake_queue()`), named once per object:
        every release sends it."""
        return keys.lock_wake_queue(self.key)

    @property
    def targeted(self) -> bool:
        """Whether this kind's waiters are woken one client at a time (docs/wire.md, "Wake
        queue"): the plain Lock, whose acquire script registers waiting clients and whose
        release script serves them. Other kinds wake every listening client."""
        return (
            self.acquire_script is LockCore.acquire_script
            and self.release_script is LockCore.release_script
        )

    def subscription(self, owner: str, since: float | None) -> Subscribe:
        """What ``owner``'s waiting subscribes: the kind's channel, and for a targeted kind
        this client's own channel beside it."""
        channel = self.wait_channel(owner)
        if not self.targeted:
            return Subscribe(channel, self.wake_all, since=since)
        client_id = self.ctx.identity.client_id
        relay = Call(
            scripts.get("lock_wake"),
            [self.key, self.channel, self.wake_queue],
            [self.unlock_message, client_id],
        )
        alias = keys.lock_client_channel(self.key, client_id)
        return Subscribe(channel, self.wake_all, since=since, alias=alias, relay=relay)

    def recheck_after_subscribe(self, owner: str, ttl: int) -> bool:
        """Whether to try again once subscribed, after a first attempt that saw ``ttl``:
        an unlock published before the subscription would be missed otherwise. FairLock
        skips it for a waiter queued behind the head (only the head is sent an unlock)."""
        return True

    def give_up(self, owner: str) -> Flow[None]:
        """Cleanup after a wait that ended without the lock (FairLock leaves its queue)."""
        return
        yield  # a generator with no effects

    def release_call(self, owner: str, lease: float | None) -> Call:
        """The script call releasing one hold of ``owner``, whose newest remaining hold
        (after this release) has ``lease``. Reply: nil = not held, 0 = holds remain,
        1 = the caller's last hold is gone.

        The last ARGV, 1 when this client's subscription to the channel lingers with no
        waiter (it is nobody to wake), 2 when it has no waiter but, at the end of its
        lingering, still counts as a listener (lock_release.lua), is sent only then
        (`send_release()` adds a 0 in front of the reconcile guard's ARGV): every word
        costs the client an encoding."""
        args: list[Any] = [self.unlock_message, self.lease_ms(lease), self.field(owner)]
        subscriptions = self.ctx.subscriptions
        if subscriptions.idle_listener(self.channel):
            args.append(1)
        elif self.targeted and subscriptions.unwaited(self.channel):
            # Else the unlock could go to this client alone, which would pass it on
            # (lock_wake) a round trip and a thread later: the handoff's slowest 5 %.
            args.append(2)
        # The script builds the channel, keys.lock_channel(): one word less to encode.
        return Call(self.release_script, [self.key, self.wake_queue], args, changes=True)

    def send_release(
        self, owner: str, lease: float | None, recorded: int | None = None
    ) -> Flow[Any]:
        """Send `release_call()`; its reply (a ReadWriteLock side may send it again).

        ``recorded``: release only if ``owner`` holds more than that on the server (see
        `reconcile()`); the reply is then nil when it does not.
        """
        call = self.release_call(owner, lease)
        if recorded is None:
            return (yield call)
        if call.script is LockCore.release_script and len(call.args) == 3:
            call = replace(call, args=[*call.args, 0])  # the guard's ARGV come after ARGV[4]
        return (yield guard(call, self.field(owner), recorded))

    def send_force_release(self) -> Flow[Any]:
        """Send `force_release_call()`; its reply (as `send_release()`)."""
        return (yield self.force_release_call())

    def renewal_keys(self, owner: str, holds: int) -> list[str]:
        """The KEYS the watchdog's renewal script needs for ``owner``'s ``holds`` holds."""
        return [self.key]

    def renewal_channel(self) -> str:
        """Where the watchdog's renewal tells waiters the new lease (``keys.RENEWED_PREFIX``):
        the channel they wait on, so that they sleep on to the new lease end instead of
        re-checking at the old one."""
        return self.channel

    def force_release_call(self) -> Call:
        """The script call deleting the lock whoever holds it. Reply: 1 if it was held."""
        return Call(
            self.force_release_script,
            [self.key, self.channel],
            [self.unlock_message],
            changes=True,
        )

    # ----------------------------------------------------------------- flows
    def acquire(
        self, owner: str, blocking: object, timeout: object, lease_time: object
    ) -> Flow[bool]:
        """Acquire one hold. Arguments are checked now, before the flow runs any I/O."""
        wait = check_wait(blocking, timeout)
        lease = check_lease(lease_time)
        return self._acquire(owner, wait, lease)

    def _acquire(self, owner: str, wait: float, lease: float | None) -> Flow[bool]:
        deadline = Deadline(wait)
        channel: str | None = None
        in_flight = granted = False
        before = 0  # holds recorded before the attempt in flight
        try:
            now = time.monotonic()
            sent: float | None = now
            yielding = False
            grace = self.ctx.yields.left(self.key, now)
            if grace > 0 and wait > 0 and self.ctx.holds.get(self.key, self.field(owner)) is None:
                # Our last release woke other clients' waiters: let one of them take the
                # lock rather than barge ahead of it; try once the grace ends or on unlock.
                # (taken: another thread of this client may have taken it meanwhile.)
                self.ctx.yields.take(self.key, now)
                ttl: int | None = max(1, int(grace * 1000))
                sent, yielding = None, True
            else:
                hold = self.ctx.holds.get(self.key, self.field(owner))
                in_flight, before = True, len(hold.leases) if hold is not None else 0
                # try_once(), inline: every acquire makes this attempt (one frame less)
                self._until[owner] = deadline.end
                try:
                    ttl = yield from self.attempt(owner, lease, wait)
                except LateGrant:
                    ttl = 0
                finally:
                    self._until.pop(owner, None)
                in_flight = False
            tried = sent is not None
            if ttl is not None and deadline.remaining() > 0:
                subscribe = self.subscription(owner, sent)
                # Before the yield: an interrupt that lands once the subscription was made
                # (after the listener's answer, before the flow got it) is thrown at the
                # yield, and the clean-up must leave the channel (a no-op if it failed).
                channel = subscribe.channel
                # True: the channel was subscribed and quiet before that attempt (a lock
                # taken again and again), so an unlock since is sure to wake us: no retry.
                fresh = yield subscribe
                if subscribe.alias is not None:
                    self._registering[owner] = True
                yielded: bool | None = None  # a yield ended: by an unlock (True), its timer
                if not self.recheck_after_subscribe(owner, ttl):
                    yield Wait(channel, wait_for(ttl, deadline))
                    # Woken (or timed out): the next attempt is due, fresh or not.
                    fresh, sent = False, 0.0
                while True:
                    if fresh is not True and sent is not None:
                        # again=False only for the first attempt (after a yield's grace)
                        in_flight, before = True, self._recorded(owner)
                        ttl = yield from self.try_once(
                            owner, lease, wait, again=tried, until=deadline.end
                        )
                        in_flight = False
                        tried = True
                        if yielded is not None:  # the next yield's length, or none
                            self.ctx.yields.ended(self.key, ttl is not None, yielded)
                            yielded = None
                    fresh, sent = False, 0.0
                    if ttl is None or deadline.remaining() <= 0:
                        break
                    # A yield's end is no lease end: the waiters' shared re-check (and a
                    # renewal message, perhaps read late, that moves it) is not its timer.
                    shared = self.shares_recheck and not yielding
                    patience = deadline.remaining() if shared else None
                    woke = yield Wait(channel, wait_for(ttl, deadline), patience)
                    if yielding and deadline.remaining() > 0:
                        yielded = bool(woke)
                    yielding = False
            if not tried and ttl is not None:
                # A yield took the whole wait (a tiny timeout): every acquire makes one
                # attempt all the same, as with timeout=0 (reviewer R3, F4).
                in_flight, before = True, self._recorded(owner)
                ttl = yield from self.try_once(owner, lease, wait, until=deadline.end)
                in_flight = False
            granted = ttl is None
            if channel is not None:
                self._registering.pop(owner, None)  # set only once subscribed
                held = self.applied_lease(lease) if granted else None
                yield Unsubscribe(channel, pass_on=granted and self.shared, lease=held)
                channel = None
            if not granted:
                yield from self.give_up(owner)
                return False
            yield WATCH_HOLDS
            return True
        except GeneratorExit:
            raise
        except BaseException as error:
            # Interrupted (cancelled, a signal handler raised, an error). A second interrupt
            # may land anywhere in the clean-up (a sync handler runs between bytecodes): it
            # starts again from the top, every step idempotent, so that a grant the caller
            # never learns of cannot stay in the hold table, renewed for ever. No call
            # before the `try` (each is a place a handler may run), and the last interrupt
            # is raised once the clean-up ran.
            second: BaseException | None = None
            tries = 0
            while tries < CLEAN_UP_TRIES:
                tries += 1
                try:
                    late = yield from self._clean_up(
                        owner, channel, error, granted, in_flight, before
                    )
                    second = late or second
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    second = interrupt
            if second is not None:
                raise second from error
            raise

    def try_once(
        self,
        owner: str,
        lease: float | None,
        wait: float,
        again: bool = False,
        until: float | None = None,
    ) -> Flow[int | None]:
        """`attempt()`, with a late grant (undone) counted as a refusal to retry at once.

        ``until``: the end of the caller's wait (monotonic); up to then the attempt's script
        is sent again when it surely did not reach a server (``Call.until``: a failover)."""
        if until is not None:
            self._until[owner] = until
        try:
            return (yield from self.attempt(owner, lease, wait, again))
        except LateGrant:
            return 0
        finally:
            if until is not None:
                self._until.pop(owner, None)

    def _recorded(self, owner: str) -> int:
        """``owner``'s holds of this lock recorded in the client's hold table."""
        hold = self.ctx.holds.get(self.key, self.field(owner))
        return len(hold.leases) if hold is not None else 0

    def _clean_up(
        self,
        owner: str,
        channel: str | None,
        error: BaseException,
        granted: bool,
        in_flight: bool,
        before: int,
    ) -> Flow[BaseException | None]:
        """The clean-up of an acquire that ``error`` interrupted; run again from the top when
        another interrupt lands in it, so each step is idempotent.

        The caller never learns that it holds, so a grant must not stay behind, renewed by
        the watchdog: one this acquire recorded (``granted``, or an attempt ``in_flight``
        whose reply was handled: more than ``before`` holds recorded) leaves the hold table
        now (no I/O: never renewed again), and a background reconcile releases on the server
        whatever is beyond the holds still recorded (a grant whose reply was being handled
        when the interrupt came included). Not after tenure's own error: that attempt's
        outcome was handled. Then the waiter leaves ``channel`` (`_leave()`; also after
        a failed first attempt or subscription) and the wait's queue (FairLock).
        Returns an interrupt a step took, for the caller to raise."""
        self._registering.pop(owner, None)
        late = None
        if granted or (in_flight and not isinstance(error, LockError)):
            if before == 0:  # the whole entry (an interrupted pop may have left it empty)
                self.ctx.holds.discard(self.key, self.field(owner))
            while self._recorded(owner) > before > 0:
                self.ctx.holds.pop(self.key, self.field(owner))
            late = yield from self._reconcile_later(owner)
        late = (yield from self._leave(channel)) or late
        yield from self._give_up_quietly(owner)
        return late

    def _leave(self, channel: str | None) -> Flow[BaseException | None]:
        """The waiter leaves ``channel`` (a no-op without a ticket, or without a channel);
        an interrupt there (another signal, a second cancellation while it waits for the
        listener's mutex) makes it leave again, up to `CLEAN_UP_TRIES` times: the last
        such interrupt is returned, for the caller to raise once its clean-up ran."""
        tries, late = 0, None
        while channel is not None and tries < CLEAN_UP_TRIES:
            try:
                tries += 1
                yield Unsubscribe(channel, pass_on=True)
                break
            except GeneratorExit:
                raise
            except BaseException as interrupt:
                late = interrupt
        return late

    def _reconcile_later(
        self, owner: str, release: bool = False, sent: bool = True
    ) -> Flow[BaseException | None]:
        """Start `reconcile()` of ``owner`` (``release``, ``sent``: its arguments) in the
        background, unless one is pending. An
        interrupt thrown in at its `Background` (a second signal handler raising before the
        runner spawned it, or after) is answered by yielding the same flow again, up to
        `CLEAN_UP_TRIES` times (the runner runs it once): the last such interrupt is
        returned, for the caller to raise once its own clean-up ran; None if none came."""
        pending = (self.key, self.field(owner))
        if pending in self.ctx.reconciling:
            return None
        tries, back, late = 0, None, None
        while tries < CLEAN_UP_TRIES:
            try:
                tries += 1
                self.ctx.reconciling.add(pending)  # in the try: a handler may raise after it
                back = back or self.reconcile(owner, release, sent)
                yield Background(back)
                break
            except GeneratorExit:
                raise
            except BaseException as interrupt:
                late = interrupt
        return late

    def _interrupted_release(
        self, owner: str, recorded: int, sent: bool
    ) -> Flow[BaseException | None]:
        """The clean-up of a release an interrupt cut short: ``owner`` had ``recorded``
        holds when it began; ``sent``: its script may have gone. One leaves the hold table
        if it is still there (no I/O: never renewed again), then `_reconcile_later()`; its
        return. Idempotent: run again when another interrupt lands in it. A reconcile of
        ``owner`` still pending (an earlier release of it failed too) takes the hold off
        in its stead."""
        with HANDOFF:  # against the last read of a pending reconcile
            if recorded == 1:  # the whole entry (an interrupted pop may have left it empty)
                self.ctx.holds.discard(self.key, self.field(owner))
            while self._recorded(owner) >= recorded > 1:
                self.ctx.holds.pop(self.key, self.field(owner))
            if (self.key, self.field(owner)) in self.ctx.reconciling:
                return None  # it is still running: its next read takes this hold off too
        return (yield from self._reconcile_later(owner, release=True, sent=sent))

    def _give_up_quietly(self, owner: str) -> Flow[None]:
        """`give_up()` on an error path: a second failure must not hide the first."""
        try:
            yield from self.give_up(owner)
        except (BackendError, ServerError) as error:
            log.warning("lock %r: cleanup after a failed acquire failed: %s", self.name, error)

    def release(self, owner: str) -> Flow[None]:
        """Release one hold of ``owner``; see [`tenure.Lock.release()`][tenure.Lock.release]."""
        recorded: int | None = None
        sending = False
        try:
            # (Every step in the try: an interrupt after any of them is seen below.)
            recorded = self._recorded(owner)
            field = self.field(owner)
            if recorded and self.ctx.reconciling and (self.key, field) in self.ctx.reconciling:
                # An earlier release (or acquire) of this owner is being finished in the
                # background, behind the guard: it counts on the holds recorded, and this
                # release would change them under it (one hold taken off twice, and a
                # false loss reported here). Wait for it; if the server stays away, hand
                # this hold over to it (below) and raise its BackendError. (With none
                # recorded there is nothing to hand over: a RedLock releasing a member whose
                # acquire failed, its server down, must not wait out RECONCILE_WAIT.)
                yield from self.after_reconcile(owner)
            # Forget the hold first: the watchdog must not renew it or take its deletion for
            # a loss. If the script then fails, the release is finished in the background.
            hold = self.ctx.holds.pop(self.key, field)
            if hold is None and (
                owner in self._lost_unreported or self.ctx.holds.loss_at_release(self.key, field)
            ):
                # Its lease surely ended (the keeper saw it on the clock, or a renewal found
                # it gone; reported or not yet): say so now, with no I/O. The server forgets
                # the hold with its lease.
                self._lost_unreported.discard(owner)
                raise LockLostError(
                    f"lock {self.name!r}: the hold expired or was taken before release"
                )
            lease = hold.leases[-1] if hold is not None and hold.leases else None
            sent = time.monotonic()
            if hold is not None and hold.leases:
                # Holds are left: until the reply, count them valid no longer than the lease
                # the release re-applies to them from when it runs.
                self.ctx.holds.narrowed(hold, self.applied_lease(lease), sent)
            sending = True
            reply = yield from self.send_release(owner, lease)
        except ReplicationError as error:  # the release took effect on the primary
            self.released(owner, hold, error.reply)
            raise
        except (GeneratorExit, ServerError, LockKindError, NotOwnedError):
            # The server answered: a refusal that trying again cannot cure (the guarded
            # release would be refused alike; the hold expires with its lease), or nothing
            # was held. The caller's to handle.
            raise
        except BaseException as error:
            # A BackendError (a timeout, a dropped connection, the server away: the script
            # may have run, or may yet run, or never went), or cancelled, or a signal
            # handler raised, before the script went or while its reply was awaited: the
            # caller meant to let the lock go, and nobody renews the hold (it left the
            # table). Finish it in the background rather than leave the lock held to its
            # lease end (reviewer R3, F3; R4): the hold left the table unless the interrupt
            # came first, and the reconcile releases on the server whatever is beyond the
            # holds still recorded (`_reconcile_guard.lua`: a release that ran, its reply
            # lost, takes off no second hold). The caller still gets its error.
            # Run again from the top when a second interrupt lands in it (as an acquire's).
            second: BaseException | None = None
            tries = 0
            while tries < CLEAN_UP_TRIES:
                tries += 1
                try:
                    if recorded is None:
                        # Cut short before it read the owner's count (reviewer R5, S3):
                        # nothing changed yet, so the count now is the one it would read.
                        recorded = self._recorded(owner)
                    late = yield from self._interrupted_release(owner, recorded, sending)
                    second = late or second
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    second = interrupt
            if second is not None:
                raise second from error
            raise
        self.released(owner, hold, reply)
        self.ctx.subscriptions.put_back_ran(self.channel, sent)
        if hold is not None and hold.leases and reply is not None and int(reply) == 0:
            if not self.ctx.holds.reapplied(hold, self.applied_lease(lease), sent):
                # The keeper took the holds left off as lost while the release was on its
                # way (by the client's clock an inner hold's short lease ran out first), and
                # reported them; but the release kept them on the server and re-applied
                # their lease: orphans, which would let this owner's next acquire in as a
                # re-entry the client does not count. Release them (found by the simulator,
                # seed 1115 of --rwlocks -1 --drops 5).
                late = yield from self._reconcile_later(owner)
                if late is not None:
                    raise late
        elif (
            reply is not None
            and (int(reply) >= 2 or int(reply) == WOKE_SELF)
            and self.ctx.hears(self.channel)
        ):
            # Our own unlock came back to our own socket (on the lock's channel, or on this
            # client's own when it went to us alone): read it now, so that a waiter here
            # takes it, or, with none left, it is passed on to another client.
            yield Drain(self.channel)
        if reply is not None and int(reply) in FREED_TARGETED:
            # The back-up look, one per lock object, moved later by each such unlock: made
            # by the client's one flow of looks, started only when none runs. Also when the
            # unlock went to our own client alone: another waiter of ours may take the lock
            # with a shorter lease, and the queued clients must hear its end (`-<ms>`).
            yield from arm_look(self)
        if isinstance(reply, bytes | str) and not (self._settling or self._settle_failed):
            # The server's count of the lock's channel could not be true (Valkey 9.0-9.1,
            # docs/wire.md), so the unlock went to the channel: settle that count, so that
            # the next unlocks go to one client again.
            self._settling = True
            yield Background(self._settle())
        if self.has_after_release:
            after = self.after_release(owner)
            if after is not None:
                yield from after

    has_after_release = False
    """The kind has an `after_release()` step (a flag: every release reads it, and a call
    costs more)."""

    def after_release(self, owner: str) -> Flow[None] | None:
        """A kind's own step after a release that ran: a flow to run at the end of
        `release()`, or None (FairLock watches its queue head's turn). A hook, not a
        `release()` override wrapping this one: the caller's release must begin in this
        flow's first step, so that an interrupt before it is seen by the runner as one
        before the flow began (`tenure.aio.runner.AsyncDriver.release_by`)."""
        return None

    def _settle(self) -> Flow[None]:
        try:
            yield Settle(self.channel)
        except (BackendError, ServerError) as error:  # an ACL refusing MULTI or SUBSCRIBE
            self._settle_failed = True
            log.warning("lock %r: its channel's listener count not settled: %s", self.name, error)
        finally:
            self._settling = False

    def _wake_check(self) -> Flow[None]:
        """The back-up look of targeted unlocks (`WAKE_CHECK_GRACE`, docs/wire.md), made by
        `wake_checks()` once no such unlock of this object is younger than the grace: wake
        the next client if the lock is still free."""
        yield Call(
            scripts.get("lock_wake_check"),
            [self.key, self.channel, self.wake_queue],
            [self.unlock_message],
            changes=True,
        )

    def released(self, owner: str, hold: Hold | None, reply: Any) -> None:
        """Apply a release script's reply to the hold table (raises if it was not owned).

        ``hold``: what `release()` took off the table before the script, None if nothing.
        """
        if reply is None:
            self.ctx.holds.discard(self.key, self.field(owner))
            self.not_owned(owner, hold)
            return
        freed = int(reply)
        if freed >= 1 or freed in FREED_TARGETED:
            if hold is not None and hold.leases:
                # The table counted more holds than the server had: none is left, and the
                # caller still counts on the others (a hold lost, then granted afresh by a
                # script that took it for a re-entry; a failover to a replica that missed
                # a re-entry). A loss: reported, not discarded quietly (reviewer R8, F1).
                # (When the release took the last one, the entry is gone already; only
                # this owner adds to it, and it is releasing. The keeper may have taken it
                # off meanwhile: it reports it then.)
                field = self.field(owner)
                if self.ctx.holds.get(self.key, field) is hold:
                    self.ctx.holds.discard(self.key, field)
                    self.hold_lost(owner)
            # 1 + the subscribers the unlock reached, of which this client's own (waited on
            # or lingering) subscription is one if it has one: the rest are other clients.
            # WOKE_OTHER: the unlock went to one other client alone (the wake queue).
            # (An unlock that reached nobody, 1, needs no look at the subscriptions.)
            others = freed - 1 - self.ctx.hears(self.channel) if freed >= 2 else 0
            if others > 0 or freed == WOKE_OTHER:
                self.ctx.yields.start(self.key, time.monotonic())

    def not_owned(self, owner: str, hold: Hold | None) -> None:
        """Raise for a release the server refused: LockLostError if we held it, else NotOwned."""
        if hold is not None:
            self.hold_lost(owner)
        if owner in self._lost_unreported:
            self._lost_unreported.discard(owner)
            raise LockLostError(f"lock {self.name!r}: the hold expired or was taken before release")
        raise NotOwnedError(f"lock {self.name!r} is not held by the caller")

    def hold_lost(self, owner: str) -> None:
        """Report ``owner``'s hold lost: the ``lost`` flag, then the ``on_lost`` callback.
        The next release raises LockLostError, unless one already did (it ran between the
        keeper's finding and this report)."""
        self._lost.add(owner)
        if not self.ctx.holds.loss_reported(self.key, self.field(owner)):
            self._lost_unreported.add(owner)
        for scope in self.ctx.holds.scopes_lost(self.key, self.field(owner)):
            scope.lost()  # the body guarded by the hold is cancelled first
        for ref in list(self._loss_listeners):
            listener = ref()
            if listener is None:
                self._loss_listeners.remove(ref)
                continue
            try:
                listener(self, owner)
            except Exception:
                log.exception("loss listener of lock %r failed", self.name)
        if self.on_lost is not None:
            self.ctx.deliver(self.on_lost, f"on_lost callback of lock {self.name!r}")

    def add_doubt_listener(self, listener: Callable[[LockCore, str], None]) -> None:
        """Also tell bound method ``listener(core, owner)`` of every hold gone in doubt
        (MultiLock/RedLock roll member jeopardy up); held weakly."""
        self._doubt_listeners.append(weakref.WeakMethod(listener))

    def add_loss_listener(self, listener: Callable[[LockCore, str], None]) -> None:
        """Also tell bound method ``listener(core, owner)`` of every hold reported lost.

        Used by MultiLock/RedLock to roll member losses up; held weakly.
        """
        self._loss_listeners.append(weakref.WeakMethod(listener))

    def is_lost(self, owner: str) -> bool:
        return owner in self._lost

    # ------------------------------------------------ validity, jeopardy, scopes, caps
    def hold_in_doubt(self, owner: str) -> None:
        """A renewal of ``owner``'s hold failed while it is still valid: ``on_doubt``."""
        for ref in list(self._doubt_listeners):
            listener = ref()
            if listener is None:
                self._doubt_listeners.remove(ref)
                continue
            try:
                listener(self, owner)
            except Exception:
                log.exception("doubt listener of lock %r failed", self.name)
        if self.on_doubt is not None:
            self.ctx.deliver(self.on_doubt, f"on_doubt callback of lock {self.name!r}")

    def valid_for(self, owner: str) -> float:
        """Seconds ``owner``'s hold is surely still valid on the local monotonic clock
        (last confirmed grant or renewal + lease - drift allowance - now); 0.0 when it
        holds nothing or its hold was lost. No I/O."""
        hold = self.ctx.holds.get(self.key, self.field(owner))
        return 0.0 if hold is None else hold.valid_for(time.monotonic())

    def checkpoint(self, owner: str) -> None:
        """Raise LockLostError when ``owner``'s hold was lost or its validity ran out,
        NotOwnedError when it holds nothing (and lost nothing). No I/O."""
        hold = self.ctx.holds.get(self.key, self.field(owner))
        if hold is None:
            if owner in self._lost:
                raise LockLostError(f"lock {self.name!r}: the caller's hold was lost")
            raise NotOwnedError(f"lock {self.name!r} is not held by the caller")
        if hold.valid_for(time.monotonic()) <= 0:
            raise LockLostError(
                f"lock {self.name!r}: the caller's lease ran out before a renewal was confirmed"
            )

    def in_doubt(self, owner: str) -> bool:
        """Jeopardy of ``owner``'s hold (`tenure.core.holds.Hold.in_doubt()`)."""
        hold = self.ctx.holds.get(self.key, self.field(owner))
        period = self.ctx.watchdog_timeout / 3
        return hold is not None and hold.in_doubt(time.monotonic(), period)

    def watch(self, owner: str, scope: LossScope) -> bool:
        """Tell ``scope`` when ``owner``'s hold is reported lost; False if none is held."""
        return self.ctx.holds.watch(self.key, self.field(owner), scope)

    def unwatch(self, owner: str, scope: LossScope) -> None:
        self.ctx.holds.unwatch(self.key, self.field(owner), scope)

    def execute_if_held(self, owner: str, command: tuple[Any, ...], cluster: bool) -> Flow[Any]:
        """A guarded write: run ``command`` (one Redis command, its name first) atomically,
        only while ``owner`` still holds this lock on the server; its reply. Checked now,
        before any I/O: a command of str/bytes/int/float words, and, in a ``cluster``, a
        first key (the word after the command name) in the lock's slot."""
        args = check_command(command)
        if cluster and len(args) > 1 and keys.key_slot(_word(args[1])) != keys.key_slot(self.key):
            raise ValueError(
                f"execute_if_held: key {args[1]!r} is not in the cluster slot of lock "
                f"{self.name!r}; name it with the lock's hash tag, "
                f'"{{{keys.slot_tag(self.key)}}}:..."'
            )
        return self._execute_if_held(owner, args)

    def _execute_if_held(self, owner: str, args: tuple[Any, ...]) -> Flow[Any]:
        field = self.field(owner)
        hold = self.ctx.holds.get(self.key, field)
        if hold is None:
            if owner in self._lost:
                raise LockLostError(f"lock {self.name!r}: the caller's hold was lost; not run")
            raise NotOwnedError(f"lock {self.name!r} is not held by the caller; not run")
        # The first key is declared too (every key a script touches comes in KEYS; a
        # multi-key command's further keys must share the slot, as in any script).
        declared = [self.key, *map(_word, args[1:2])]
        reply = yield Call(GUARDED_EXECUTE, declared, [field, *args], changes=True)
        if int(reply[0]) != 1:
            if self.ctx.holds.get(self.key, field) is hold:
                self.ctx.holds.discard(self.key, field)
                self.hold_lost(owner)
            raise LockLostError(
                f"lock {self.name!r}: the hold expired or was taken; the command did not run"
            )
        return reply[1] if len(reply) > 1 else None

    def capped(self, owner: str, max_hold: object, acquiring: Flow[T]) -> Flow[T]:
        """``acquiring`` (an acquire flow of ``owner``) whose grant is renewed for at most
        ``max_hold`` seconds (checked now, before any I/O): after that the watchdog stops
        renewing, so the hold ends at most ``max_hold`` + lease after the grant."""
        if max_hold is None:
            return acquiring
        cap = check_positive(max_hold, "max_hold")
        return self._capped(owner, cap, acquiring)

    def _capped(self, owner: str, cap: float, acquiring: Flow[T]) -> Flow[T]:
        self._caps[owner] = cap
        try:
            return (yield from acquiring)
        finally:
            self._caps.pop(owner, None)

    def locked(self) -> Flow[bool]:
        return bool((yield Command(("EXISTS", self.key))))

    def owned(self, owner: str) -> Flow[bool]:
        return bool((yield Command(("HEXISTS", self.key, self.field(owner)))))

    def hold_count(self, owner: str) -> Flow[int]:
        reply = yield Command(("HGET", self.key, self.field(owner)))
        return int(reply) if reply is not None else 0

    def remaining_lease(self) -> Flow[float | None]:
        return lease_from_pttl((yield Command(("PTTL", self.key))))

    def force_release(self) -> Flow[bool]:
        reply = yield from self.send_force_release()
        return int(reply) == 1

    # ----------------------------------------------------------------- extend
    def extend_call(self, owner: str, add_ms: int) -> Call:
        """The script call adding ``add_ms`` to ``owner``'s hold. Reply: nil when it holds
        nothing, else the new remaining lease in ms (-1: the key has no expiry)."""
        return Call(
            self.extend_script,
            [self.key],
            [self.field(owner), add_ms, to_ms(MAX_SECONDS)],
            changes=True,
        )

    def extend(self, owner: str, additional_time: object) -> Flow[None]:
        """Add ``additional_time`` seconds to ``owner``'s leased hold; see
        [`tenure.Lock.extend()`][tenure.Lock.extend]. The argument is checked now, before any
        I/O."""
        add = check_positive(additional_time, "additional_time")
        return self._extend(owner, to_ms(add))

    def _extend(self, owner: str, add_ms: int) -> Flow[None]:
        field = self.field(owner)
        hold = self.ctx.holds.get(self.key, field)
        if hold is None:
            self.not_owned(owner, None)  # LockLostError if a loss was reported, else NotOwned
            return
        if hold.watchdog:
            raise LockError(
                f"lock {self.name!r}: the caller's hold is renewed by the watchdog (taken "
                "without lease_time); extend() applies to holds taken with lease_time"
            )
        sent = time.monotonic()
        reply = yield self.extend_call(owner, add_ms)
        if reply is None:
            if self.ctx.holds.get(self.key, field) is hold:
                self.ctx.holds.discard(self.key, field)
            self.not_owned(owner, hold)
            return
        if int(reply) >= 0:
            self.ctx.holds.extended(hold, int(reply) / 1000, sent)

    def expire(self, lease: float, owner: str | None = None) -> Flow[None]:
        """Set the lock's expiry to ``lease`` seconds from now (MultiLock, once all are held);
        ``owner``'s hold then counts its validity from that lease."""
        sent = time.monotonic()
        yield Command(("PEXPIRE", self.key, to_ms(lease)))
        hold = None if owner is None else self.ctx.holds.get(self.key, self.field(owner))
        if hold is not None:
            self.ctx.holds.extended(hold, lease, sent)


GUARDED_EXECUTE = scripts.get("guarded_execute")


def check_command(command: tuple[Any, ...]) -> tuple[Any, ...]:
    """A Redis command for `LockCore.execute_if_held()`: a name and its arguments, each
    a str, bytes, int or float (TypeError otherwise, ValueError when empty)."""
    if not command:
        raise ValueError("execute_if_held needs a command, e.g. ('SET', key, value)")
    for word in command:
        if isinstance(word, bool) or not isinstance(word, str | bytes | int | float):
            raise TypeError(
                f"execute_if_held: command words are str, bytes, int or float, not "
                f"{type(word).__name__}"
            )
    return tuple(command)


def _word(word: Any) -> str:
    return word.decode(errors="replace") if isinstance(word, bytes) else str(word)


def lease_from_pttl(pttl: int) -> float | None:
    """PTTL reply -> seconds left: None for no key (-2), ``math.inf`` for no expiry (-1)."""
    if pttl == -2:
        return None
    if pttl == -1:
        return math.inf
    return pttl / 1000
