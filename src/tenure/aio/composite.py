"""asyncio twins of :mod:`tenure.sync.composite`: AsyncMultiLock and AsyncRedLock.

Same algorithms and decisions (:mod:`tenure.core.composite`); RedLock members are tried as
concurrent tasks instead of threads. See :class:`tenure.MultiLock` and :class:`tenure.RedLock`
for arguments, return values, errors, sources and what RedLock does not guarantee.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from tenure.aio.lock import AsyncLock
from tenure.core import composite as plan
from tenure.core.args import check_lease, check_positive, check_wait, to_ms
from tenure.core.composite import Acquisition, Caller, CompositeCore
from tenure.core.effects import Command, Deadline, Flow
from tenure.core.holds import OnLost
from tenure.errors import BackendError, LockLostError, LockTimeout, NotOwnedError

log = logging.getLogger("tenure")


def _members(kind: str, locks: Sequence[object]) -> list[AsyncLock]:
    for lock in locks:
        if not isinstance(lock, AsyncLock):
            raise TypeError(
                f"{kind} members must be tenure.AsyncLock objects, not {type(lock).__name__}"
            )
    if not locks:
        raise ValueError(f"a {kind} needs at least one member lock")
    return list(locks)  # type: ignore[arg-type]


def _pexpire(key: str, lease: float) -> Flow[Any]:
    return (yield Command(("PEXPIRE", key, to_ms(lease))))


class _AsyncComposite:
    _kind = "composite"

    def __init__(self, locks: Sequence[object], needed: int | None, on_lost: OnLost | None):
        self._members = _members(self._kind, locks)
        n = len(self._members)
        self._core = CompositeCore(
            self._kind, [m._core for m in self._members], n if needed is None else needed, on_lost
        )
        self._core.front = self
        self._background: set[asyncio.Task[Any]] = set()

    @property
    def members(self) -> tuple[AsyncLock, ...]:
        return tuple(self._members)

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def lost(self) -> bool:
        """True if the calling task's latest acquisition was reported lost."""
        return self._core.is_lost(self._owners())

    def _owners(self) -> Caller:
        return tuple(m._client._owner() for m in self._members)

    async def _acquire_member(
        self, index: int, owner: str, wait: float, lease: float | None
    ) -> bool:
        member = self._members[index]
        client = member._client
        acquired = await client._run(member._core._acquire(owner, wait, lease))
        if acquired and lease is None:
            client._watch()
        return acquired

    async def _release_member(self, index: int, owner: str) -> None:
        member = self._members[index]
        await member._client._run(member._core.release(owner))

    async def _release_quietly(self, index: int, owner: str) -> None:
        try:
            await self._release_member(index, owner)
        except Exception as error:  # best effort: the hold expires with its lease
            log.debug("%s: releasing member %d failed: %s", self.name, index, error)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        raise NotImplementedError

    async def release(self) -> None:
        raise NotImplementedError

    def __call__(self, timeout: float | None = None, lease_time: float | None = None) -> Any:
        return _AsyncAcquisition(self, timeout, lease_time)

    async def __aenter__(self) -> Any:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<Async{self.name}>"


class AsyncMultiLock(_AsyncComposite):
    """asyncio twin of :class:`tenure.MultiLock` (all members or none)."""

    _kind = "MultiLock"

    def __init__(self, locks: Sequence[object], *, on_lost: OnLost | None = None) -> None:
        super().__init__(locks, None, on_lost)

    async def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        """Take every member, or none; see :meth:`tenure.MultiLock.acquire`."""
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
                    if not await self._acquire_member(index, owner, member_wait, member_lease):
                        ok = False
                        break
                    self._core.granted(acq, index)
            except BaseException:
                held = self._core.abandon(acq)
                # shielded from cancellation: the release must happen
                await asyncio.shield(self._spawn(self._release_all(held, quiet=True)))
                raise
            if ok:
                if lease is not None and member_lease != lease:
                    for member in self._members:
                        await member._client._run(_pexpire(member._core.key, lease))
                self._core.succeeded(acq)
                return True
            await self._release_all(self._core.abandon(acq), quiet=True)
            if deadline.remaining() <= 0:
                return False

    async def _release_all(self, held: dict[int, str], quiet: bool) -> list[BaseException]:
        errors: list[BaseException] = []
        for index, owner in sorted(held.items()):
            try:
                await self._release_member(index, owner)
            except Exception as error:
                errors.append(error)
                if quiet:
                    log.warning("%s: releasing member %d failed: %s", self.name, index, error)
        return errors

    async def release(self) -> None:
        """Release every member, even if some fail; see :meth:`tenure.MultiLock.release`."""
        owners = self._owners()
        if self._core.release(owners) is None:
            raise NotOwnedError(f"{self.name} is not held by the caller")
        errors = await self._release_all(dict(enumerate(owners)), quiet=False)
        error = plan.release_outcome(self._kind, len(owners) - len(errors), errors)
        if error is not None:
            raise error

    async def owned(self) -> bool:
        """True if the calling task holds every member."""
        return all([await member.owned() for member in self._members])


class AsyncRedLock(_AsyncComposite):
    """asyncio twin of :class:`tenure.RedLock`; members are tried as concurrent tasks.

    Same guarantees and non-guarantees (process pauses, clock jumps, restarts without
    persistence: use :class:`tenure.AsyncFencedLock` tokens where correctness matters).
    """

    _kind = "RedLock"

    def __init__(
        self,
        locks: Sequence[object],
        *,
        node_timeout: float = plan.DEFAULT_NODE_TIMEOUT,
        on_lost: OnLost | None = None,
    ) -> None:
        super().__init__(locks, plan.quorum(len(locks)), on_lost)
        self.node_timeout = check_positive(node_timeout, "node_timeout")

    async def _try(self, acq: Acquisition, index: int, lease: float | None) -> bool:
        owner = acq.owners[index]
        try:
            if not await self._acquire_member(index, owner, 0.0, lease):
                return False
        except BackendError:
            await self._release_quietly(index, owner)
            return False
        if not self._core.granted(acq, index):
            await self._release_quietly(index, owner)
        return True

    async def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        """Take a majority of the members; see :meth:`tenure.RedLock.acquire`."""
        wait = check_wait(blocking, timeout)
        lease = check_lease(lease_time)
        owners = self._owners()
        deadline = Deadline(wait)
        if lease is not None:
            validity_lease = lease
        else:
            validity_lease = min(m._client._ctx.watchdog_timeout for m in self._members)
        needed = plan.quorum(len(owners))
        while True:
            acq = self._core.start(owners)
            start = time.monotonic()
            # Member attempts run on as background tasks: a late grant is settled by _try.
            tasks = [self._spawn(self._try(acq, i, lease)) for i in range(len(owners))]
            acq.attempts = list(tasks)
            try:
                # Return as soon as a quorum holds; late answers are settled by _try.
                pending = set(tasks)
                while pending and self._core.held_count(acq) < needed:
                    left = self.node_timeout - (time.monotonic() - start)
                    if left <= 0:
                        break
                    _, pending = await asyncio.wait(
                        pending, timeout=left, return_when=asyncio.FIRST_COMPLETED
                    )
            except BaseException:  # cancelled: give up this attempt, late grants release
                held = self._core.abandon(acq)
                for i, o in held.items():
                    self._spawn(self._release_quietly(i, o))
                raise
            elapsed = time.monotonic() - start
            held_now = self._core.conclude(acq, needed, plan.validity(validity_lease, elapsed))
            if held_now is None:
                if lease is None:
                    for member in self._members:
                        member._client._watch()
                return True
            releases = [self._spawn(self._release_quietly(i, o)) for i, o in held_now.items()]
            if releases:
                await asyncio.wait(releases, timeout=self.node_timeout)
            remaining = deadline.remaining()
            if remaining <= 0:
                return False
            await asyncio.sleep(plan.retry_delay(remaining))

    @property
    def validity(self) -> float | None:
        """See :attr:`tenure.RedLock.validity` (per task)."""
        acq = self._core.current(self._owners())
        return None if acq is None else acq.validity

    async def release(self) -> None:
        """Best-effort release on every member; see :meth:`tenure.RedLock.release`."""
        owners = self._owners()
        acq = self._core.release(owners)
        if acq is None:
            raise NotOwnedError(f"{self.name} is not held by the caller")
        tasks = [self._spawn(self._release_member(i, o)) for i, o in acq.members.items()]
        if not tasks:
            raise NotOwnedError(f"{self.name}: no member was held")
        attempts: list[asyncio.Task[bool]] = acq.attempts  # type: ignore[assignment]
        done, pending = await asyncio.wait([*tasks, *attempts], timeout=self.node_timeout)
        done = {t for t in done if t in tasks}
        pending = {t for t in pending if t in tasks}
        released = 0
        not_owned: list[NotOwnedError] = []
        for task in done:
            error = task.exception()
            if error is None:
                released += 1
            elif isinstance(error, NotOwnedError):
                not_owned.append(error)
            elif not isinstance(error, BackendError):
                raise error
        if released == 0 and not pending and len(not_owned) == len(tasks):
            lost = [e for e in not_owned if isinstance(e, LockLostError)]
            if lost:
                raise LockLostError(f"{self.name}: every member hold was lost") from lost[0]
            raise NotOwnedError(f"{self.name}: no member was held")

    async def owned(self) -> bool:
        """True if the calling task holds a majority of the members."""
        tasks = [
            self._spawn(m._client._run(m._core.owned(o)))
            for m, o in zip(self._members, self._owners(), strict=True)
        ]
        done, _ = await asyncio.wait(tasks, timeout=self.node_timeout)
        held = sum(1 for t in done if t.exception() is None and t.result())
        return held >= plan.quorum(len(self._members))


class _AsyncAcquisition:
    def __init__(self, lock: _AsyncComposite, timeout: float | None, lease_time: float | None):
        self._lock = lock
        self._timeout = timeout
        self._lease_time = lease_time

    async def __aenter__(self) -> _AsyncComposite:
        if not await self._lock.acquire(timeout=self._timeout, lease_time=self._lease_time):
            raise LockTimeout(f"{self._lock.name} not acquired within {self._timeout} s")
        return self._lock

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._lock.release()
