# Source of tenure.sync.composite: run python tools/unasync.py after editing.
"""MultiLock and RedLock: composites of lock objects from any clients and servers.

Each member is taken for the caller's owner on that member's client. Every decision (rounds,
leases, quorum, validity, late grants, retries, release verdicts, loss roll-up) is
`tenure.core.composite`'s; these fronts only run its flows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import ClassVar

from tenure._scope import AsyncLossScope
from tenure.aio.acquiring import AsyncLockContext
from tenure.aio.lock import AsyncLock
from tenure.aio.runner import CALLER, AsyncCompositeRunner
from tenure.core import composite as plan
from tenure.core.args import bind_callback
from tenure.core.composite import CompositeCore, MultiLockCore, RedLockCore
from tenure.core.holds import OnLost


def _members(kind: str, locks: Sequence[object]) -> list[AsyncLock]:
    for lock in locks:
        if not isinstance(lock, AsyncLock):
            raise TypeError(f"{kind} members must be lock objects, not {type(lock).__name__}")
    if not locks:
        raise ValueError(f"a {kind} needs at least one member lock")
    return list(locks)  # type: ignore[arg-type]


class _AsyncComposite(AsyncLockContext):
    kind: ClassVar[str]
    core: CompositeCore

    def __init__(self, locks: Sequence[object], workers: int) -> None:
        self._members = _members(self.kind, locks)
        self.runner = AsyncCompositeRunner([m.runner for m in self._members], workers)

    @property
    def members(self) -> tuple[AsyncLock, ...]:
        """The member locks, in order."""
        return tuple(self._members)

    @property
    def name(self) -> str:  # type: ignore[override]
        """``Kind(member, member, ...)``, for messages."""
        return self.core.name

    @property
    def lost(self) -> bool:
        """True if the caller's latest acquisition was reported lost."""
        return self.core.is_lost(self.runner.owners())

    def acquire(
        self,
        blocking: bool = True,
        timeout: float | None = None,
        lease_time: float | None = None,
        *,
        max_hold: float | None = None,
    ) -> Awaitable[bool]:
        runner, owners = self.runner, self.runner.owners()
        flow = self.core.acquire(owners, blocking, timeout, lease_time, max_hold)
        return runner.acquire(self, owners, flow)

    def extend(self, additional_time: float) -> Awaitable[None]:
        """Add ``additional_time`` seconds to every member hold of the caller's latest
        acquisition (each as [`tenure.Lock.extend()`][tenure.Lock.extend], so members taken with
        ``lease_time`` only). A MultiLock extends each member in order and raises the first
        failure (others as notes); a RedLock extends its held members concurrently and
        raises LockLostError when fewer than a quorum were extended (``validity`` keeps
        its value from the acquisition).

        Raises:
            TypeError, ValueError: a bad ``additional_time``, before any I/O.
            NotOwnedError: the caller holds no acquisition (LockLostError once it was
                reported lost).
            LockError, LockLostError, BackendError: as [`tenure.Lock.extend()`][tenure.Lock.extend].
        """
        runner = self.runner
        return runner.run(self.core.extend(runner.owners(), additional_time))

    def owned(self) -> Awaitable[bool]:
        return self.runner.run(self.core.owned(self.runner.owners()))

    def valid_for(self) -> float:
        """Seconds the caller's acquisition is surely still valid on the local monotonic
        clock: a MultiLock's shortest member validity, a RedLock's validity of the quorum
        (the majority-th longest member validity); 0.0 when it holds none or it was lost.
        No I/O (a plain method in the asyncio API too)."""
        return self.core.valid_for(self.runner.owners())

    def checkpoint(self) -> None:
        """Raise LockLostError when the caller's acquisition was lost or `valid_for()`
        is 0; NotOwnedError when it holds none. No I/O (a plain method in asyncio too)."""
        self.core.checkpoint(self.runner.owners())

    @property
    def in_doubt(self) -> bool:
        """True while the acquisition still holds but renewals failed on enough members
        that fewer than the needed number (all for a MultiLock, a majority for a RedLock)
        are held without doubt. ``on_doubt(composite)`` (factory keyword) is called each
        time a member's doubt makes it so."""
        return self.core.in_doubt(self.runner.owners())

    def _bind_doubt(self, on_doubt: OnLost | None) -> None:
        if on_doubt is not None and not callable(on_doubt):
            raise TypeError(f"on_doubt must be callable, not {type(on_doubt).__name__}")
        self.core.on_doubt = bind_callback(on_doubt, self)

    def _watch(self, scope: AsyncLossScope) -> bool:
        return self.core.watch(self.runner.owners(), scope)

    def _unwatch(self, scope: AsyncLossScope) -> None:
        self.core.unwatch(self.runner.owners(), scope)

    def close(self) -> None:
        """Stop the composite's worker threads (sync API) once their work is done."""
        self.runner.close()

    def __repr__(self) -> str:
        return f"<{self.name}>"


class AsyncMultiLock(_AsyncComposite):
    """All of several locks or none (Redisson ``RedissonMultiLock``).

    Made by ``client.multi_lock(*locks)``; members may come from any clients and servers.
    Members are taken one after another, in order. If one cannot be taken in time, the ones
    already taken are released and the whole round starts again while the wait allows; with
    no timeout, each round is bounded by a random 1.5-3 s per member before starting over, so
    two multi-locks sharing members in different orders cannot deadlock. A member with a
    lease gets at least 2 x the round's wait, so early members cannot expire while later ones
    are waited for; once all are held, each member's expiry is set back to ``lease_time``.

    ``lost`` / ``on_lost(multi_lock)``: any member's hold reported lost loses the composite.

    Example:
        ```python
        both = client.multi_lock(client.lock("account:1"), client.lock("account:2"))
        async with both(timeout=10):          # both accounts, or LockTimeout
            ...
        ```
    """

    kind = "MultiLock"

    def __init__(
        self,
        locks: Sequence[object],
        *,
        on_lost: OnLost | None = None,
        on_doubt: OnLost | None = None,
    ) -> None:
        super().__init__(locks, workers=len(locks))
        self.core = MultiLockCore([m.core for m in self._members], bind_callback(on_lost, self))
        self._bind_doubt(on_doubt)

    def acquire(
        self,
        blocking: bool = True,
        timeout: float | None = None,
        lease_time: float | None = None,
        *,
        max_hold: float | None = None,
    ) -> Awaitable[bool]:
        """Take every member, or none.

        Args:
            blocking, timeout, lease_time, max_hold: as
                [`tenure.Lock.acquire()`][tenure.Lock.acquire];
                ``timeout`` bounds the whole composite. ``timeout=0`` makes one attempt per
                member. ``max_hold`` caps every member hold.

        Returns:
            True with every member held; False when the wait ran out (nothing held then).

        Raises:
            TypeError, ValueError: a bad argument, before any I/O.
            BackendError: a member's server failed; members already taken are released.
        """
        return super().acquire(blocking, timeout, lease_time, max_hold=max_hold)

    def release(self) -> Awaitable[None]:
        """Release every member, even if some fail.

        Raises:
            NotOwnedError: the caller holds this multi-lock no hold (nothing sent).
            LockLostError, NotOwnedError, BackendError: the first member that failed, after
                every member was released; the other failures are attached as notes.
        """
        # (No call before the runner's: it finishes a release cut short after this line.)
        return self.runner.release_by(self, CALLER, self.core.release)

    def owned(self) -> Awaitable[bool]:
        """True if the caller holds every member."""
        return super().owned()


class AsyncRedLock(_AsyncComposite):
    """The Redlock algorithm over independent masters (Redisson ``RedissonRedLock``).

    Made by ``client.red_lock(*locks)`` from N locks on N independent servers (different
    clients). Each attempt tries every member at once, one try per member, and waits for
    answers until a quorum holds or ``node_timeout`` passed; it succeeds iff at least
    N // 2 + 1 members were taken and the validity ``lease - elapsed - (0.01 x lease + 2 ms)``
    (monotonic clock) is still > 0. Otherwise every member is released — including those
    whose answer had not come back, since a late grant may still land — and, while the wait
    allows, another attempt follows after a random 5-50 ms delay. Dead or hung nodes are not
    errors: they count as not acquired. Sources: the Redis "Distributed Locks with Redis"
    page; Redisson's RedLock.

    Without ``lease_time`` each member's watchdog renews it; ``lost`` / ``on_lost`` report the
    lock lost once fewer than a majority of members are still held.

    What RedLock does *not* guarantee (M. Kleppmann, "How to do distributed locking"): its
    safety rests on timing. A client paused (GC, SIGSTOP, swapping) past the validity, a clock
    jump on a node (its keys expire early), or a node that restarts without persistence (it
    forgets grants; the Redlock page asks for fsync'ed AOF or a restart delay of one max TTL)
    can each let two clients believe they hold the lock. When correctness matters, make the
    resource check a [`tenure.FencedLock`][tenure.FencedLock] token; RedLock is for efficiency-grade
    exclusion that survives a minority of node failures.

    Example:
        ```python
        red = client.red_lock(*(c.lock("job") for c in clients_on_five_masters))
        if await red.acquire(timeout=2, lease_time=10):
            try:
                ...                           # for at most red.validity seconds
            finally:
                await red.release()
        ```
    """

    kind = "RedLock"

    def __init__(
        self,
        locks: Sequence[object],
        *,
        node_timeout: float = plan.DEFAULT_NODE_TIMEOUT,
        on_lost: OnLost | None = None,
        on_doubt: OnLost | None = None,
    ) -> None:
        super().__init__(locks, workers=max(8, 4 * len(locks)))
        self.core: RedLockCore = RedLockCore(
            [m.core for m in self._members], node_timeout, bind_callback(on_lost, self)
        )
        self._bind_doubt(on_doubt)

    @property
    def node_timeout(self) -> float:
        """Seconds each member's answer is waited for in an attempt."""
        return self.core.node_timeout

    def acquire(
        self,
        blocking: bool = True,
        timeout: float | None = None,
        lease_time: float | None = None,
        *,
        max_hold: float | None = None,
    ) -> Awaitable[bool]:
        """Take a majority of the members within the wait.

        Args:
            blocking, timeout, lease_time, max_hold: as
                [`tenure.Lock.acquire()`][tenure.Lock.acquire];
                ``timeout`` bounds the whole acquisition, ``timeout=0`` makes one attempt.
                ``max_hold`` caps every member hold.

        Returns:
            True with a quorum held and positive [`validity`][tenure.AsyncRedLock.validity]; False
                if no attempt reached
                a quorum in time (nothing is left held then).

        Raises:
            TypeError, ValueError: a bad argument, before any I/O. Server failures are never
                raised here: a failing member simply counts as not acquired.
        """
        return super().acquire(blocking, timeout, lease_time, max_hold=max_hold)

    @property
    def validity(self) -> float | None:
        """Seconds of exclusion the caller's latest acquisition had left when it completed
        (lease - elapsed - drift); None when it holds none."""
        acq = self.core.current(self.runner.owners())
        return None if acq is None else acq.validity

    def release(self) -> Awaitable[None]:
        """Release every member, best effort, concurrently.

        Members whose server fails or does not answer within ``node_timeout`` are left to
        expire with their lease.

        Raises:
            NotOwnedError: the caller holds no acquisition, or no member was still held
                (LockLostError if any of them had been held and was lost).
        """
        # (No call before the runner's: it finishes a release cut short after this line.)
        return self.runner.release_by(self, CALLER, self.core.release)

    def owned(self) -> Awaitable[bool]:
        """True if the caller holds a majority of the members (dead nodes: not held)."""
        return super().owned()
