"""tenure: distributed locks on Redis and Valkey, sync and asyncio (Redisson-compatible)."""

from tenure.aio.client import AsyncClient
from tenure.aio.lock import AsyncLock
from tenure.errors import (
    BackendError,
    LockError,
    LockLostError,
    LockTimeout,
    LockUpgradeError,
    NotOwnedError,
    ReplicationError,
)
from tenure.sync.client import Client
from tenure.sync.lock import Lock

__all__ = [
    "AsyncClient",
    "AsyncLock",
    "BackendError",
    "Client",
    "Lock",
    "LockError",
    "LockLostError",
    "LockTimeout",
    "LockUpgradeError",
    "NotOwnedError",
    "ReplicationError",
]
