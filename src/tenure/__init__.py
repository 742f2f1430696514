"""tenure: distributed locks on Redis and Valkey, sync and asyncio (Redisson-compatible)."""

from tenure.aio.client import AsyncClient
from tenure.aio.composite import AsyncMultiLock, AsyncRedLock
from tenure.aio.fair import AsyncFairLock
from tenure.aio.fenced import AsyncFencedLock
from tenure.aio.lock import AsyncLock
from tenure.aio.rwlock import AsyncReadWriteLock
from tenure.core.inspect import Holder, LockInfo, Permit, QueuedWaiter
from tenure.errors import (
    BackendError,
    LockError,
    LockLostError,
    LockTimeout,
    LockUpgradeError,
    NotOwnedError,
    ReplicationError,
)
from tenure.fencing import fenced_read, fenced_write
from tenure.sync.client import Client
from tenure.sync.composite import MultiLock, RedLock
from tenure.sync.fair import FairLock
from tenure.sync.fenced import FencedLock
from tenure.sync.lock import Lock
from tenure.sync.rwlock import ReadWriteLock

__all__ = [
    "AsyncClient",
    "AsyncFairLock",
    "AsyncFencedLock",
    "AsyncLock",
    "AsyncMultiLock",
    "AsyncReadWriteLock",
    "AsyncRedLock",
    "BackendError",
    "Client",
    "FairLock",
    "FencedLock",
    "Holder",
    "Lock",
    "LockError",
    "LockInfo",
    "LockLostError",
    "LockTimeout",
    "LockUpgradeError",
    "MultiLock",
    "NotOwnedError",
    "Permit",
    "QueuedWaiter",
    "ReadWriteLock",
    "RedLock",
    "ReplicationError",
    "fenced_read",
    "fenced_write",
]
