"""Client identity and the table of holds a client has: what the watchdog renews.

Kept in one place so release, renewal and loss reporting agree on who holds what.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Protocol

from tenure import keys, observe
from tenure.core.clock import valid_until
from tenure.scripts import Script


def _task_running(task: Any) -> bool:
    return not task.done()


class Identity:
    """One client's uuid and its owner numbers: one per thread and one per asyncio task.

    Numbers come from one counter and are never reused, so a new thread or task never
    inherits the holds of a finished one (thread idents and task ids are recycled). The
    identity also knows whether an owner's thread or task is still running (`alive()`).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.client_id = str(uuid.uuid4())
        self._numbers = itertools.count(1)
        self._count_lock = threading.Lock()
        self._thread = threading.local()
        self._keyed: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
        self._running: dict[str, Callable[[], bool]] = {}

    def _next(self, subject: object, running: Callable[[Any], bool]) -> str:
        with self._count_lock:
            owner = keys.owner_field(self.client_id, next(self._numbers))
        forget = self._running.pop
        ref = weakref.ref(subject, lambda _: forget(owner, None))
        self._running[owner] = lambda: (it := ref()) is not None and running(it)
        return owner

    def thread_owner(self) -> str:
        """The owner id of the calling thread."""
        owner: str | None = getattr(self._thread, "owner", None)
        if owner is None:
            thread = threading.current_thread()
            owner = self._thread.owner = self._next(thread, threading.Thread.is_alive)
        return owner

    def owner_of(self, key: Any, running: Callable[[Any], bool] = _task_running) -> str:
        """The owner id of ``key`` (an asyncio task): one per key object, held weakly.

        ``running(key)`` tells whether it still runs (default: an asyncio task not done).
        """
        owner = self._keyed.get(key)
        if owner is None:
            owner = self._keyed[key] = self._next(key, running)
        return owner

    def alive(self, owner: str) -> bool:
        """False once ``owner``'s thread or task of this client has ended (or was collected);
        True for a running one, and for an owner id this identity did not make."""
        running = self._running.get(owner)
        if running is None:
            return not owner.startswith(self.client_id)
        return running()


class LossSink(Protocol):
    """Where a hold's loss and doubt are reported: the lock core that granted it, registered
    with the hold at the grant (`HoldTable.push()`). It also names the keys the watchdog
    renews, as `tenure.keys` builds them; the table asks when the number of holds
    changes, never during a renewal pass. Only the core calls it
    (`Hold.report_loss()`, `tenure.core.watchdog.renew()`): a
    driver never calls into a lock object."""

    def hold_lost(self, owner: str) -> None: ...

    def renewal_keys(self, owner: str, holds: int) -> list[str]: ...

    def renewal_channel(self) -> str: ...

    def hold_in_doubt(self, owner: str) -> None: ...


class LossScope(Protocol):
    """What watches a hold for its loss: the body running under it (``async with lock:``),
    which `lost()` cancels. Registered with `HoldTable.watch()`."""

    def lost(self) -> None: ...


@dataclass(eq=False)
class Hold:
    """One owner's holds on one key, as this client took them (the server has the truth)."""

    sink: LossSink
    """Where its loss and doubt are reported (the lock core that granted it)."""
    key: str
    owner: str
    field: str
    renewal: Script
    leases: list[float | None]
    """Lease of each hold, oldest first; None = renewed by the watchdog."""
    lease: float = 0.0
    """Seconds of the lease the server last applied (a grant's own, or the watchdog's)."""
    confirmed: float = dataclass_field(default_factory=time.monotonic)
    """Monotonic time just before the command that last applied `lease` was sent."""
    cap: float = math.inf
    """Monotonic time after which the watchdog no longer renews it (``max_hold``)."""
    doubted: bool = False
    """True once a renewal of it failed, until one is confirmed (jeopardy)."""
    keys: list[str] = dataclass_field(default_factory=list)
    """The KEYS of this hold in a renewal batch, the lock hash first: set by the table
    whenever the number of holds changes (a read lock has a timeout key per hold)."""
    channel: str = ""
    """The channel a renewal announces the new lease on ('' for none), set at the grant."""
    reported: bool = False
    """True once its loss is being reported to `sink` (`report_loss()`): each loss once."""
    logged: bool = False
    """True once its loss is logged (WARNING), or its keeper took the logging on
    (`claim()`): each loss logged once."""

    @property
    def watchdog(self) -> bool:
        """True while any hold here was taken without a lease_time."""
        return None in self.leases

    @property
    def valid_until(self) -> float:
        """Monotonic time after which the lease has surely run out (docs/internals.md,
        "Watchdog": last confirmation + lease, less the clock-drift allowance)."""
        return valid_until(self.confirmed, self.lease)

    def valid_for(self, now: float) -> float:
        """Seconds from ``now`` during which the hold is surely still valid (0.0 after)."""
        return max(0.0, self.valid_until - now)

    def in_doubt(self, now: float, period: float) -> bool:
        """Jeopardy: the hold is still valid on the local clock, but a renewal of it
        failed, or none was confirmed for more than one renewal period (plus half a period
        for the pass's round trip) while one was due (the watchdog renews it and its cap,
        if any, had not passed)."""
        if now >= self.valid_until:
            return False
        if self.doubted:
            return True
        due = self.confirmed + period
        return self.watchdog and self.cap > due and now > due + DOUBT_SLACK * period

    def renewal_keys(self) -> list[str]:
        """The KEYS of this hold in a renewal batch, the lock hash first (`keys`)."""
        return self.keys

    def renewal_channel(self) -> str:
        """The channel the renewal announces the new lease on ('' for none)."""
        return self.channel

    def counted(self) -> None:
        """The number of holds changed: name the renewal keys for the new count."""
        if self.leases:
            self.keys = self.sink.renewal_keys(self.owner, len(self.leases))

    def report_loss(self) -> None:
        """Report this hold, removed from its table as lost, to its sink (the ``lost``
        flag, the scopes under it cancelled, ``on_lost``), unless that was done already;
        logged at WARNING here unless its keeper logs it (`claim()`).

        The keeper reports after the pass that found the loss, and its owner's next look at
        the lock (`HoldTable.get()`) sooner: whichever comes first reports, and the other
        returns once that report is made (`_REPORTING`). Once the owner's look returns, no
        report of this hold is left to come: a later one would mark the owner's next hold
        on the lock (a new grant, a new term) as lost and cancel its body
        (docs/internals.md, "Watchdog")."""
        with _REPORTING:
            if self.reported:  # (or being reported, by this thread: a look meanwhile)
                return
            self.reported = True
            logs = not self.logged
            self.logged = True
            try:
                if logs:  # the owner's look came first: the keeper logs nothing more
                    observe.hold_lost(self)
                self.sink.hold_lost(self.owner)
            except BaseException:  # cut short (an interrupt): the next look or the keeper
                self.reported = False
                self.logged = not logs
                raise

    def claim(self) -> bool:
        """The keeper, having removed this hold as lost, takes its logging and report on:
        True unless its owner's look reported it first (`report_loss()`: logged then).
        A keeper logs and reports only what it claimed, so a loss is logged once (before,
        the keeper logged a loss its owner's release had logged already)."""
        with _REPORTING:
            if self.reported or self.logged:
                return False
            self.logged = True
            return True


_REPORTING = threading.RLock()
"""Held while a loss is reported (`Hold.report_loss()`): a look of another thread at a lost
hold whose report is under way waits for its end. Reentrant: the report's own looks go on."""


def _forked_child() -> None:
    # A report under way in another thread at the fork never ends in the child.
    global _REPORTING
    _REPORTING = threading.RLock()


os.register_at_fork(after_in_child=_forked_child)


DOUBT_SLACK = 0.5
"""Share of a renewal period a renewal pass may take to be confirmed before the holds it
renews are counted in doubt (`Hold.in_doubt()`)."""


class QueuedWaiter(Protocol):
    """A lock with waiters in a server-side queue (FairLock): what the renewal pass needs to
    keep their entries alive (`tenure.core.watchdog.refresh_waiters()`)."""

    key: str
    waiter_prefix: str
    """A waiter's channel is this prefix followed by its owner."""

    def waiter_keys(self) -> list[str]: ...

    def entry_gone(self, owner: str) -> None: ...


class WaiterTable:
    """Thread-safe set of (lock, owner) of one client queued on the server (FairLock), whose
    queue entries the renewal pass refreshes (docs/internals.md, "Waiter liveness")."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiters: dict[tuple[int, str], tuple[QueuedWaiter, str]] = {}

    def add(self, lock: QueuedWaiter, owner: str) -> None:
        with self._mutex:
            self._waiters[id(lock), owner] = (lock, owner)

    def remove(self, lock: QueuedWaiter, owner: str) -> None:
        with self._mutex:
            self._waiters.pop((id(lock), owner), None)

    def snapshot(self, alive: Callable[[str], bool]) -> list[tuple[QueuedWaiter, str]]:
        """The queued waiters whose owner still runs; those of owners that ended are dropped
        (their entries then run out on the server)."""
        with self._mutex:
            for k in [k for k, (_, owner) in self._waiters.items() if not alive(owner)]:
                del self._waiters[k]
            return list(self._waiters.values())

    def __len__(self) -> int:
        with self._mutex:
            return len(self._waiters)


class HoldTable:
    """Thread-safe table (key, field) -> `Hold` of one client.

    It also tells its keeper (the runner's renewal loop) when a hold expires before the
    moment the keeper planned to look next (`poke`), so a loss is noticed on time.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._holds: dict[tuple[str, str], Hold] = {}
        self._scopes: dict[tuple[str, str], list[LossScope]] = {}
        self._next_look = math.inf
        self.poke: Callable[[], None] | None = None
        """Called (from any thread) when a new hold ends before the keeper's next look."""
        self.waiters = WaiterTable()
        """This client's queued fair-lock waiters, refreshed by the same keeper."""
        self.doubt_period: float | None = None
        """The renewal period, once the keeper looks for holds in doubt on its clock
        (`doubtful()`); None before."""
        self._losses: dict[tuple[str, str], Hold] = {}
        """(key, field) -> the hold removed there as lost (`renewed()`, `expired()`), until
        a look there (`get()`) saw its loss reported; one the keeper reported is dropped at
        its next look (`expired()`)."""
        self._unreported: dict[tuple[str, str], bool] = {}
        """(key, field) of each hold removed as lost (`renewed()`, `expired()`)
        whose loss was not reported yet -> True once a release raised it. The keeper
        reports after the rest of its renewal pass, or when its thread runs again: a
        release (or a resign) in between must still see the loss (`loss_at_release()`)."""

    def push(
        self,
        lock: LossSink,
        key: str,
        owner: str,
        field: str,
        renewal: Script,
        lease: float | None,
        *,
        applied: float,
        sent: float,
        cap: float | None = None,
        shortens: bool = True,
    ) -> Hold:
        """Record one more hold after the server granted it; ``lock`` (the core that granted
        it) is where its loss will be reported, if the hold is new.

        ``applied``: seconds of lease the grant set on the server; ``sent``: monotonic time
        just before the grant's script was sent; ``cap``: seconds after ``sent`` past which
        the watchdog stops renewing the holds on (key, field) (``max_hold``; the earliest
        cap of the holds there wins). ``shortens``: a re-entry's grant sets the expiry to
        ``applied`` even when that ends before the earlier holds' (a ReadWriteLock's
        never shortens it: those keep theirs, and a short re-entry is no loss at its end).
        """
        with self._mutex:
            hold = self._holds.get((key, field))
            if hold is None:  # every uncontended grant: each field given, none defaulted
                hold = self._holds[key, field] = Hold(
                    lock,
                    key,
                    owner,
                    field,
                    renewal,
                    [lease],
                    applied,
                    sent,
                    keys=lock.renewal_keys(owner, 1),
                    channel=lock.renewal_channel(),
                )
            else:
                hold.leases.append(lease)
                hold.counted()
                if shortens or valid_until(sent, applied) > hold.valid_until:
                    hold.lease, hold.confirmed = applied, sent
            if cap is not None:
                hold.cap = min(hold.cap, sent + cap)
            poke = hold.valid_until < self._next_look and self.poke
        if poke:
            poke()
        return hold

    def reapplied(self, hold: Hold, applied: float, sent: float) -> bool:
        """A release that left holds re-applied ``applied`` seconds (sent at ``sent``):
        False if ``hold`` left the table meanwhile (taken off as lost)."""
        with self._mutex:
            if self._holds.get((hold.key, hold.field)) is not hold:
                return False
            hold.lease, hold.confirmed = applied, sent
            return True

    def get(self, key: str, field: str) -> Hold | None:
        """The hold recorded on (key, field), or None. A hold removed there as lost is
        reported first, if the keeper has not reported it yet (`Hold.report_loss()`): every
        acquire asks before its attempt, so a loss is reported before its owner can hold
        the lock again, and the report never lands on the new hold."""
        # One read of the dict, atomic as it is: no mutex needed. (`_losses` is set before
        # a hold is removed as lost, and empty but from a loss to the keeper's next look:
        # an uncontended acquire makes no call more.)
        hold = self._holds.get((key, field))
        if hold is None and self._losses:
            self._settle(key, field)
        return hold

    def _settle(self, key: str, field: str) -> None:
        """A look at (key, field) found no hold: report the one removed there as lost, if
        any, or wait for its report under way, then forget it."""
        lost = self._losses.get((key, field))
        if lost is None:
            return
        lost.report_loss()
        with self._mutex:
            if self._losses.get((key, field)) is lost:
                del self._losses[key, field]

    def _remove_lost(self, hold: Hold) -> None:
        """Remove ``hold`` as lost (with the mutex held); its report is still to be made."""
        # Named a loss before it leaves the table: a look in between sees one or the other.
        self._losses[hold.key, hold.field] = hold
        self._unreported[hold.key, hold.field] = False
        del self._holds[hold.key, hold.field]

    def counts(self, key: str) -> dict[str, int]:
        """Field -> number of holds recorded on ``key``, for every owner of this client."""
        with self._mutex:
            return {f: len(hold.leases) for (k, f), hold in self._holds.items() if k == key}

    def pop(self, key: str, field: str) -> Hold | None:
        """Forget one hold (the newest); the whole entry once none is left.

        Called before the release script runs, so the watchdog stops renewing a hold that
        is being released and cannot mistake its deletion for a loss.
        """
        with self._mutex:
            hold = self._holds.get((key, field))
            if hold is None:
                return None
            hold.leases.pop()
            if not hold.leases:
                del self._holds[key, field]
            hold.counted()
            return hold

    def extended(self, hold: Hold, lease: float, at: float) -> None:
        """The server set ``hold``'s expiry to ``lease`` seconds after monotonic time ``at``
        (``extend()``): its newest lease is now ``lease``, counted from ``at``. Ignored when
        the hold was released or replaced meanwhile."""
        with self._mutex:
            if self._holds.get((hold.key, hold.field)) is hold and hold.leases:
                hold.leases[-1] = lease
                hold.lease, hold.confirmed = lease, at

    def narrowed(self, hold: Hold, applied: float, at: float) -> None:
        """A release of ``hold``'s newest hold, leaving older ones, is sent at ``at``; the
        server may set the lease of what is left to ``applied`` seconds from then. Until
        the reply, ``hold`` counts valid only as long as both that and its last
        confirmation say (a newer hold's longer lease no longer keeps the lock). The keeper
        looks by then: with no reply (a pause, a lost connection) the loss is reported at
        the lease's end, not at the next renewal."""
        with self._mutex:
            if self._holds.get((hold.key, hold.field)) is not hold or (
                valid_until(at, applied) >= hold.valid_until
            ):
                return
            hold.lease, hold.confirmed = applied, at
            poke = hold.valid_until < self._next_look and self.poke
        if poke:
            poke()

    def take(self, hold: Hold) -> bool:
        """Forget ``hold`` if it is still the one recorded on its (key, field): True if
        it was (then nobody else reports its loss: the keeper reports only what it took)."""
        with self._mutex:
            if self._holds.get((hold.key, hold.field)) is not hold:
                return False
            del self._holds[hold.key, hold.field]
            return True

    def discard(self, key: str, field: str) -> Hold | None:
        """Forget every hold on (key, field)."""
        with self._mutex:
            return self._holds.pop((key, field), None)

    def watchdog_holds(self, now: float | None = None) -> list[Hold]:
        """Snapshot of the holds the watchdog renews: taken without a lease and not past
        their cap (``max_hold``) at ``now`` (default: the monotonic clock now)."""
        now = time.monotonic() if now is None else now
        with self._mutex:
            return [h for h in self._holds.values() if h.watchdog and h.cap > now]

    def unrenewed_holds(self, renewal: Script, now: float | None = None) -> list[Hold]:
        """Snapshot of the holds with the renewal script ``renewal`` that the watchdog does
        not renew at ``now``: taken with a lease_time, or past their cap. A renewal pass
        re-asserts their lock's expiry (ReadWriteLock read holds: `tenure.core.watchdog`)."""
        now = time.monotonic() if now is None else now
        with self._mutex:
            return [
                h for h in self._holds.values()
                if h.renewal == renewal and not (h.watchdog and h.cap > now)
            ]

    def unconfirmed(self, holds: list[Hold]) -> list[Hold]:
        """A renewal of ``holds`` failed (no reply, an error, too few replicas): the
        registered ones still valid now are in doubt; returns those that were not yet
        (each episode of doubt is reported once)."""
        now = time.monotonic()
        fresh = []
        with self._mutex:
            for hold in holds:
                if self._holds.get((hold.key, hold.field)) is not hold:
                    continue
                if not hold.doubted and now < hold.valid_until:
                    hold.doubted = True
                    fresh.append(hold)
        return fresh

    # ------------------------------------------------------------ loss scopes
    def watch(self, key: str, field: str, scope: LossScope) -> bool:
        """Have ``scope`` told (`LossScope.lost()`) when the hold on (key, field) is
        reported lost; False (nothing registered) when no such hold is recorded."""
        with self._mutex:
            if (key, field) not in self._holds:
                return False
            self._scopes.setdefault((key, field), []).append(scope)
            return True

    def unwatch(self, key: str, field: str, scope: LossScope) -> None:
        """Stop telling ``scope`` (the body it guards ended)."""
        with self._mutex:
            scopes = self._scopes.get((key, field))
            if scopes is not None and scope in scopes:
                scopes.remove(scope)
                if not scopes:
                    del self._scopes[key, field]

    def scopes_lost(self, key: str, field: str) -> list[LossScope]:
        """The scopes watching (key, field), now forgotten: its hold was reported lost."""
        with self._mutex:
            return self._scopes.pop((key, field), [])

    def renewed(
        self, holds: list[Hold], present: list[bool], at: float, lease: float
    ) -> list[Hold]:
        """Apply a renewal reply (renewal sent at ``at``, applying ``lease`` seconds);
        returns the holds found gone, now removed as lost.

        A hold released, re-acquired or found expired while the renewal was in flight is no
        longer the registered object and is left alone: a late renewal never revives it.
        """
        lost = []
        with self._mutex:
            for hold, ok in zip(holds, present, strict=True):
                if self._holds.get((hold.key, hold.field)) is not hold:
                    continue
                if ok:
                    # A renewal sent before the hold's last grant, release or narrowing
                    # may have run before it on the server: it never lengthens what that
                    # one set (a re-entry's shorter lease, say).
                    if at >= hold.confirmed or valid_until(at, lease) < hold.valid_until:
                        hold.lease, hold.confirmed = lease, at
                    hold.doubted = False
                else:
                    self._remove_lost(hold)
                    lost.append(hold)
        return lost

    def expired(self, now: float) -> list[Hold]:
        """The holds whose lease surely ran out by ``now`` (`Hold.valid_until`),
        now removed as lost and claimed (`Hold.claim()`): no renewal confirmed them in
        time, whatever the reason."""
        with self._mutex:
            if self._losses:  # those the keeper reported since its last look: forgotten
                for k in [k for k, hold in self._losses.items() if hold.reported]:
                    del self._losses[k]
            lost = [hold for hold in self._holds.values() if hold.valid_until <= now]
            for hold in lost:
                self._remove_lost(hold)
        # (Claimed outside the mutex: a report holds `_REPORTING` while it takes the mutex.)
        return [hold for hold in lost if hold.claim()]

    def loss_at_release(self, key: str, field: str) -> bool:
        """A release of (key, field) found no hold: True if the keeper removed it as lost
        and has not reported it yet. The release raises LockLostError for it; the loss is
        reported here first (logged once: the release's own log of it says no more), and
        the report adds no second error (`loss_reported()`)."""
        with self._mutex:
            if self._unreported.get((key, field)) is not False:
                return False
            self._unreported[key, field] = True
        self._settle(key, field)
        return True

    def loss_reported(self, key: str, field: str) -> bool:
        """The loss of (key, field) is being reported: True if a release already raised it
        (`loss_at_release()`)."""
        with self._mutex:
            return self._unreported.pop((key, field), False)

    def orphans(self, alive: Callable[[str], bool]) -> list[Hold]:
        """The holds whose owner (thread or task) has ended, now removed: nobody can
        release them, so they are no longer renewed and expire with their lease."""
        with self._mutex:
            gone = [hold for hold in self._holds.values() if not alive(hold.owner)]
            for hold in gone:
                del self._holds[hold.key, hold.field]
        return gone

    def doubtful(self, now: float) -> list[Hold]:
        """The holds that went in doubt by ``now`` on the clock (no renewal confirmed for a
        period and a half, `Hold.in_doubt()`), now marked so: each episode once."""
        period = self.doubt_period
        if period is None:
            return []
        with self._mutex:
            fresh = [
                hold for hold in self._holds.values()
                if not hold.doubted and hold.in_doubt(now, period)
            ]
            for hold in fresh:
                hold.doubted = True
        return fresh

    def _doubt_at(self, hold: Hold) -> float:
        """When ``hold`` goes in doubt on the clock unless a renewal confirms it first."""
        period = self.doubt_period
        if period is None or hold.doubted or not hold.watchdog:
            return math.inf
        if hold.cap <= hold.confirmed + period:
            return math.inf
        return hold.confirmed + (1 + DOUBT_SLACK) * period

    def plan(self, renewal_at: float) -> float:
        """The keeper's next look: the next renewal, the earliest lease end or the earliest
        moment a hold goes in doubt, whichever comes first. Holds pushed afterwards that end
        sooner call `poke`."""
        with self._mutex:
            ends = (
                min(hold.valid_until, self._doubt_at(hold)) for hold in self._holds.values()
            )
            look = min(renewal_at, min(ends, default=math.inf))
            # A look planned for a hold released since stays planned (one spare wake-up):
            # else every short-leased hold taken after it would poke the keeper again.
            if time.monotonic() < self._next_look < look:
                look = self._next_look
            self._next_look = look
            return look

    def __len__(self) -> int:
        with self._mutex:
            return len(self._holds)

    def clear(self) -> None:
        with self._mutex:
            self._holds.clear()
            self._losses.clear()


OnLost = Callable[[Any], None]
"""An ``on_lost`` callback: called with the lock object (or semaphore) whose hold was lost.
``Any`` so that a callback annotated with the lock's own class (``def cb(lock: tenure.Lock)``)
type-checks: a parameter typed ``object`` would only accept callbacks taking ``object``."""
