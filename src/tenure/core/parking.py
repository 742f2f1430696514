"""Who waits on which channel, and whom a message wakes: the listener's rules, sans I/O.

One client has one pub/sub connection however many of its threads or tasks wait. A channel
is subscribed while at least one of them waits on it (SUBSCRIBE for the first, UNSUBSCRIBE
after the last). Rules:

- An unlock message wakes **one** waiter of this client (a payload in the channel's
  ``wake_all``, e.g. a write unlock, wakes all): the others stay asleep instead of racing
  for a lock only one can take. Wake-ups are permits, never more than there are waiters.
- A waiter that leaves abnormally (error, cancellation) may have taken a wake-up it will not
  use, so it passes one on.
- After a reconnect every waiter is woken: messages may have been missed meanwhile.
- A channel left and joined again before the first SUBSCRIBE was answered has two
  SUBSCRIBEs in flight: only the reply to the last one confirms the new waiter (an unlock
  published between the two would otherwise be missed).
- An unsubscribe reply this client did not ask for (a cluster drops sharded subscriptions
  of a slot that moved to another shard) wakes every waiter of that channel, and the channel
  is marked ``dropped`` until the driver subscribes it again (on the slot's new owner).

The driver (``tenure.aio.listener`` and its generated sync twin) owns the socket, the mutex
and the conditions; it asks this table what to send and whom to notify.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

WAKE_ANY = "*"
"""In a channel's ``wake_all``: every message wakes every waiter of this client. Semaphores use
it: a release of n permits may serve several waiters, each wanting its own number of permits,
so waking one could leave a satisfiable waiter asleep."""


@dataclass(eq=False)
class Parked:
    """The waiters of this client on one channel."""

    wake_all: frozenset[str]
    cond: Any
    """The driver's condition on which these waiters sleep."""
    refs: int = 0
    permits: int = 0
    confirmed: bool = False


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

    def unsubscribing(self, channel: str) -> None:
        """The driver sent UNSUBSCRIBE for ``channel``."""
        self.leaving[channel] = self.leaving.get(channel, 0) + 1

    def resubscribing(self, channel: str) -> None:
        """The driver sent SUBSCRIBE again for a dropped ``channel``."""
        self.dropped.discard(channel)
        self.subscribing([channel])

    def evict(self, channel: str) -> Parked | None:
        """Remove ``channel`` with all its waiters (they move to another connection); its
        entry, with every waiter given a wake-up to re-check, or None."""
        entry = self.channels.pop(channel, None)
        if channel in self.dropped:
            self.dropped.discard(channel)
        elif entry is not None:
            self.unsubscribing(channel)  # the driver sends UNSUBSCRIBE
        self.in_flight.pop(channel, None)
        if entry is not None:
            entry.permits = entry.refs
            entry.confirmed = True  # a waiter still waiting for its SUBSCRIBE goes on
        return entry

    def adopt(self, channel: str, wake_all: frozenset[str], refs: int, cond: Any) -> Parked:
        """Take over ``refs`` waiters of ``channel`` from another connection."""
        entry = self.channels.get(channel)
        if entry is None:
            entry = self.channels[channel] = Parked(wake_all, cond)
        entry.refs += refs
        return entry

    def subscribing(self, channels: Iterable[str]) -> None:
        """The driver sent SUBSCRIBE for ``channels``."""
        for channel in channels:
            self.in_flight[channel] = self.in_flight.get(channel, 0) + 1

    def join(
        self, channel: str, wake_all: frozenset[str], make_cond: Callable[[], Any]
    ) -> tuple[Parked, bool]:
        """Count one more waiter on ``channel``; (entry, True if SUBSCRIBE must be sent)."""
        entry = self.channels.get(channel)
        first = entry is None
        if entry is None:
            entry = self.channels[channel] = Parked(wake_all, make_cond())
        entry.refs += 1
        return entry, first

    def leave(self, channel: str, pass_on: bool) -> tuple[Parked | None, bool]:
        """One waiter less on ``channel``: (entry to notify or None, True if UNSUBSCRIBE
        must be sent: it is counted as sent). With ``pass_on`` the leaver's possible
        wake-up goes to another."""
        entry = self.channels.get(channel)
        if entry is None:
            return None, False
        entry.refs -= 1
        if entry.refs == 0:
            del self.channels[channel]
            if channel in self.dropped:  # the server unsubscribed it already
                self.dropped.discard(channel)
                return None, False
            self.unsubscribing(channel)
            return None, True
        entry.permits = min(entry.permits + pass_on, entry.refs)
        return (entry if pass_on else None), False

    def take(self, entry: Parked) -> bool:
        """Use one wake-up of ``entry``, if there is one."""
        if entry.permits > 0:
            entry.permits -= 1
            return True
        return False

    def received(self, kind: str, channel: str, payload: str) -> Parked | None:
        """Apply one pub/sub reply; the entry whose waiters must be notified, if any."""
        if kind in ("unsubscribe", "sunsubscribe"):
            return self._unsubscribed(channel)
        if kind in ("subscribe", "ssubscribe"):
            return self._subscribed(channel)
        entry = self.channels.get(channel)
        if entry is None:
            return None
        if kind in ("message", "smessage"):
            if payload in entry.wake_all or WAKE_ANY in entry.wake_all:
                entry.permits = entry.refs
            else:
                entry.permits = min(entry.permits + 1, entry.refs)
            return entry
        return None

    def _subscribed(self, channel: str) -> Parked | None:
        # Counted even when nobody waits any more (the waiter left before the answer):
        # a stale count would make a later waiter wait for an answer that never comes.
        pending = self.in_flight.pop(channel, 0)
        if pending > 1:  # the answer to an earlier SUBSCRIBE: wait for the last
            self.in_flight[channel] = pending - 1
            return None
        entry = self.channels.get(channel)
        if entry is not None and not entry.confirmed:
            entry.confirmed = True
            return entry
        return None

    def refused(self) -> list[Parked]:
        """The server answered a SUBSCRIBE with an error (MOVED, CROSSSLOT) without saying
        for which channel: every channel with a SUBSCRIBE in flight, or not yet confirmed,
        is marked dropped (its waiters re-check and subscribe it again); their entries."""
        woken = []
        for channel, entry in self.channels.items():
            if not entry.confirmed or channel in self.in_flight:
                self.dropped.add(channel)
                entry.confirmed = True
                entry.permits = entry.refs
                woken.append(entry)
        self.in_flight.clear()
        return woken

    def _unsubscribed(self, channel: str) -> Parked | None:
        pending = self.leaving.pop(channel, 0)
        if pending > 0:  # the answer to our own UNSUBSCRIBE
            if pending > 1:
                self.leaving[channel] = pending - 1
            return None
        entry = self.channels.get(channel)
        if entry is None:
            return None
        self.dropped.add(channel)  # the server dropped it: wake all to re-check elsewhere
        entry.permits = entry.refs
        return entry

    def disconnected(self) -> Iterable[Parked]:
        """The connection dropped: every waiter may have missed a message; wake them all."""
        self.in_flight.clear()
        self.leaving.clear()
        for entry in self.channels.values():
            entry.permits = entry.refs
        return list(self.channels.values())
