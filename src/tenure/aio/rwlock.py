"""The asyncio read-write lock: the twin of :mod:`tenure.sync.rwlock`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.aio.lock import AsyncLock
from tenure.core.holds import OnLost
from tenure.core.rwlock import ReadLockCore, WriteLockCore

if TYPE_CHECKING:
    from tenure.aio.client import AsyncClient


class AsyncReadLock(AsyncLock):
    """The read side of an :class:`AsyncReadWriteLock`; see :class:`tenure.sync.rwlock.ReadLock`."""


class AsyncWriteLock(AsyncLock):
    """The write side of an :class:`AsyncReadWriteLock`; see
    :class:`tenure.sync.rwlock.WriteLock` (``acquire`` raises :class:`tenure.LockUpgradeError`
    when the calling task holds read holds only)."""


class AsyncReadWriteLock:
    """Many readers or one writer, owned per (client, asyncio task): the twin of
    :class:`tenure.ReadWriteLock`. Made by :meth:`tenure.AsyncClient.read_write_lock`.
    """

    def __init__(self, client: AsyncClient, name: str, on_lost: OnLost | None = None) -> None:
        ctx = client._ctx
        self._read = AsyncReadLock(client, ReadLockCore(ctx, name, on_lost))
        self._write = AsyncWriteLock(client, WriteLockCore(ctx, name, on_lost))

    @property
    def name(self) -> str:
        """The lock's name as given (without the client's ``name_prefix``)."""
        return self._read.name

    def read_lock(self) -> AsyncReadLock:
        """The read side (the same object on every call)."""
        return self._read

    def write_lock(self) -> AsyncWriteLock:
        """The write side (the same object on every call)."""
        return self._write

    def __repr__(self) -> str:
        return f"<AsyncReadWriteLock {self.name!r}>"
