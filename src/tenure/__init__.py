"""tenure: distributed locks on Redis and Valkey, sync and asyncio (Redisson-compatible)."""

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
