"""Client identity and the table of holds a client has: what the watchdog renews.

Kept in one place so release, renewal and loss reporting agree on who holds what.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Protocol

from tenure import keys
from tenure.scripts import Script


class Identity:
    """One client's uuid and its owner numbers: one per thread and one per asyncio task.

    Numbers come from one counter and are never reused, so a new thread or task never
    inherits the holds of a finished one (thread idents and task ids are recycled).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.client_id = str(uuid.uuid4())
        self._numbers = itertools.count(1)
        self._count_lock = threading.Lock()
        self._thread = threading.local()
        self._keyed: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()

    def _next(self) -> str:
        with self._count_lock:
            return keys.owner_field(self.client_id, next(self._numbers))

    def thread_owner(self) -> str:
        """The owner id of the calling thread."""
        owner: str | None = getattr(self._thread, "owner", None)
        if owner is None:
            owner = self._thread.owner = self._next()
        return owner

    def owner_of(self, key: object) -> str:
        """The owner id of ``key`` (an asyncio task): one per key object, held weakly."""
        owner = self._keyed.get(key)
        if owner is None:
            owner = self._keyed[key] = self._next()
        return owner


class LossListener(Protocol):
    """What a hold reports its loss to: the lock object that took it. It also names the keys
    the watchdog renews, as :mod:`tenure.keys` builds them."""

    def hold_lost(self, owner: str) -> None: ...

    def renewal_keys(self, owner: str, holds: int) -> list[str]: ...


@dataclass(eq=False)
class Hold:
    """One owner's holds on one key, as this client took them (the server has the truth)."""

    lock: LossListener
    key: str
    owner: str
    field: str
    renewal: Script
    leases: list[float | None]
    """Lease of each hold, oldest first; None = renewed by the watchdog."""
    confirmed: float = dataclass_field(default_factory=time.monotonic)
    """Monotonic time at which the server last confirmed the lease (acquire or renewal)."""

    @property
    def watchdog(self) -> bool:
        """True while any hold here was taken without a lease_time."""
        return None in self.leases

    def renewal_keys(self) -> list[str]:
        """The KEYS of this hold in a renewal batch, the lock hash first."""
        return self.lock.renewal_keys(self.owner, len(self.leases))


class HoldTable:
    """Thread-safe table (key, field) -> :class:`Hold` of one client."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._holds: dict[tuple[str, str], Hold] = {}

    def push(
        self,
        lock: LossListener,
        key: str,
        owner: str,
        field: str,
        renewal: Script,
        lease: float | None,
    ) -> Hold:
        """Record one more hold after the server granted it."""
        with self._mutex:
            hold = self._holds.get((key, field))
            if hold is None:
                hold = self._holds[key, field] = Hold(lock, key, owner, field, renewal, [])
            hold.leases.append(lease)
            hold.confirmed = time.monotonic()
            return hold

    def get(self, key: str, field: str) -> Hold | None:
        with self._mutex:
            return self._holds.get((key, field))

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
            return hold

    def extended(self, hold: Hold, lease: float, at: float) -> None:
        """The server set ``hold``'s expiry to ``lease`` seconds after monotonic time ``at``
        (``extend()``): its newest lease is now ``lease``, counted from ``at``. Ignored when
        the hold was released or replaced meanwhile."""
        with self._mutex:
            if self._holds.get((hold.key, hold.field)) is hold and hold.leases:
                hold.leases[-1] = lease
                hold.confirmed = at

    def discard(self, key: str, field: str) -> Hold | None:
        """Forget every hold on (key, field)."""
        with self._mutex:
            return self._holds.pop((key, field), None)

    def watchdog_holds(self) -> list[Hold]:
        """Snapshot of the holds the watchdog renews."""
        with self._mutex:
            return [hold for hold in self._holds.values() if hold.watchdog]

    def renewed(self, holds: list[Hold], present: list[bool], at: float) -> list[Hold]:
        """Apply a renewal reply; returns the holds found gone, now removed as lost.

        A hold released or re-acquired while the renewal was in flight is no longer the
        registered object and is left alone.
        """
        lost = []
        with self._mutex:
            for hold, ok in zip(holds, present, strict=True):
                if self._holds.get((hold.key, hold.field)) is not hold:
                    continue
                if ok:
                    hold.confirmed = at
                else:
                    del self._holds[hold.key, hold.field]
                    lost.append(hold)
        return lost

    def expired(self, holds: list[Hold], lease: float, now: float) -> list[Hold]:
        """After failed renewals: the holds whose lease surely ran out, now removed as lost."""
        lost = []
        with self._mutex:
            for hold in holds:
                current = self._holds.get((hold.key, hold.field)) is hold
                if current and now - hold.confirmed >= lease:
                    del self._holds[hold.key, hold.field]
                    lost.append(hold)
        return lost

    def clear(self) -> None:
        with self._mutex:
            self._holds.clear()


OnLost = Callable[[object], None]
