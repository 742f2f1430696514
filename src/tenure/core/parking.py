"""Who waits on which channel, and whom a message wakes: the listener's rules, sans I/O.

One client has one pub/sub connection however many of its threads or tasks wait. A channel
is subscribed while at least one of them waits on it (SUBSCRIBE for the first, UNSUBSCRIBE
after the last). Each waiter has a **ticket** (in the order they joined) with its own
wake-up object, so a message wakes exactly the waiters it is for, never the whole crowd.
Rules:

- An unlock message gives **one** wake-up (a permit) to the oldest ticket that has none
  (a payload in the channel's ``wake_all``, e.g. a write unlock, gives every ticket one):
  the others stay asleep instead of racing for a lock only one can take, and the waiter
  that waited longest goes first. A permit given to a waiter that is busy retrying is used
  by its next wait at once: a message is never lost between an attempt and the sleep.
- **One expiry re-check per channel**: waiters report the holder's remaining lease with
  each sleep (``Wait.patience``); only the head ticket (the oldest) sleeps until that
  lease ends to try again; the others sleep until a permit or their own deadline. When the
  head leaves, the next ticket is woken to take the duty over. A later report of an
  earlier end (the lock changed hands, to a shorter lease) wakes the head to sleep again
  until that end (`Parked.expires()`). A renewal message
  (``-<lease ms>``, `tenure.keys.RENEWED_PREFIX`) wakes nobody and moves that lease
  end: while the holder's watchdog renews, the head sleeps on and sends nothing.
  Waiters that do not share the re-check (a ReadWriteLock's: each re-checks at its own
  end) sleep until a renewal message's end when it is earlier than theirs
  (`Parked.renewed()`).
- A ticket that leaves with an unused permit, or abnormally (error, cancellation: it may
  have taken a wake-up it will not use), passes one on to the oldest ticket without one.
- After a reconnect every waiter is woken to re-check, once its channel's new SUBSCRIBE is
  confirmed, never before: messages may have been missed meanwhile, and a re-check made
  before the new subscription is in place would miss an unlock published in between (the
  waiter would sleep to the holder's lease end). Nobody is woken by the loss itself.
- With ``linger``, a channel stays subscribed for ``linger`` seconds after its last waiter
  left (a lock taken in a loop costs no SUBSCRIBE/UNSUBSCRIBE per acquisition); the driver
  sends UNSUBSCRIBE for the channels `Parking.expired()` names.
  An entry with no waiter that does not linger (a signal handler raised inside `leave()`
  or `join()`, and the waiter's clean-up found no ticket to remove) is repaired there: it
  lingers from then on and is let go like any other.
- An entry whose last waiter's subscribe was cut short before its SUBSCRIBE was counted
  as sent (a signal handler raised between `Parking.join()` and the driver's count) goes
  at once (`Parking.drop_unasked()`): it never lingers unsubscribed, waited for by the
  next waiter.
- A subscription is **fresh** for an attempt sent at ``since`` when it was confirmed before
  ``since`` and no message (nor a reconnect) came after: an unlock published after that
  attempt is then sure to wake a waiter who joins now, so the waiter need not try again
  before it sleeps.
- **Fences** (a channel whose ``wake_all`` holds `FENCE`: a latch's): a waiter takes a
  message's payload at its word (`Parking.take_word()`) only if the message came after the
  answer to a SUBSCRIBE of the channel sent after its call began: its own, the one that
  made the subscription, or, joining a subscription already there, a SUBSCRIBE sent again
  for it (the server answers it in order on the connection, so what comes after was
  published after it). Earlier messages may be older than its call (a latch's ``0``
  published before it, the latch set again since): they wake it with no word, and it looks
  again. Joiners whose calls began before a SUBSCRIBE in flight was sent share it
  (`Parking.fence()`). After a reconnect the new SUBSCRIBE is every waiter's fence.
- A channel left and joined again before the first SUBSCRIBE was answered has two
  SUBSCRIBEs in flight: only the reply to the last one confirms the new waiter (an unlock
  published between the two would otherwise be missed).
- An unsubscribe reply this client did not ask for (a cluster drops sharded subscriptions
  of a slot that moved to another shard) wakes every waiter of that channel, and the channel
  is marked ``dropped`` until the driver subscribes it again (on the slot's new owner).
- A SUBSCRIBE the server refused for lack of permission (ACL ``-NOPERM``) is no connection
  loss: the channel's waiters get the error (``Parked.refusal``), the others go on.
- A channel may have an **alias**, this client's own channel for the same waiters (a Lock's
  client channel): subscribed with the channel and let go with it (it lingers with it: a
  client that waits again soon sends no SUBSCRIBE), and a message on it is one on the
  channel. It was sent to this client alone (the unlock woke one client), so a wake-up on it
  that no waiter here can use (nobody waits any more, or the one woken left without using
  it) is passed on to another client: its ``relay`` is named in `Parking.relays`, for the
  driver to run; also one that comes after the alias was let go and before the server
  answered that UNSUBSCRIBE (``parting``). A wake-up passed on ends the subscription's
  quiet (the relay takes this client out of the wake queue: a waiter refused before it
  must try, and so register, again). A release by this client while it lingers with
  no waiter says so to its script, which then neither wakes nor counts this client
  (docs/wire.md), and puts it back in the wake queue as "not seen waiting" (a score with
  a half) when the unlock reached another client: that undoes the registration of an
  attempt of this client refused before the release, so the subscription is not fresh
  for such an attempt (``Parked.put_back_at``): its waiter must try, and register, again.

The driver (``tenure.aio.listener`` and its generated sync twin) owns the socket, the mutex
and the wake-up objects (one condition per ticket); it asks this table what to send and
whom to notify.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tenure.keys import renewed_lease

WAKE_ANY = "*"
"""In a channel's ``wake_all``: every message wakes every waiter of this client. Semaphores use
it: a release of n permits may serve several waiters, each wanting its own number of permits,
so waking one could leave a satisfiable waiter asleep."""

WAKE_COUNT = "#"
"""In a channel's ``wake_all``: a message is the count now available (a semaphore's channel)
and wakes that many of this client's waiters, the oldest first (at least one; every one for
a payload that is no count). For waiters that each want one permit: a waiter woken that
finds none left sleeps on (a later release publishes again). A waiter wanting more joins
with `WAKE_ANY`, which then rules the channel until it has no waiter."""


FENCE = "="
"""In a channel's ``wake_all``: its waiters take a message's payload at its word only once
fenced (see the module's rules). A latch's waiters use it: a ``0`` that is their own needs
no read of the count."""

UNFENCED = sys.maxsize
"""A ticket's ``fence`` that no answer reaches: its waiter never takes a payload at its word."""


@dataclass(eq=False)
class Ticket:
    """One waiter (a thread or task) on one channel."""

    cond: Any
    """The driver's condition on which this waiter sleeps."""
    permit: bool = False
    depth: int = 1
    """Joins of the same waiter on the same channel not yet left."""
    word: str | None = None
    """The payload of the first message that gave a wake-up since the waiter last took one
    (None: none did, or none after its fence). Kept until taken: a latch's ``1`` (set again)
    read in the same batch as the ``0`` before it must not hide that the count reached
    zero during the wait."""
    fence: int = 0
    """The number, on this connection, of the SUBSCRIBE of the channel whose answer fences
    this waiter (`FENCE`); 0 once it came (or the channel has no fences)."""
    end: float = -math.inf
    """The end of this waiter's current (or last) own sleep, as `Parked.sleep_until()` was
    last asked with it; ``shared``: whether that sleep shares the holder's lease end."""
    shared: bool = True
    told: float = math.inf
    """An earlier lease end a renewal message told during the sleep that ends at ``end``
    (``told_for``): a waiter that re-checks on its own wakes there (`Parked.renewed()`)."""
    told_for: float = math.nan


@dataclass(eq=False)
class Parked:
    """The waiters of this client on one channel."""

    wake_all: frozenset[str]
    tickets: dict[Hashable, Ticket] = field(default_factory=dict)
    """Waiter key -> ticket, in the order they joined (the oldest first)."""
    confirmed: bool = False
    expiry: float = math.inf
    """Monotonic time at which the holder's lease ends, as the latest attempt saw it."""
    refusal: str | None = None
    """Why the server refused this channel's subscription (its waiters raise it)."""
    quiet_since: float = math.inf
    """Monotonic time since which the subscription is confirmed with no message and no
    reconnect (``math.inf``: not confirmed now)."""
    idle_since: float = math.inf
    """Monotonic time its last waiter left (a lingering channel); ``math.inf`` while waited on."""
    alias: str | None = None
    """This client's own channel for the same waiters (see the module's rules)."""
    alias_on: bool = False
    """The alias is subscribed (or its SUBSCRIBE sent): while the channel is (it lingers with
    it)."""
    relay: Any = None
    """What passes a wake-up received on ``alias`` on to another client (the driver runs it)."""
    alias_refused: bool = False
    """The server refused a SUBSCRIBE naming the alias (an ACL): the channel alone, for good."""
    recheck: bool = False
    """The connection dropped since the channel was confirmed: messages may have been
    missed, so every waiter re-checks once the new SUBSCRIBE is confirmed."""
    put_back_at: float = -math.inf
    """Monotonic time at which a release by this client last told its script that the
    client has no waiter here (`tenure.core.listening.Listening.idle_listener()`,
    `tenure.core.listening.Subscriptions.unwaited()`): the script may have put the client
    back in the wake queue with a half score, undoing the registration of an attempt
    refused before it (see the module's rules). Set by the releasing thread without the
    driver's mutex: one store of a float."""

    def fresh(self, since: float) -> bool:
        """True if an unlock published after an attempt sent at ``since`` will reach a
        waiter who joins now (see the module's rules): the subscription is quiet since
        before that attempt, and no release of this client that may have put it back in
        the wake queue as not waiting was sent after it."""
        return self.refusal is None and self.quiet_since <= since and self.put_back_at < since

    @property
    def refs(self) -> int:
        """Waiters on the channel."""
        return len(self.tickets)

    @property
    def permits(self) -> int:
        """Wake-ups given and not yet used."""
        return sum(t.permit for t in self.tickets.values())

    def head(self) -> Ticket | None:
        """The oldest ticket: the one that re-checks at the holder's lease end."""
        return next(iter(self.tickets.values()), None)

    def give_one(self) -> list[Ticket]:
        """A permit to the oldest ticket without one; the tickets to notify."""
        for ticket in self.tickets.values():
            if not ticket.permit:
                ticket.permit = True
                return [ticket]
        return []

    def give_count(self, payload: str) -> list[Ticket]:
        """A permit to as many of the oldest tickets without one as the count ``payload``
        says (`WAKE_COUNT`); the tickets to notify."""
        try:
            count = max(1, int(payload))
        except ValueError:
            return self.give_all()
        woken: list[Ticket] = []
        for ticket in self.tickets.values():
            if len(woken) == count:
                break
            if not ticket.permit:
                ticket.permit = True
                woken.append(ticket)
        return woken

    def give_all(self) -> list[Ticket]:
        """A permit to every ticket; the tickets to notify (all of them). Used when messages
        may have been missed: the subscription is no longer quiet."""
        self.quiet_since = math.inf
        for ticket in self.tickets.values():
            ticket.permit = True
        return list(self.tickets.values())

    def expires(self, at: float, reporter: Ticket | None = None) -> list[Ticket]:
        """The holder's lease ends at ``at`` (monotonic), as the latest attempt (of
        ``reporter``) or renewal saw it: the tickets to wake. The head sleeps until the end
        it last read; when the end moved earlier (the lock changed hands, to a shorter
        lease, since the head's own attempt), the head is woken to sleep again until the
        new end, else the lock could stay free until the old one with every waiter asleep.
        (No end known yet, ``math.inf``: no waiter sleeps on one, nobody is woken.)"""
        earlier = at < self.expiry < math.inf
        self.expiry = at
        head = self.head()
        return [head] if earlier and head is not None and head is not reporter else []

    def renewed(self, at: float) -> list[Ticket]:
        """A renewal message says the holder's lease ends at ``at`` (monotonic): the
        tickets to wake. The shared re-check moves (`expires()`); a waiter that re-checks
        at its own end (not ``shared``: a ReadWriteLock's) and sleeps past ``at`` is woken
        to sleep until ``at`` instead: the lock changed hands to a shorter lease since its
        attempt (a back-up look says so, lock_wake_check.lua), else it would sleep with the
        lock free until its older end."""
        woken = self.expires(at)
        for ticket in self.tickets.values():
            if not ticket.shared and at < ticket.end and at < ticket.told:
                ticket.told, ticket.told_for = at, ticket.end
                if ticket not in woken:
                    woken.append(ticket)
        return woken

    def sleep_until(self, ticket: Ticket, end: float, shared: bool) -> float:
        """Until when ``ticket`` sleeps when its own wait ends at ``end``: the head also
        wakes at the holder's lease end when the waiters share it (``shared``); a waiter
        that does not share it, at an earlier end a renewal message told during this wait
        (`renewed()`). Notes ``end`` and ``shared`` on the ticket (the driver asks at the
        start of each wait and after each wake-up)."""
        if ticket.end != end:
            ticket.end, ticket.shared, ticket.told = end, shared, math.inf
        if shared and ticket is self.head():
            return min(end, self.expiry)
        if not shared and ticket.told_for == end:
            return min(end, ticket.told)
        return end


@dataclass
class Parking:
    """The channel table of one listener. Not thread-safe: the driver holds its mutex."""

    channels: dict[str, Parked] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    """Channel -> SUBSCRIBEs sent and not yet answered on this connection."""
    leaving: dict[str, int] = field(default_factory=dict)
    """Channel -> UNSUBSCRIBEs sent and not yet answered on this connection."""
    dropped: set[str] = field(default_factory=set)
    """Channels with waiters that the server unsubscribed on its own."""
    linger: float = 0.0
    """Seconds a channel stays subscribed after its last waiter left."""
    clock: Callable[[], float] = time.monotonic
    aliases: dict[str, str] = field(default_factory=dict)
    """Alias -> its channel, while the channel is in the table (a late message on an alias
    let go is still routed: it is passed on)."""
    alias_off: list[str] = field(default_factory=list)
    """Aliases whose UNSUBSCRIBE is due now (counted as sent): the driver sends and clears."""
    parting: dict[str, Any] = field(default_factory=dict)
    """Alias let go -> its channel's ``relay``, until the server answers its UNSUBSCRIBE: a
    wake-up sent to this client alone meanwhile is passed on, never lost."""
    _letting: dict[str, list[str]] = field(default_factory=dict)
    relays: list[Any] = field(default_factory=list)
    """Wake-ups this client received for its waiters alone and cannot use: each channel's
    ``relay``, for the driver to run (and clear)."""
    sent: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Channel -> (SUBSCRIBEs sent on this connection, when the last was sent), while one
    is unanswered or the channel is in the table: numbers the fences (`FENCE`)."""
    answered: dict[str, int] = field(default_factory=dict)
    """Channel -> SUBSCRIBEs of it answered on this connection (see ``sent``)."""

    def names(self, channel: str) -> list[str]:
        """What a SUBSCRIBE or UNSUBSCRIBE for ``channel`` names: it, and its alias while on
        (for a channel just let go: what its UNSUBSCRIBE names, counted then)."""
        if channel in self._letting:
            return self._letting[channel]
        entry = self.channels.get(channel)
        if entry is not None and entry.alias is not None and entry.alias_on:
            return [channel, entry.alias]
        return [channel]

    def forget_alias(self, channel: str) -> None:
        """``channel`` was let go and its UNSUBSCRIBE sent: so is its alias."""
        self._letting.pop(channel, None)
        for alias in [a for a, c in self.aliases.items() if c == channel]:
            del self.aliases[alias]

    def _let_go(self, channel: str) -> None:
        # Before the entry leaves the table: what its UNSUBSCRIBE names, counted as sent.
        names = self.names(channel)
        self._letting[channel] = names
        entry = self.channels.get(channel)
        if entry is not None and entry.alias in names and entry.relay is not None:
            self.parting[entry.alias] = entry.relay
        for name in names:
            self.leaving[name] = self.leaving.get(name, 0) + 1

    def aliased(self, asked: list[str]) -> list[str]:
        """A SUBSCRIBE for ``asked`` was refused and some of them are aliases: every channel
        asked with its alias loses the alias (it waits on the channel alone); those
        channels, to ask again. The refused command's names are no longer in flight."""
        channels = [
            c for c in asked
            if (e := self.channels.get(c)) is not None and e.alias is not None and e.alias in asked
        ]
        if not channels:
            return []
        for name in asked:
            pending = self.in_flight.pop(name, 0)
            if pending > 1:
                self.in_flight[name] = pending - 1
        for channel in channels:
            self.forget_alias(channel)
            entry = self.channels[channel]
            entry.alias = entry.relay = None
            entry.alias_on = False
            entry.alias_refused = True
        return channels

    def _relay(self, entry: Parked) -> None:
        if entry.alias is not None and entry.relay is not None:
            self.relays.append(entry.relay)

    def expired(self) -> tuple[list[str], float]:
        """Lingering channels whose time is up (removed from the table and counted as
        UNSUBSCRIBE sent), and the seconds until the driver should look again
        (``math.inf``: no channel at all). A channel still waited on may start lingering
        at any moment without the driver's reader hearing of it: then look again within
        ``linger`` (a local timer; nothing is sent)."""
        now = self.clock()
        gone, nxt = [], math.inf
        for channel, entry in self.channels.items():
            if not entry.tickets and not math.isfinite(entry.idle_since):
                # A stray: nobody waits and it does not linger. A signal handler raised
                # inside a `leave()` or `join()` (after the ticket went, before the entry
                # lingered; or before the ticket came), and the waiter's next Unsubscribe
                # finds no ticket: repaired here, it lingers from now and is let go.
                entry.idle_since = now
                entry.expiry = math.inf
            if entry.tickets or not math.isfinite(entry.idle_since):
                if self.linger > 0:
                    nxt = min(nxt, self.linger)
                continue
            at = entry.idle_since + self.linger
            if at <= now:
                gone.append(channel)
            else:
                nxt = min(nxt, at - now)
        for channel in gone:
            if channel in self.dropped:
                self.dropped.discard(channel)
                self.forget_alias(channel)
            else:
                self._let_go(channel)
            del self.channels[channel]
            self._uncount(channel)
        return [c for c in gone if c in self._letting], nxt

    def hears(self, channel: str) -> bool:
        """True if the server has this connection subscribed to ``channel`` now (waited on
        or lingering), as far as the replies read so far tell: a message published now
        would reach it."""
        entry = self.channels.get(channel)
        return (
            entry is not None
            and entry.confirmed
            and entry.refusal is None
            and channel not in self.dropped
        )

    def unsubscribing(self, channel: str) -> None:
        """The driver sent UNSUBSCRIBE for ``channel`` alone."""
        self.leaving[channel] = self.leaving.get(channel, 0) + 1

    def resubscribing(self, channel: str) -> None:
        """The driver sent SUBSCRIBE again for a dropped ``channel``."""
        self.dropped.discard(channel)
        self.subscribing([channel])

    def evict(self, channel: str) -> Parked | None:
        """Remove ``channel`` with all its waiters (they move to another connection); its
        entry, with every waiter given a wake-up to re-check, or None."""
        if channel in self.dropped:
            self.dropped.discard(channel)
        elif channel in self.channels:
            self._let_go(channel)  # the driver sends UNSUBSCRIBE
        entry = self.channels.pop(channel, None)
        self.in_flight.pop(channel, None)
        if entry is not None:
            entry.give_all()
            entry.confirmed = True  # a waiter still waiting for its SUBSCRIBE goes on
        return entry

    def adopt(
        self,
        channel: str,
        wake_all: frozenset[str],
        waiters: Iterable[Hashable],
        make_cond: Callable[[], Any],
        alias: str | None = None,
        relay: Any = None,
    ) -> Parked:
        """Take over ``waiters`` (their keys) of ``channel`` from another connection; each
        is given a wake-up (it re-checks at once)."""
        entry = self.channels.get(channel)
        if entry is None:
            entry = self.channels[channel] = Parked(
                wake_all, alias=alias, relay=relay, alias_on=alias is not None
            )
            if alias is not None:
                self.aliases[alias] = channel
        elif WAKE_ANY in wake_all:  # as in join(): a waiter every message must reach
            entry.wake_all = entry.wake_all | wake_all
        fence = 0
        if FENCE in entry.wake_all:  # the driver subscribes a new entry; else no fence
            fence = self._next_subscribe(channel) if not entry.tickets else UNFENCED
        for key in waiters:
            ticket = entry.tickets.get(key)
            if ticket is None:
                entry.tickets[key] = Ticket(make_cond(), permit=True, fence=fence)
            else:
                ticket.depth += 1
                ticket.permit = True
        return entry

    def subscribing(self, channels: Iterable[str]) -> None:
        """The driver sent SUBSCRIBE for ``channels``."""
        now = self.clock()
        for channel in channels:
            self.in_flight[channel] = self.in_flight.get(channel, 0) + 1
            self.sent[channel] = (self.sent.get(channel, (0, now))[0] + 1, now)

    def _next_subscribe(self, channel: str) -> int:
        """The number the next SUBSCRIBE of ``channel`` sent on this connection gets."""
        return self.sent.get(channel, (0, 0.0))[0] + 1

    def fence(self, channel: str, ticket: Ticket, since: float | None) -> bool:
        """After `join()` answered that no SUBSCRIBE is due: does ``ticket`` (a waiter
        whose call began at ``since``, monotonic; None: unknown) need a SUBSCRIBE of its
        own as its fence (`FENCE`)? True: the driver sends SUBSCRIBE for ``channel`` now.
        A SUBSCRIBE in flight that was sent after ``since`` fences it as well (joiners
        that arrive together share one)."""
        entry = self.channels.get(channel)
        if entry is None or FENCE not in entry.wake_all or ticket.fence == 0:
            return False  # no fences here, or fenced already (the same waiter joined again)
        count, at = self.sent.get(channel, (0, -math.inf))
        if count > self.answered.get(channel, 0) and since is not None and at >= since:
            ticket.fence = count  # share the one in flight
            return False
        ticket.fence = count + 1
        return True

    def join(
        self,
        channel: str,
        wake_all: frozenset[str],
        key: Hashable,
        make_cond: Callable[[], Any],
        alias: str | None = None,
        relay: Any = None,
    ) -> tuple[Parked, Ticket, bool]:
        """Count waiter ``key`` on ``channel``: (entry, its ticket, True if SUBSCRIBE must be
        sent, for `names()`). ``alias`` and ``relay``: see the module's rules."""
        entry = self.channels.get(channel)
        first = entry is None
        if entry is None:
            entry = self.channels[channel] = Parked(
                wake_all, alias=alias, relay=relay, alias_on=alias is not None
            )
            if alias is not None:
                self.aliases[alias] = channel
        elif not entry.tickets:  # a lingering channel: waited on again
            entry.idle_since = math.inf
            entry.wake_all = wake_all
            if entry.refusal is not None:  # asked again (the ACL may have changed)
                entry.refusal = None
                entry.confirmed = False
                first = True
            if entry.alias is not None and not entry.alias_on:
                entry.alias_on = first = True  # the alias again (the channel: harmless)
        elif WAKE_ANY in wake_all:  # a waiter every message must reach: so it is for all
            entry.wake_all = entry.wake_all | wake_all
        if alias is not None and entry.alias is None and not entry.alias_refused:
            # A waiter without the alias made the entry (a ReadWriteLock's reader: the two
            # sides share the channel) and one with it comes: subscribe the alias now, else
            # the unlocks meant for this client alone could never reach it.
            entry.alias, entry.relay, entry.alias_on = alias, relay, True
            self.aliases[alias] = channel
            first = True  # the SUBSCRIBE names the channel again: harmless
        ticket = entry.tickets.get(key)
        if ticket is None:
            ticket = entry.tickets[key] = Ticket(make_cond())
            if first and FENCE in entry.wake_all:  # the SUBSCRIBE about to be sent
                ticket.fence = self._next_subscribe(channel)
            elif FENCE in entry.wake_all:  # until `fence()` names one
                ticket.fence = UNFENCED
        else:
            ticket.depth += 1
        return entry, ticket, first

    def leave(
        self, channel: str, key: Hashable, pass_on: bool, lease: float | None = None
    ) -> tuple[list[Ticket], bool]:
        """Waiter ``key`` leaves ``channel``: (tickets to notify, True if UNSUBSCRIBE must be
        sent: it is counted as sent). A permit the leaver did not use, and with
        ``pass_on`` one it may have taken, goes to the oldest ticket without one; a new
        head is notified to take the lease-end re-check over. ``lease``: the leaver took
        the lock with this lease (seconds), whose end is now the one the others re-check at
        (the old holder's is over; the new holder's may end sooner)."""
        entry = self.channels.get(channel)
        if entry is None:
            return [], False
        ticket = entry.tickets.get(key)
        if ticket is None:
            return [], False
        # Asked before any change: a signal handler that raises as a call returns finds
        # the table as it was, and the caller's next Unsubscribe leaves.
        was_head = ticket is entry.head()
        ticket.depth -= 1
        if ticket.depth > 0:
            return [], False
        del entry.tickets[key]
        if lease is not None and entry.tickets:
            entry.expiry = self.clock() + lease
        if not entry.tickets and (pass_on or ticket.permit):
            self._relay(entry)  # a wake-up nobody here will use: to another client
        if not entry.tickets and self.linger > 0 and entry.refusal is None:
            entry.idle_since = self.clock()  # stays subscribed a while (see expired())
            entry.expiry = math.inf  # its alias lingers with it
            return [], False
        if not entry.tickets:
            if channel in self.dropped:  # the server unsubscribed it already
                del self.channels[channel]
                self._uncount(channel)
                self.dropped.discard(channel)
                self.forget_alias(channel)
                return [], False
            self._let_go(channel)
            del self.channels[channel]
            self._uncount(channel)
            return [], True
        notify = entry.give_one() if (pass_on or ticket.permit) else []
        if (pass_on or ticket.permit) and not notify and not entry.permits:
            self._relay(entry)  # every one left here already has a wake-up: none used it
        head = entry.head()
        if was_head and head is not None and head not in notify:
            notify.append(head)
        return notify, False

    def drop_unasked(self, channel: str) -> bool:
        """A waiter's subscribe was cut short (an interrupt) and it left: drop ``channel``'s
        entry if nobody waits there and no SUBSCRIBE of it was counted (in flight) or
        answered: the interrupt came between `join()` and the driver's count. Lingering,
        it would make the next waiter wait for an answer never asked for; gone, the next
        waiter subscribes it. Nothing is let go on the server. True if dropped."""
        entry = self.channels.get(channel)
        if (
            entry is None
            or entry.tickets
            or entry.confirmed
            or entry.refusal is not None
            or channel in self.in_flight
        ):
            return False
        del self.channels[channel]
        self._uncount(channel)
        self.dropped.discard(channel)
        self.forget_alias(channel)
        return True

    def take(self, ticket: Ticket) -> bool:
        """Use ``ticket``'s wake-up, if it has one."""
        return self.take_word(ticket) is not False

    def take_word(self, ticket: Ticket) -> bool | str:
        """As `take()`; a wake-up a message gave is that message's payload (a latch's
        waiter needs no read after a "reached zero"), one given otherwise is True."""
        if ticket.permit:
            ticket.permit = False
            word, ticket.word = ticket.word, None
            return word or True
        return False

    def received(self, kind: str, channel: str, payload: str) -> list[Ticket]:
        """Apply one pub/sub reply; the tickets whose waiters must be notified."""
        if kind in ("unsubscribe", "sunsubscribe"):
            return self._unsubscribed(channel)
        if kind in ("subscribe", "ssubscribe"):
            return self._subscribed(channel)
        aliased = channel in self.aliases and kind in ("message", "smessage")
        if not aliased and channel in self.parting and kind in ("message", "smessage"):
            if renewed_lease(payload, channel) is None:  # for this client alone: pass it on
                self.relays.append(self.parting[channel])
            return []
        if aliased:
            channel = self.aliases[channel]
        entry = self.channels.get(channel)
        if entry is None:
            return []
        if aliased and not entry.tickets and renewed_lease(payload, channel) is None:
            self._relay(entry)  # meant for this client alone, whose waiters have all left
            # The relay takes this client out of the wake queue: a waiter whose attempt
            # was refused before this message must try (and register) again, not sleep.
            if math.isfinite(entry.quiet_since):
                entry.quiet_since = self.clock()
            return []
        if kind in ("message", "smessage"):
            lease = renewed_lease(payload, channel)
            if lease is not None:  # the holder renewed: no wake-up, the lease end moves
                return entry.renewed(self.clock() + lease)
            live = math.isfinite(entry.quiet_since)
            if payload in entry.wake_all or WAKE_ANY in entry.wake_all:
                notify = entry.give_all()
            elif WAKE_COUNT in entry.wake_all:
                notify = entry.give_count(payload)
            else:
                notify = entry.give_one()
            for ticket in notify:  # not at its word before its fence (module's rules)
                if ticket.word is None and ticket.fence == 0:
                    ticket.word = payload  # the first word since it last woke is kept
            if live:  # a message is no loss: still subscribed, quiet from now on
                entry.quiet_since = self.clock()
            return notify
        return []

    def _subscribed(self, channel: str) -> list[Ticket]:
        self._answered(channel)
        # Counted even when nobody waits any more (the waiter left before the answer):
        # a stale count would make a later waiter wait for an answer that never comes.
        pending = self.in_flight.pop(channel, 0)
        if pending > 1:  # the answer to an earlier SUBSCRIBE: wait for the last
            self.in_flight[channel] = pending - 1
            return []
        entry = self.channels.get(channel)
        if entry is not None and channel not in self.dropped:
            entry.quiet_since = self.clock()
        if entry is not None and not entry.confirmed:
            entry.confirmed = True
            if entry.recheck:  # subscribed again after a loss: now everyone re-checks
                entry.recheck = False
                woken = entry.give_all()
                entry.quiet_since = self.clock()
                return woken
            return list(entry.tickets.values())
        return []

    def _answered(self, channel: str) -> None:
        # One more SUBSCRIBE of ``channel`` answered: the waiters it fences are fenced.
        sent = self.sent.get(channel, (0, 0.0))[0]
        answered = self.answered[channel] = self.answered.get(channel, 0) + 1
        entry = self.channels.get(channel)
        if entry is not None and FENCE in entry.wake_all:
            for ticket in entry.tickets.values():
                if ticket.fence <= answered:
                    ticket.fence = 0
        if answered >= sent and entry is None:  # nothing in flight, nobody to number
            self.sent.pop(channel, None)
            self.answered.pop(channel, None)

    def _uncount(self, channel: str) -> None:
        # ``channel`` left the table: its numbering goes unless a SUBSCRIBE is in flight.
        if self.sent.get(channel, (0, 0.0))[0] <= self.answered.get(channel, 0):
            self.sent.pop(channel, None)
            self.answered.pop(channel, None)

    def refused(self) -> list[Ticket]:
        """The server answered a SUBSCRIBE with an error (MOVED, CROSSSLOT) without saying
        for which channel: every channel with a SUBSCRIBE in flight, or not yet confirmed,
        is marked dropped (its waiters re-check and subscribe it again); their tickets."""
        woken = []
        for channel, entry in self.channels.items():
            if not entry.confirmed or channel in self.in_flight:
                self.dropped.add(channel)
                entry.confirmed = True
                woken += entry.give_all()
        self.in_flight.clear()
        return woken

    def forbidden(self, channels: Iterable[str], reason: str) -> list[Ticket]:
        """The server refused to subscribe ``channels`` for lack of permission: their waiters
        get ``reason`` (an error for them, not a connection loss); their tickets."""
        woken = []
        for channel in channels:
            pending = self.in_flight.pop(channel, 0)
            if pending > 1:
                self.in_flight[channel] = pending - 1
            entry = self.channels.get(channel)
            if entry is not None and not entry.confirmed:
                entry.refusal = reason
                entry.confirmed = True
                woken += entry.give_all()
        return woken

    def _unsubscribed(self, channel: str) -> list[Ticket]:
        pending = self.leaving.pop(channel, 0)
        if pending > 0:  # the answer to our own UNSUBSCRIBE
            if pending > 1:
                self.leaving[channel] = pending - 1
            else:
                self.parting.pop(channel, None)
            return []
        entry = self.channels.get(channel)
        if entry is None:
            return []
        self.dropped.add(channel)  # the server dropped it: wake all to re-check elsewhere
        return entry.give_all()

    def disconnected(self) -> list[Ticket]:
        """The connection dropped: every waiter may have missed a message. Each channel
        waits for its new SUBSCRIBE's answer, which wakes all its waiters to re-check
        (`_subscribed()`); nobody is woken now (the tickets to notify: none)."""
        self.in_flight.clear()
        self.leaving.clear()
        self.alias_off.clear()
        self._letting.clear()
        self.parting.clear()
        self.sent.clear()
        self.answered.clear()
        for channel, entry in list(self.channels.items()):
            for ticket in entry.tickets.values():
                if ticket.fence:  # the new connection's first SUBSCRIBE is its fence
                    ticket.fence = 1
            if not entry.tickets:  # lingering: a new connection starts without it
                del self.channels[channel]
                self.dropped.discard(channel)
                self.forget_alias(channel)
                continue
            entry.alias_on = entry.alias is not None  # subscribed again with the channel
            entry.confirmed = False
            entry.recheck = True
            entry.quiet_since = math.inf
        return []
