"""MultiLock and RedLock decisions, sans I/O: quorum, validity, waits, and loss roll-up.

The sync and asyncio fronts (:mod:`tenure.sync.composite`, :mod:`tenure.aio.composite`) only
send: they ask this module how long each member may wait, with what lease, whether an attempt
succeeded, how long to sleep before the next one, and they report member holds and losses to a
:class:`CompositeCore`, which decides when the composite as a whole is lost.

Sources: Redis, "Distributed Locks with Redis" (the Redlock algorithm,
https://redis.io/docs/latest/develop/use/patterns/distributed-locks/); Redisson's
``RedissonMultiLock`` / ``RedissonRedLock``; M. Kleppmann, "How to do distributed locking"
(2016) for what Redlock does not guarantee.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from tenure.core.holds import OnLost
from tenure.core.lock import LockCore

log = logging.getLogger("tenure")

CLOCK_DRIFT_FACTOR = 0.01
"""Share of the lease assumed lost to clock drift between nodes (Redlock page)."""
CLOCK_DRIFT_MIN = 0.002
"""Fixed drift allowance in seconds (2 ms, as the Redlock page's reference code)."""
RETRY_DELAY = (0.005, 0.05)
"""Random sleep (seconds) between RedLock attempts: desynchronises competing clients."""
MULTI_ROUND_PER_MEMBER = 1.5
"""Without a timeout a MultiLock round lasts a random 1x to 2x this many seconds per member
(Redisson ``lock()``: 1500 ms per lock); then it lets go and starts over, so two composites
taking shared members in different orders cannot deadlock."""
DEFAULT_NODE_TIMEOUT = 0.1
"""Default RedLock per-node timeout (seconds): small next to the lease, as the Redlock page asks."""


def quorum(members: int) -> int:
    """The majority RedLock needs: N // 2 + 1."""
    return members // 2 + 1


def drift(lease: float) -> float:
    """Clock-drift allowance of a lease: 0.01 x lease + 2 ms."""
    return CLOCK_DRIFT_FACTOR * lease + CLOCK_DRIFT_MIN


def validity(lease: float, elapsed: float) -> float:
    """Seconds of exclusion left after an acquisition that took ``elapsed`` seconds.

    lease - elapsed - drift, both measured with ``time.monotonic()``; > 0 is required.
    """
    return lease - elapsed - drift(lease)


def retry_delay(remaining: float) -> float:
    """A random pause before the next RedLock attempt, never past the deadline."""
    return max(0.0, min(random.uniform(*RETRY_DELAY), remaining))


def multi_round(wait: float, members: int) -> float:
    """Seconds one MultiLock round may take: the whole wait, or a random slice if unbounded."""
    if math.isfinite(wait):
        return wait
    base = MULTI_ROUND_PER_MEMBER * members
    return random.uniform(base, 2 * base)


def multi_member_lease(lease: float | None, round_wait: float) -> float | None:
    """Lease for each member: at least 2 x the round's wait, so the first members taken
    cannot expire while the later ones are waited for (Redisson ``RedissonMultiLock``)."""
    if lease is None:
        return None
    return max(lease, 2 * round_wait)


Caller = tuple[str, ...]
"""A composite's caller: the owner id the caller has on each member's client."""


@dataclass(eq=False)
class Acquisition:
    """One acquisition of a composite by one caller: which member holds it has."""

    owners: Caller
    members: dict[int, str] = field(default_factory=dict)
    """Member index -> owner, for every member believed held (late replies included)."""
    lost_members: set[int] = field(default_factory=set)
    validity: float | None = None
    attempts: list[object] = field(default_factory=list)
    """The driver's in-flight member attempts (futures/tasks), awaited briefly at release."""
    lost: bool = False
    settled: bool = False
    """True once the attempt failed or the composite was released: a member granted after
    that (a reply that came back late) must be released at once."""


class CompositeCore:
    """Shared state of one MultiLock or RedLock: acquisitions per caller and loss roll-up.

    A member hold lost (its member's watchdog found it gone, or its lease surely ran out
    without renewal) counts against every acquisition that holds that member. A MultiLock
    (``needed`` = all members) is lost at the first such member; a RedLock (``needed`` =
    quorum) once fewer than a majority of its members are still held — member watchdogs renew
    within each member's lease, so "a majority renewed within validity" is what keeps it.
    Then ``lost`` turns True and ``on_lost(front)`` is called, once per acquisition.
    """

    def __init__(
        self,
        kind: str,
        cores: Sequence[LockCore],
        needed: int,
        on_lost: OnLost | None,
    ) -> None:
        if not cores:
            raise ValueError(f"a {kind} needs at least one member lock")
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        self.kind = kind
        self.cores = list(cores)
        self.needed = needed
        self.on_lost = on_lost
        self.front: object = self
        self._mutex = threading.Lock()
        self._held: dict[Caller, list[Acquisition]] = {}
        self._lost: set[Caller] = set()
        for core in self.cores:
            core.add_loss_listener(self._member_lost)

    @property
    def name(self) -> str:
        return f"{self.kind}({', '.join(core.name for core in self.cores)})"

    # ------------------------------------------------------------ attempts
    def start(self, owners: Caller) -> Acquisition:
        return Acquisition(owners)

    def granted(self, acq: Acquisition, index: int) -> bool:
        """Record member ``index`` granted; False if the attempt is already settled (the
        caller must then release that member)."""
        with self._mutex:
            if acq.settled:
                return False
            acq.members[index] = acq.owners[index]
            return True

    def abandon(self, acq: Acquisition) -> dict[int, str]:
        """Settle a failed attempt; the members to release now."""
        with self._mutex:
            acq.settled = True
            return dict(acq.members)

    def succeeded(self, acq: Acquisition, validity: float | None = None) -> None:
        """The attempt took the composite: remember it for release and loss reporting."""
        with self._mutex:
            acq.validity = validity
            self._held.setdefault(acq.owners, []).append(acq)
            self._lost.discard(acq.owners)

    def held_count(self, acq: Acquisition) -> int:
        with self._mutex:
            return len(acq.members)

    def conclude(self, acq: Acquisition, needed: int, validity: float) -> dict[int, str] | None:
        """Decide a RedLock attempt atomically with late grants: None when it succeeded
        (recorded for release and loss reporting), else the members to release now."""
        with self._mutex:
            if validity > 0 and len(acq.members) >= needed:
                acq.validity = validity
                self._held.setdefault(acq.owners, []).append(acq)
                self._lost.discard(acq.owners)
                return None
            acq.settled = True
            return dict(acq.members)

    def release(self, owners: Caller) -> Acquisition | None:
        """Forget the caller's latest acquisition; None if it holds none."""
        with self._mutex:
            stack = self._held.get(owners)
            if not stack:
                return None
            acq = stack.pop()
            if not stack:
                del self._held[owners]
            acq.settled = True
            return acq

    def current(self, owners: Caller) -> Acquisition | None:
        with self._mutex:
            stack = self._held.get(owners)
            return stack[-1] if stack else None

    def is_lost(self, owners: Caller) -> bool:
        with self._mutex:
            return owners in self._lost

    # ---------------------------------------------------------------- loss
    def _member_lost(self, core: LockCore, owner: str) -> None:
        report = 0
        with self._mutex:
            for owners, stack in self._held.items():
                for acq in stack:
                    for index, member_owner in acq.members.items():
                        if self.cores[index] is core and member_owner == owner:
                            acq.lost_members.add(index)
                    left = len(acq.members) - len(acq.lost_members)
                    if not acq.lost and acq.lost_members and left < self.needed:
                        acq.lost = True
                        self._lost.add(owners)
                        report += 1
        for _ in range(report):
            if self.on_lost is not None:
                try:
                    self.on_lost(self.front)
                except Exception:
                    log.exception("on_lost callback of %s failed", self.name)


def release_outcome(
    kind: str, released: int, errors: Sequence[BaseException]
) -> BaseException | None:
    """The error a best-effort release raises, or None.

    MultiLock raises the first error with the others attached as notes; the caller decides.
    """
    if not errors:
        return None
    first = errors[0]
    for other in errors[1:]:
        first.add_note(f"{kind}: another member failed too: {type(other).__name__}: {other}")
    return first
