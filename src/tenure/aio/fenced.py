"""The asyncio FencedLock front."""

from __future__ import annotations

from tenure.aio.lock import AsyncLock
from tenure.core.fenced import FencedLockCore


class AsyncFencedLock(AsyncLock):
    """asyncio twin of :class:`tenure.FencedLock`, owned per (client, task)."""

    _core: FencedLockCore

    @property
    def token(self) -> int | None:
        """The token of the calling task's latest acquisition; None if it never acquired."""
        return self._core.token(self._client._owner())

    async def acquire_token(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> int | None:
        """:meth:`acquire`, returning the new fencing token, or None when the wait ran out."""
        if not await self.acquire(blocking, timeout, lease_time):
            return None
        return self.token
