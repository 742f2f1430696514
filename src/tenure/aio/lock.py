"""The asyncio lock objects: the twins of :mod:`tenure.sync.lock`, owned per task."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from tenure.core.lock import LockCore
from tenure.errors import LockTimeout

if TYPE_CHECKING:
    from tenure.aio.client import AsyncClient


class AsyncLock:
    """A reentrant distributed lock owned per (client, asyncio task).

    The asyncio twin of :class:`tenure.Lock`: same members, as coroutines; see there for
    arguments, return values and errors. Cancelling a waiting ``acquire`` leaves nothing held
    and nothing subscribed.
    """

    def __init__(self, client: AsyncClient, core: LockCore) -> None:
        self._client = client
        self._core = core
        core.front = self

    @property
    def name(self) -> str:
        """The lock's name as given (without the client's ``name_prefix``)."""
        return self._core.name

    async def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        """Take one hold; see :meth:`tenure.Lock.acquire`."""
        client = self._client
        flow = self._core.acquire(client._owner(), blocking, timeout, lease_time)
        acquired = await client._run(flow)
        if acquired and lease_time is None:
            client._watch()
        return acquired

    async def release(self) -> None:
        """Give back one hold; see :meth:`tenure.Lock.release`."""
        client = self._client
        await client._run(self._core.release(client._owner()))

    async def locked(self) -> bool:
        """True if any owner holds the lock."""
        return await self._client._run(self._core.locked())

    async def owned(self) -> bool:
        """True if the calling task holds the lock."""
        client = self._client
        return await client._run(self._core.owned(client._owner()))

    async def hold_count(self) -> int:
        """The calling task's reentrancy count (0 when it holds nothing)."""
        client = self._client
        return await client._run(self._core.hold_count(client._owner()))

    async def remaining_lease(self) -> float | None:
        """Seconds until the lock expires; None if not held; ``math.inf`` without expiry."""
        return await self._client._run(self._core.remaining_lease())

    async def force_release(self) -> bool:
        """Delete the lock whoever holds it and wake its waiters; True if it was held."""
        return await self._client._run(self._core.force_release())

    @property
    def lost(self) -> bool:
        """True if the calling task's latest hold was lost (expired or taken away)."""
        return self._core.is_lost(self._client._owner())

    def __call__(
        self, timeout: float | None = None, lease_time: float | None = None
    ) -> _AsyncAcquisition:
        """``async with lock(timeout=5, lease_time=10):`` — acquire with these arguments."""
        return _AsyncAcquisition(self, timeout, lease_time)

    async def __aenter__(self) -> AsyncLock:
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
        return f"<{type(self).__name__} {self.name!r}>"


class _AsyncAcquisition:
    """The context manager of ``async with lock(timeout=..., lease_time=...)``."""

    def __init__(self, lock: AsyncLock, timeout: float | None, lease_time: float | None) -> None:
        self._lock = lock
        self._timeout = timeout
        self._lease_time = lease_time

    async def __aenter__(self) -> AsyncLock:
        if not await self._lock.acquire(timeout=self._timeout, lease_time=self._lease_time):
            raise LockTimeout(f"lock {self._lock.name!r} not acquired within {self._timeout} s")
        return self._lock

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._lock.release()
