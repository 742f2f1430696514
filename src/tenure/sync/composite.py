"""The sync MultiLock and RedLock: composites of :class:`tenure.Lock` objects.

Members may come from different clients (and servers). Each member is taken for the calling
thread's owner on that member's client; the decisions (waits, leases, quorum, validity, loss
roll-up) live in :mod:`tenure.core.composite`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from tenure.core import composite as plan
from tenure.core.args import check_lease, check_positive, check_wait, to_ms
from tenure.core.composite import Acquisition, Caller, CompositeCore
from tenure.core.effects import Command, Deadline
from tenure.core.holds import OnLost
from tenure.errors import BackendError, LockLostError, LockTimeout, NotOwnedError
from tenure.sync.lock import Lock

log = logging.getLogger("tenure")


def _members(kind: str, locks: Sequence[object]) -> list[Lock]:
    for lock in locks:
        if not isinstance(lock, Lock):
            raise TypeError(
                f"{kind} members must be tenure.Lock objects, not {type(lock).__name__}"
            )
    if not locks:
        raise ValueError(f"a {kind} needs at least one member lock")
    return list(locks)  # type: ignore[arg-type]


class _Composite:
    _kind = "composite"

    def __init__(self, locks: Sequence[object], needed: int | None, on_lost: OnLost | None):
        self._members = _members(self._kind, locks)
        n = len(self._members)
        self._core = CompositeCore(
            self._kind, [m._core for m in self._members], n if needed is None else needed, on_lost
        )
        self._core.front = self

    @property
    def members(self) -> tuple[Lock, ...]:
        """The member locks, in order."""
        return tuple(self._members)

    @property
    def name(self) -> str:
        """``Kind(member, member, ...)``, for messages."""
        return self._core.name

    def _owners(self) -> Caller:
        return tuple(m._client._owner() for m in self._members)

    def _acquire_member(self, index: int, owner: str, wait: float, lease: float | None) -> bool:
        member = self._members[index]
        client = member._client
        acquired = client._run(member._core._acquire(owner, wait, lease))
        if acquired and lease is None:
            client._watch()
        return acquired

    def _release_member(self, index: int, owner: str) -> None:
        member = self._members[index]
        member._client._run(member._core.release(owner))

    @property
    def lost(self) -> bool:
        """True if the calling thread's latest acquisition was reported lost."""
        return self._core.is_lost(self._owners())

    def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __call__(self, timeout: float | None = None, lease_time: float | None = None) -> Any:
        """``with composite(timeout=5, lease_time=10):`` — acquire with these arguments."""
        return _Acquisition(self, timeout, lease_time)

    def __enter__(self) -> Any:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<{self.name}>"


class MultiLock(_Composite):
    """All of several locks or none (Redisson ``RedissonMultiLock``).

    Made by :meth:`tenure.Client.multi_lock`; members may come from any clients and servers.
    Members are taken one after another, in order. If one cannot be taken in time, the ones
    already taken are released and the whole round starts again while the wait allows; with no
    timeout, each round is bounded by a random 1.5-3 s per member before starting over, so two
    multi-locks sharing members in different orders cannot deadlock. A member with a lease gets
    at least 2 x the round's wait, so early members cannot expire while later ones are waited
    for; once all are held, each member's expiry is set back to ``lease_time``.

    ``lost`` / ``on_lost(multi_lock)``: any member's hold reported lost loses the composite.
    """

    _kind = "MultiLock"

    def __init__(self, locks: Sequence[object], *, on_lost: OnLost | None = None) -> None:
        super().__init__(locks, None, on_lost)

    def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        """Take every member, or none.

        Args:
            blocking, timeout, lease_time: as :meth:`tenure.Lock.acquire`; ``timeout`` bounds
                the whole composite. ``timeout=0`` makes one attempt per member.

        Returns:
            True with every member held; False when the wait ran out (nothing held then).

        Raises:
            TypeError, ValueError: a bad argument, before any I/O.
            BackendError: a member's server failed; members already taken are released.
        """
        wait = check_wait(blocking, timeout)
        lease = check_lease(lease_time)
        owners = self._owners()
        deadline = Deadline(wait)
        while True:
            round_wait = min(plan.multi_round(wait, len(owners)), deadline.remaining())
            round_deadline = Deadline(round_wait)
            member_lease = plan.multi_member_lease(lease, max(0.0, round_deadline.remaining()))
            acq = self._core.start(owners)
            ok = True
            try:
                for index, owner in enumerate(owners):
                    member_wait = max(0.0, round_deadline.remaining())
                    if not self._acquire_member(index, owner, member_wait, member_lease):
                        ok = False
                        break
                    self._core.granted(acq, index)
            except BaseException:
                self._release_all(self._core.abandon(acq), quiet=True)
                raise
            if ok:
                if lease is not None and member_lease != lease:
                    self._set_lease(owners, lease)
                self._core.succeeded(acq)
                return True
            self._release_all(self._core.abandon(acq), quiet=True)
            if deadline.remaining() <= 0:
                return False

    def _set_lease(self, owners: Caller, lease: float) -> None:
        for member in self._members:
            member._client._run(_pexpire(member._core.key, lease))

    def _release_all(self, held: dict[int, str], quiet: bool) -> list[BaseException]:
        errors: list[BaseException] = []
        for index, owner in sorted(held.items()):
            try:
                self._release_member(index, owner)
            except Exception as error:
                errors.append(error)
                if quiet:
                    log.warning("%s: releasing member %d failed: %s", self.name, index, error)
        return errors

    def release(self) -> None:
        """Release every member, even if some fail.

        Raises:
            NotOwnedError: the calling thread holds this multi-lock no hold (nothing sent).
            LockLostError, NotOwnedError, BackendError: the first member that failed, after
                every member was released; the other failures are attached as notes.
        """
        owners = self._owners()
        acq = self._core.release(owners)
        if acq is None:
            raise NotOwnedError(f"{self.name} is not held by the caller")
        errors = self._release_all(dict(enumerate(owners)), quiet=False)
        error = plan.release_outcome(self._kind, len(owners) - len(errors), errors)
        if error is not None:
            raise error

    def owned(self) -> bool:
        """True if the calling thread holds every member."""
        return all(member.owned() for member in self._members)


def _pexpire(key: str, lease: float) -> Any:
    return (yield Command(("PEXPIRE", key, to_ms(lease))))


class RedLock(_Composite):
    """The Redlock algorithm over independent masters (Redisson ``RedissonRedLock``).

    Made by :meth:`tenure.Client.red_lock` from N locks on N independent servers (different
    clients). Each attempt tries every member at once (a thread each), one try per member,
    answers awaited until a quorum holds or ``node_timeout`` passed; it succeeds iff at least
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
    resource check a :class:`tenure.FencedLock` token; RedLock is for efficiency-grade
    exclusion that survives a minority of node failures.
    """

    _kind = "RedLock"

    def __init__(
        self,
        locks: Sequence[object],
        *,
        node_timeout: float = plan.DEFAULT_NODE_TIMEOUT,
        on_lost: OnLost | None = None,
    ) -> None:
        n = len(locks)
        super().__init__(locks, plan.quorum(n), on_lost)
        self.node_timeout = check_positive(node_timeout, "node_timeout")
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(8, 4 * n), thread_name_prefix="tenure-redlock"
        )

    def _lease_for_validity(self, lease: float | None) -> float:
        if lease is not None:
            return lease
        return min(m._client._ctx.watchdog_timeout for m in self._members)

    def _try(self, acq: Acquisition, index: int, lease: float | None) -> bool:
        owner = acq.owners[index]
        try:
            if not self._acquire_member(index, owner, 0.0, lease):
                return False
        except BackendError:
            # The script may have run although its reply was lost: release it too.
            self._release_quietly(index, owner)
            return False
        if not self._core.granted(acq, index):  # the attempt gave up on us meanwhile
            self._release_quietly(index, owner)
        return True

    def _release_quietly(self, index: int, owner: str) -> None:
        try:
            self._release_member(index, owner)
        except Exception as error:  # best effort: the hold expires with its lease
            log.debug("%s: releasing member %d failed: %s", self.name, index, error)

    def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        """Take a majority of the members within the wait.

        Args:
            blocking, timeout, lease_time: as :meth:`tenure.Lock.acquire`; ``timeout`` bounds
                the whole acquisition, ``timeout=0`` makes one attempt.

        Returns:
            True with a quorum held and positive :attr:`validity`; False if no attempt reached
            a quorum in time (nothing is left held then).

        Raises:
            TypeError, ValueError: a bad argument, before any I/O. Server failures are never
            raised here: a failing member simply counts as not acquired.
        """
        wait = check_wait(blocking, timeout)
        lease = check_lease(lease_time)
        owners = self._owners()
        deadline = Deadline(wait)
        validity_lease = self._lease_for_validity(lease)
        needed = plan.quorum(len(owners))
        while True:
            acq = self._core.start(owners)
            start = time.monotonic()
            futures = [self._pool.submit(self._try, acq, i, lease) for i in range(len(owners))]
            acq.attempts = list(futures)
            # Return as soon as a quorum holds; members still answering are settled by _try
            # (recorded for release when granted after success, released if we gave up).
            pending = set(futures)
            while pending and self._core.held_count(acq) < needed:
                left = self.node_timeout - (time.monotonic() - start)
                if left <= 0:
                    break
                _, pending = concurrent.futures.wait(
                    pending, timeout=left, return_when=concurrent.futures.FIRST_COMPLETED
                )
            elapsed = time.monotonic() - start
            validity = plan.validity(validity_lease, elapsed)
            held = self._core.conclude(acq, needed, validity)
            if held is None:
                if lease is None:
                    for member in self._members:
                        member._client._watch()
                return True
            # Wait (briefly) for the releases so a refused caller leaves nothing behind.
            concurrent.futures.wait(self._release_many(held), timeout=self.node_timeout)
            remaining = deadline.remaining()
            if remaining <= 0:
                return False
            time.sleep(plan.retry_delay(remaining))

    def _release_many(self, held: dict[int, str]) -> list[concurrent.futures.Future[None]]:
        return [self._pool.submit(self._release_member, i, o) for i, o in held.items()]

    @property
    def validity(self) -> float | None:
        """Seconds of exclusion the calling thread's latest acquisition had left when it
        completed (lease - elapsed - drift); None when it holds none."""
        acq = self._core.current(self._owners())
        return None if acq is None else acq.validity

    def release(self) -> None:
        """Release every member, best effort, concurrently.

        Members whose server fails or does not answer within ``node_timeout`` are left to
        expire with their lease.

        Raises:
            NotOwnedError: the calling thread holds no acquisition, or no member was still
                held (LockLostError if any of them had been held and was lost).
        """
        owners = self._owners()
        acq = self._core.release(owners)
        if acq is None:
            raise NotOwnedError(f"{self.name} is not held by the caller")
        # Attempts still answering settle themselves (a late grant is released at once).
        attempts: list[concurrent.futures.Future[Any]] = acq.attempts  # type: ignore[assignment]
        futures: list[concurrent.futures.Future[Any]] = self._release_many(dict(acq.members))
        done, pending = concurrent.futures.wait([*futures, *attempts], timeout=self.node_timeout)
        done = {f for f in done if f in futures}
        pending = {f for f in pending if f in futures}
        released = 0
        not_owned: list[NotOwnedError] = []
        for future in done:
            error = future.exception()
            if error is None:
                released += 1
            elif isinstance(error, NotOwnedError):
                not_owned.append(error)
            elif not isinstance(error, BackendError):
                raise error
        if released == 0 and not pending and len(not_owned) == len(futures):
            lost = [e for e in not_owned if isinstance(e, LockLostError)]
            if lost:
                raise LockLostError(f"{self.name}: every member hold was lost") from lost[0]
            raise NotOwnedError(f"{self.name}: no member was held")

    def owned(self) -> bool:
        """True if the calling thread holds a majority of the members (dead nodes: not held)."""
        futures = [
            self._pool.submit(m._client._run, m._core.owned(owner))
            for m, owner in zip(self._members, self._owners(), strict=True)
        ]
        done, _ = concurrent.futures.wait(futures, timeout=self.node_timeout)
        held = sum(1 for f in done if f.exception() is None and f.result())
        return held >= plan.quorum(len(self._members))

    def close(self) -> None:
        """Stop the worker threads (after their current commands)."""
        self._pool.shutdown(wait=False)


class _Acquisition:
    def __init__(self, lock: _Composite, timeout: float | None, lease_time: float | None):
        self._lock = lock
        self._timeout = timeout
        self._lease_time = lease_time

    def __enter__(self) -> _Composite:
        if not self._lock.acquire(timeout=self._timeout, lease_time=self._lease_time):
            raise LockTimeout(f"{self._lock.name} not acquired within {self._timeout} s")
        return self._lock

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()
