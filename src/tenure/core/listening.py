"""The decisions of one shared pub/sub connection, sans I/O (docs/internals.md, "Waiting").

One client has one pub/sub connection per server (per shard in a cluster), shared by every
waiting thread or task. `tenure.core.parking` decides whom a message wakes; this module
decides everything else the connection's driver (``tenure.aio.listener`` and its generated
sync twin) does, as plain data in and actions out. The driver keeps only the socket, the
mutex and one condition per waiter; it calls these methods under its mutex, then does the
I/O they return, outside the decision (httpcore 1.x's connection pool is the model).

Rules:

- **The waiters read the socket themselves** (leader/follower): one waiter at a time is the
  reader; the others sleep on their own condition, the longest asleep first in line. A
  waiter that stops waiting hands the socket to the longest-sleeping waiter
  (`Listening.hand_on()`). While the connection is down nobody reads: the janitor (a
  background thread or task) makes it again and then hands the socket on.
- A notify for the reader blocked on the socket (a wake-up, or the lease-end re-check
  handed to it) is sent as a PING whose reply ends its read (`Listening.poke()`).
- **Questions and answers:** each SUBSCRIBE sent is remembered in order; an error reply is
  the answer to the oldest. ``-NOPERM`` is an answer for those channels' waiters only (no
  reconnect); any other refusal (MOVED, CROSSSLOT) marks every unconfirmed channel dropped,
  its waiters re-check and move it where the refreshed topology says.
- **Health:** after `HEALTH_INTERVAL` seconds of silence the reader PINGs; if that
  PING goes unanswered for the driver's timeout, the connection is given up.
- **Interrupted sends:** an interrupt that cuts short a send the table counted gives the
  connection up (`Listening.lost()`, ``interrupted``): whether the server got it is
  unknown, and a new connection subscribed from the table is the only true count.
- **Reconnect:** after a loss the janitor connects again after a pause that grows from
  `FIRST_RETRY` to `MAX_RETRY`; the new connection subscribes every channel
  still waited on (one per SSUBSCRIBE when sharded: one slot per command), and each
  channel's waiters re-check once its new SUBSCRIBE is confirmed, never before
  (`tenure.core.parking.Parking.disconnected()`).
- **Lingering:** a channel stays subscribed `LINGER` seconds after its last waiter
  left; the janitor sends its UNSUBSCRIBE once that time is up (never a waiter: see
  `Listening.plan_read()`).
- **Relaying:** a waiter that gives up on a Lock (its wait timed out, or it was cancelled)
  leaves its channel and alias (the client channel) lingering with no waiter, and its
  client registered in the wake queue: an unlock sent to this client alone (docs/wire.md,
  "One client woken per unlock") then waits on a socket nobody reads but the janitor, to
  be passed on. While such a channel lingers, the janitor reads what came every
  `RELAY_POLL` seconds (`Listening.janitor_plan()`); the leaving waiter wakes it only when
  its next look is further away than that (`Listening.left()`). The janitor skips these
  reads while a waiter of the client reads the socket (it passes on what comes); a reader
  that hands the socket on to nobody wakes it again. A waiter that leaves with
  the lock does not: its client holds the lock, whose next unlock is its own (a client
  taking a lock in a loop costs no janitor wake-up per acquisition).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Literal

from tenure.core.parking import Parking, Ticket

HEALTH_INTERVAL = 30.0
"""Seconds of silence after which the reader PINGs the server to notice a dead connection."""
LINGER = 0.5
"""Seconds a channel stays subscribed after its last waiter left: a lock taken again and
again (contention) costs no SUBSCRIBE/UNSUBSCRIBE per acquisition, and a waiter who joins a
quiet subscription need not try twice (`tenure.core.parking.Parked.fresh()`)."""
FIRST_RETRY = 0.05
"""Seconds before the first reconnection attempt after a loss; doubled per failure."""
MAX_RETRY = 1.0
"""The longest pause between two reconnection attempts (seconds)."""
JANITOR = "janitor"
"""The reader's key of the janitor."""
IDLE_MARGIN = 0.1
"""Seconds before a lingering channel is let go during which a release counts it as a
listener again (`Listening.idle_listener()`)."""
MIN_JANITOR_NAP = 0.01
"""The janitor's shortest sleep (seconds): a due time already past is looked at this soon."""
RELAY_POLL = 0.005
"""Seconds between the janitor's reads while a channel whose waiter gave up lingers (module's
rules, "Relaying"): an unlock sent to this client alone is passed on within about this plus
a round trip (4-6 ms measured on one host), instead of at the janitor's next sweep (up to
`LINGER`) or the releaser's back-up look (0.1 s, core/lock.py WAKE_CHECK_GRACE). Each look
costs the client 0.09-0.18 ms of CPU (a thread wake-up and a non-blocking read, measured):
at most `LINGER` / `RELAY_POLL` = 100 looks, under 20 ms of CPU, per wait given up; 5 ms
is above the releaser's shortest yield (3 ms, core/yielding.py YIELD_GRACE), under which a
releaser taking the lock again covers the case anyway."""


@dataclass(frozen=True, slots=True)
class Read:
    """What the reader does now: send UNSUBSCRIBE for ``unsubscribe`` (none: lingering
    channels are the janitor's to let go), then read one reply for up to ``timeout``
    seconds."""

    unsubscribe: list[str]
    timeout: float


Silence = Literal["ping", "lost"] | None
"""What a read that timed out calls for: a health PING, giving the connection up, nothing."""
JanitorStep = Literal["drain", "connect"] | None


class Listening:
    """The state of one shared pub/sub connection and the rules over it (module docstring).

    Not thread-safe: the driver holds its mutex around every call. ``timeout`` (seconds) is
    how long an unanswered health PING is given; ``clock`` is monotonic.
    """

    def __init__(
        self,
        *,
        sharded: bool = False,
        timeout: float = 5.0,
        linger: float = LINGER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sharded = sharded
        self.timeout = timeout
        self.clock = clock
        self.parking = Parking(linger=linger, clock=clock)
        self.connected = False
        """The connection is up (made, and not lost since)."""
        self.down = False
        """The last connection attempt failed (the server may be gone)."""
        self.closed = False
        self.reader: Hashable | None = None
        """Who reads the socket now: a waiter's key, `JANITOR`, or None (nobody)."""
        self.sleepers: dict[Hashable, Any] = {}
        """Waiters asleep while another reads (key -> its condition), the longest asleep
        first: the next reader is the first of them."""
        self.reader_cond: Any = None
        """The condition of the waiter blocked on the socket now (None: nobody is)."""
        self.poked = False
        """A PING was sent to end the blocked reader's read and its reply has not come."""
        self.asked: deque[list[str]] = deque()
        """The channels of each SUBSCRIBE sent and not yet answered, in order."""
        self.heard = clock()
        """When the last reply came (or the connection was made)."""
        self.pinged = False
        """A health PING is unanswered."""
        self.retry_at = 0.0
        """Monotonic time before which nobody tries to connect again."""
        self.delay = FIRST_RETRY
        self.janitor_at = 0.0
        """Monotonic time of the janitor's next look (`janitor_plan()`); in the past while it
        looks (or is due to)."""
        self.unheard: set[str] = set()
        """Channels whose last waiter gave up (`left()`), lingering with their alias: the
        janitor reads every `RELAY_POLL` seconds while one does."""

    # ------------------------------------------------------------ the reader's role
    def role(self, key: Hashable) -> Literal["read", "sleep"]:
        """``key`` waits now: it reads the socket if nobody else does and the connection is
        up, else it sleeps (and is counted as a sleeper by `sleeping()`)."""
        if self.reader is None and self.connected and not self.closed:
            self.reader = key
        if self.reader == key:
            if self.connected:
                return "read"
            self.reader = None  # the connection was lost under its read
        return "sleep"

    def sleeping(self, key: Hashable, cond: Any) -> None:
        """``key`` sleeps on ``cond`` while another reads."""
        self.sleepers[key] = cond

    def awake(self, key: Hashable) -> None:
        """``key`` woke from its sleep."""
        self.sleepers.pop(key, None)

    def hand_on(self, key: Hashable) -> Any:
        """``key`` stops waiting or reading: if it was the reader it lets go of the socket;
        if then nobody reads, the condition of the longest-sleeping waiter, to notify (it
        takes the socket over), else None. (Called by every waiter that stops: a sleeper
        chosen before may have left meanwhile.)"""
        if self.reader == key:
            self.reader = None
        if self.reader is None and self.connected:
            return next(iter(self.sleepers.values()), None)
        return None

    def poke(self, tickets: list[Ticket]) -> bool:
        """Notified ``tickets`` include the reader blocked on the socket: True if a PING
        must be sent so that its read returns (one at a time)."""
        reader = self.reader_cond
        if reader is None or self.poked or not any(t.cond is reader for t in tickets):
            return False
        self.poked = True
        return True

    # ------------------------------------------------------------------- reading
    def plan_read(self, seconds: float) -> Read:
        """The reader reads for up to ``seconds``, ending in time for the health check.
        It lets no lingering channel go: the janitor does (`janitor_plan()`). A reader
        is a waiter, in the sync driver possibly the main thread, where a signal handler
        raising between the table's letting go and the UNSUBSCRIBE's send left the
        channel subscribed with no entry to let it go again (R1's interrupt storms)."""
        silence = self.silence_limit() - (self.clock() - self.heard)
        return Read([], max(0.0, min(seconds, silence)))

    def silence_limit(self) -> float:
        """Seconds of silence after which the reader acts: PING, or give the connection up
        when its PING went unanswered."""
        return self.timeout if self.pinged else HEALTH_INTERVAL

    def silent(self) -> Silence:
        """A read returned nothing within its timeout: "ping" (send a health PING, counted
        as sent), "lost" (no answer to the last one: give the connection up) or None."""
        self.poked = False
        if self.clock() - self.heard < self.silence_limit():
            return None
        if self.pinged:
            return "lost"
        self.pinged = True
        self.heard = self.clock()
        return "ping"

    def received(self, kind: str, channel: str, payload: str) -> list[Ticket]:
        """One reply came (a push message, a SUBSCRIBE answer, a PING's reply...); the
        tickets whose waiters must be notified."""
        self.poked = False
        self.pinged = False
        self.heard = self.clock()
        if kind in ("subscribe", "ssubscribe") and self.asked:
            asked = self.asked[0]
            if channel in asked:
                asked.remove(channel)
                if not asked:
                    self.asked.popleft()
        return self.parking.received(kind, channel, payload)

    def other_reply(self) -> None:
        """A reply that is not a push message came (e.g. a PING's reply alone)."""
        self.poked = False
        self.pinged = False
        self.heard = self.clock()

    def refused(
        self, error: str, no_permission: bool
    ) -> tuple[list[Ticket], bool, str, list[list[str]]]:
        """The server answered a SUBSCRIBE with ``error``: (the tickets to notify, True if
        the topology may have changed, the reason as the waiters get it, SUBSCRIBE
        commands to send now, counted as sent)."""
        self.poked = False
        asked = self.asked.popleft() if self.asked else []
        if no_permission:
            names = ", ".join(asked) or "?"
            reason = f"the server refused {self.subscribe_command} {names}: {error}"
            aliased = self.parking.aliased(asked)
            if aliased:
                # An ACL may allow a lock's channel and not this client's own beside it:
                # those channels are asked again alone (their waiters then hear every
                # unlock, as Redisson's waiters do).
                batches = [[c] for c in aliased] if self.sharded else [aliased]
                for batch in batches:
                    self.subscribing(batch)
                return [], False, reason, batches
            # An answer, not a connection loss: only these channels' waiters get it.
            return self.parking.forbidden(asked, reason), False, reason, []
        # The reply does not say which channel: every one still unconfirmed is re-checked
        # by its waiters, who move it to the owner the refreshed topology names.
        self.asked.clear()
        return self.parking.refused(), True, error, []

    @property
    def subscribe_command(self) -> str:
        return "SSUBSCRIBE" if self.sharded else "SUBSCRIBE"

    @property
    def unsubscribe_command(self) -> str:
        return "SUNSUBSCRIBE" if self.sharded else "UNSUBSCRIBE"

    # --------------------------------------------------------------- subscribing
    def subscribing(self, channels: list[str]) -> bool:
        """SUBSCRIBE for ``channels`` is due: True if it is to be sent now (counted as sent);
        False while the connection is down (making it again subscribes the whole table)."""
        if not self.connected:
            return False
        self.parking.subscribing(channels)
        self.asked.append(list(channels))
        return True

    # ------------------------------------------------------------- the connection
    def lost(self, interrupted: bool = False) -> list[Ticket]:
        """The connection failed (or could not be made): the janitor tries again after a
        pause growing from `FIRST_RETRY` to `MAX_RETRY`; the tickets to notify
        (none: waiters re-check once their channel is subscribed again).

        ``interrupted``: given up because an interrupt (a signal handler's exception, a
        cancellation) cut a read or a send short, not for the server's or the network's
        doing: the janitor connects again at once. A send this table counted (a SUBSCRIBE
        whose answer a waiter awaits, a PING whose reply ends a read, an UNSUBSCRIBE) may
        or may not have reached the server: only a new connection, subscribed from the
        table, makes the counts true again, whatever the place the interrupt came."""
        self.connected = False
        self.poked = False
        if interrupted:
            self.retry_at = self.clock()
        else:
            self.retry_at = self.clock() + self.delay
            self.delay = min(self.delay * 2, MAX_RETRY)
        return self.parking.disconnected()

    def connect_failed(self) -> list[Ticket]:
        """A connection attempt failed (the server may be gone: the topology may have
        changed): every waiter re-checks now (its attempt tells whether the server is dead,
        or, in a cluster, moves its channel to the new owner); the tickets to notify. No
        message can be missed by that re-check: nobody is subscribed anyway."""
        self.down = True
        self.lost()
        return [t for entry in self.parking.channels.values() for t in entry.give_all()]

    def connected_now(self) -> list[list[str]]:
        """The connection was made: the SUBSCRIBE commands to send now (channels, one per
        command when sharded: one slot per SSUBSCRIBE, else CROSSSLOT), each counted as
        sent. A channel refused for lack of permission stays refused: not asked again."""
        self.down = False
        self.connected = True
        self.delay = FIRST_RETRY
        self.heard = self.clock()
        self.pinged = False
        self.poked = False
        self.parking.dropped.clear()
        self.parking.leaving.clear()
        self.asked.clear()
        channels = [c for c, e in self.parking.channels.items() if e.refusal is None]
        if not channels:
            return []
        names = [self.parking.names(c) for c in channels]  # a channel and its alias: one slot
        batches = names if self.sharded else [[n for group in names for n in group]]
        for batch in batches:
            self.subscribing(batch)
        return batches

    # ----------------------------------------------------------------- the janitor
    def janitor_step(self) -> JanitorStep:
        """What the janitor does now: "drain" (read what came, without blocking: nobody
        reads), "connect" (the connection is down, channels are waited on, the pause is
        over; the janitor holds the reader's role meanwhile) or None."""
        if self.reader is not None or self.closed:
            return None
        if self.connected:
            return "drain"
        if self.parking.channels and self.clock() >= self.retry_at:
            self.reader = JANITOR
            return "connect"
        return None

    def janitor_plan(self) -> tuple[list[str], float]:
        """After its step: (lingering channels to UNSUBSCRIBE now, seconds until the janitor
        should look again). Worked out after the step's reads, so that a notify while they
        let go of the mutex (a new channel, a loss) is not missed."""
        gone, due = self.parking.expired()
        now = self.clock()
        if not self.connected:
            if self.parking.channels:
                due = min(due, self.retry_at - now)
        elif self.reader is None and not self.sleepers:  # else the reader PINGs
            due = min(due, self.heard + self.silence_limit() - now)
        due = max(due, MIN_JANITOR_NAP)
        if self.unheard and self.connected and self.reader is None and self._relaying():
            # A wake-up for nobody may come (module's rules). Not while a waiter reads: it
            # passes on what comes, and its hand-on wakes the janitor (`relay_due()`).
            due = min(due, RELAY_POLL)
        self.janitor_at = now + due
        return gone, due

    def _relaying(self) -> bool:
        """True while a channel of `unheard` lingers with its alias (those no longer
        lingering are taken out)."""
        channels = self.parking.channels
        for channel in list(self.unheard):
            entry = channels.get(channel)
            if entry is None or entry.tickets or entry.alias is None:
                self.unheard.discard(channel)
        return bool(self.unheard)

    def left(self, channel: str, granted: bool) -> bool:
        """A waiter left ``channel`` (`tenure.core.parking.Parking.leave()` done), with the
        lock if ``granted``: True if the janitor must be woken now (module's rules,
        "Relaying"): the waiter gave up, the channel lingers with its alias and no waiter,
        and the janitor's next look is further away than `RELAY_POLL`. Then counted as
        looking now. Not while another waiter reads the socket: its hand-on wakes the
        janitor (`relay_due()`)."""
        if granted:
            return False
        entry = self.parking.channels.get(channel)
        if entry is None or entry.tickets or entry.alias is None:
            return False
        self.unheard.add(channel)  # also while down: subscribed again, it lingers on
        if not self.connected:  # the janitor connects, then plans with it
            return False
        if self.reader is not None:  # it reads what comes meanwhile
            return False
        return self._look_now()

    def relay_due(self) -> bool:
        """After `hand_on()` named nobody to take the socket over: True if the janitor
        must be woken now for its `RELAY_POLL` reads, which it skips while a waiter reads
        (`janitor_plan()`): nobody reads, a channel whose waiter gave up lingers with its
        alias, and the janitor's next look is further away than `RELAY_POLL`. Then
        counted as looking now."""
        if self.reader is not None or not self.unheard or not self.connected:
            return False  # first: every waiter's hand-on asks, mostly with none unheard
        return self._relaying() and self._look_now()

    def _look_now(self) -> bool:
        """True if the janitor's next look is further away than `RELAY_POLL` (it is to be
        woken now); then counted as looking now."""
        now = self.clock()
        if self.janitor_at - now <= RELAY_POLL:
            return False
        self.janitor_at = now
        return True

    def may_drain(self) -> bool:
        """True if what came may be read now without blocking: nobody reads, connected."""
        return self.reader is None and self.connected and not self.closed

    def draining(self, key: Hashable) -> bool:
        """While ``key`` drains what came without blocking: True to read once more (no
        waiter wants the socket)."""
        return not self.sleepers and self.reader == key and self.connected

    # ------------------------------------------------------------------ closing
    def close(self) -> list[Ticket]:
        """Every waiter is woken (they raise); the tickets to notify."""
        self.closed = True
        return [t for entry in self.parking.channels.values() for t in entry.tickets.values()]

    def hears(self, channel: str) -> bool:
        """True if this connection is subscribed to ``channel`` now (waited on or lingering)
        as far as the replies read so far tell."""
        return self.connected and self.parking.hears(channel)

    def idle_listener(self, channel: str) -> bool:
        """True if this connection listens on ``channel`` (it lingers, with its alias) while
        none of its waiters waits there: a release need not count it among the listeners to
        wake, nor wake this client (docs/wire.md, "One client woken per unlock"). Not in
        the last `IDLE_MARGIN` seconds of its lingering, when its UNSUBSCRIBE may reach
        the server before the release does (the release would then count one listener
        too few, and might not wake a Redisson waiter).

        Asked by a release about to be sent: a True answer is noted on the entry
        (`tenure.core.parking.Parked.put_back_at`), as the script may put this client back
        in the wake queue as not waiting; a waiter refused before it then tries again."""
        entry = self.parking.channels.get(channel)
        if entry is None or entry.tickets or not self.hears(channel):
            return False  # first: a release asks this of every lock, mostly unheard
        now = self.clock()
        if entry.idle_since + self.parking.linger - now <= IDLE_MARGIN:
            return False
        entry.put_back_at = now
        return True

    def letting_go(self, channel: str) -> list[str]:
        """``channel`` is let go (its UNSUBSCRIBE counted by the table): the names the driver's
        UNSUBSCRIBE carries (the channel and its alias)."""
        names = self.parking.names(channel)
        self.parking.forget_alias(channel)
        return names

    def take_alias_off(self) -> list[str]:
        """Aliases to UNSUBSCRIBE now (their channel's last waiter left; counted as sent)."""
        off, self.parking.alias_off = self.parking.alias_off, []
        return off

    def take_relays(self) -> list[Any]:
        """Wake-ups received for this client alone that none of its waiters can use: what
        passes each on to another client, for the driver to run in the background."""
        relays, self.parking.relays = self.parking.relays, []
        return relays


class Subscriptions:
    """The channel tables of one client's pub/sub connections (one per server, or per shard
    of a cluster): which channels the client hears, asked by the algorithms with no I/O
    (a release counts how many other clients its unlock reached). The driver adds each
    connection's table when it makes one and removes it when it closes it."""

    def __init__(self) -> None:
        self._tables: list[Listening] = []

    def add(self, table: Listening) -> None:
        self._tables.append(table)

    def remove(self, table: Listening) -> None:
        if table in self._tables:
            self._tables.remove(table)

    def hears(self, channel: str) -> bool:
        """True if one of the client's connections is subscribed to ``channel`` now (no
        lock taken: a moment's answer, for a guess that may be off by a message in
        flight; list() copies in one step). Every Lock acquire's first attempt asks: a
        loop, not any() over a generator (see `idle_listener()`)."""
        for table in list(self._tables):  # noqa: SIM110 (see the docstring)
            if table.hears(channel):
                return True
        return False

    def idle_listener(self, channel: str) -> bool:
        """True if one of the client's connections listens on ``channel`` with nobody of the
        client waiting there (`Listening.idle_listener()`). Every release asks: a loop,
        not any() over a generator, which costs more than the one table it mostly reads."""
        for table in list(self._tables):  # noqa: SIM110 (see the docstring)
            if table.idle_listener(channel):
                return True
        return False

    def put_back_ran(self, channel: str, since: float) -> None:
        """A release asked at or after monotonic time ``since`` (`idle_listener()`,
        `unwaited()`) has its reply: the put-back its script may have made ran on the server
        before now. An attempt of this client sent before now (on another connection) may
        have run before it there and had its registration undone: the entry stamped by that
        release is stamped again now, so that the waiter of such an attempt tries again
        (stamped at the ask alone, an attempt sent while the release was on its way slept
        on, its client marked as not waiting)."""
        for table in list(self._tables):
            entry = table.parking.channels.get(channel)
            if entry is not None and entry.put_back_at >= since:
                entry.put_back_at = table.clock()

    def unwaited(self, channel: str) -> bool:
        """True if one of the client's connections listens on ``channel`` with nobody of the
        client waiting there, lingering or not (`idle_listener()` without its margin): a
        wake-up sent to this client alone could only be passed on (lock_release.lua).
        Asked by a release about to be sent: a True answer is noted on the entry, as by
        `Listening.idle_listener()`."""
        for table in list(self._tables):
            entry = table.parking.channels.get(channel)
            if entry is not None and not entry.tickets and table.hears(channel):
                entry.put_back_at = table.clock()
                return True
        return False
