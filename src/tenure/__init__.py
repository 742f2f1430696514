"""tenure: distributed locks on Redis and Valkey, sync and asyncio (Redisson-compatible)."""

from importlib.metadata import PackageNotFoundError, version

from tenure.aio.client import AsyncClient
from tenure.aio.composite import AsyncMultiLock, AsyncRedLock
from tenure.aio.election import AsyncElection
from tenure.aio.fair import AsyncFairLock
from tenure.aio.fenced import AsyncFencedLock
from tenure.aio.latch import AsyncCountDownLatch
from tenure.aio.lock import AsyncLock
from tenure.aio.rwlock import AsyncReadLock, AsyncReadWriteLock, AsyncWriteLock
from tenure.aio.semaphore import AsyncPermitExpirableSemaphore, AsyncSemaphore
from tenure.aio.spin import AsyncSpinLock
from tenure.core.election import Leader
from tenure.core.inspect import Holder, LockInfo, Permit, QueuedWaiter
from tenure.errors import (
    BackendError,
    ClientClosedError,
    LockError,
    LockKindError,
    LockLostError,
    LockTimeout,
    LockUpgradeError,
    NotOwnedError,
    ReplicationError,
    ServerError,
)
from tenure.fencing import fenced_read, fenced_write
from tenure.sync.client import Client
from tenure.sync.composite import MultiLock, RedLock
from tenure.sync.election import Election
from tenure.sync.fair import FairLock
from tenure.sync.fenced import FencedLock
from tenure.sync.latch import CountDownLatch
from tenure.sync.lock import Lock
from tenure.sync.rwlock import ReadLock, ReadWriteLock, WriteLock
from tenure.sync.semaphore import PermitExpirableSemaphore, Semaphore
from tenure.sync.spin import SpinLock

try:
    __version__: str = version("tenure")
    """The installed distribution's version (PEP 440 string)."""
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AsyncClient",
    "AsyncCountDownLatch",
    "AsyncElection",
    "AsyncFairLock",
    "AsyncFencedLock",
    "AsyncLock",
    "AsyncMultiLock",
    "AsyncPermitExpirableSemaphore",
    "AsyncReadLock",
    "AsyncReadWriteLock",
    "AsyncRedLock",
    "AsyncSemaphore",
    "AsyncSpinLock",
    "AsyncWriteLock",
    "BackendError",
    "Client",
    "ClientClosedError",
    "CountDownLatch",
    "Election",
    "FairLock",
    "FencedLock",
    "Holder",
    "Leader",
    "Lock",
    "LockError",
    "LockInfo",
    "LockKindError",
    "LockLostError",
    "LockTimeout",
    "LockUpgradeError",
    "MultiLock",
    "NotOwnedError",
    "Permit",
    "PermitExpirableSemaphore",
    "QueuedWaiter",
    "ReadLock",
    "ReadWriteLock",
    "RedLock",
    "ReplicationError",
    "Semaphore",
    "ServerError",
    "SpinLock",
    "WriteLock",
    "__version__",
    "fenced_read",
    "fenced_write",
]
