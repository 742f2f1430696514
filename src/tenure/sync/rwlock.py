# GENERATED from src/tenure/aio/rwlock.py by tools/unasync.py: edit that file, not this one.
"""The read-write lock (Redisson ``RReadWriteLock``) and its two lock sides."""

from __future__ import annotations

from tenure.sync.lock import Lock
from tenure.sync.runner import Runner
from tenure.core.holds import OnLost
from tenure.core.rwlock import ReadLockCore, WriteLockCore


class ReadLock(Lock):
    """The read side of a read-write lock: shared by any number of owners (of any client)
    while no other owner holds the write side. Reentrant.

    Members as [`tenure.Lock`][tenure.Lock], except: ``locked()`` is True while any owner holds a
    read hold (the lock is in read mode, or in write mode with the writer's own read holds,
    as Redisson); ``force_release()`` deletes the lock (every read hold) only when it is in read
    mode and wakes every waiter, returning False otherwise; ``remaining_lease()`` is the
    lock's, which lives as long as its longest read hold. Each read hold expires on its own
    lease, so a dead reader's hold ends without waiting for the others; the watchdog renews
    the caller's own holds only. The owner of the write side may take read holds too; with
    its write hold gone on the server, such a read raises
    [`tenure.LockLostError`][tenure.errors.LockLostError] and reports that hold's loss.
    """

    core_class = ReadLockCore


class WriteLock(Lock):
    """The write side of a read-write lock: one owner at a time, with no readers other than
    that owner. Reentrant; a re-entry adds its lease to the remaining time.

    Members as [`tenure.Lock`][tenure.Lock], plus:

    - ``acquire`` raises [`tenure.LockUpgradeError`][tenure.errors.LockUpgradeError] at once,
    blocking or not, when
      the caller holds read holds but not the write hold: it would wait on its own reads.
      Release the reads first. With those read holds gone on the server (lost), it raises
      [`tenure.LockLostError`][tenure.errors.LockLostError] instead and reports their loss.
    - Releasing the last write hold while the caller still holds read holds leaves the lock
      in read mode (downgrade); waiting readers are woken.
    - ``locked()`` is True while the lock is in write mode; ``force_release()`` deletes the
      lock only when it is in write mode and wakes every waiter, returning False otherwise.
    """

    core_class = WriteLockCore


class ReadWriteLock:
    """Many readers or one writer (Redisson ``RReadWriteLock``).

    Made by ``client.read_write_lock(name)``. ``read_lock()`` and ``write_lock()`` return
    the two sides, lock objects with every member of [`tenure.Lock`][tenure.Lock]. Wire layout
    ("Wire layout" in the docs): one hash with a ``mode`` field, a timeout key per read
    hold, channel ``redisson_rwlock:{<name>}``. Waiters sleep on the channel: a read
    release wakes one, a write release all. An unlock that frees the lock while only
    tenure writers wait wakes one of their clients (the Lock's wake queue); while a reader
    or a Redisson client waits, every client. ``on_lost(side)`` is called with the side
    whose hold was lost.

    Example:
        ```python
        catalog = client.read_write_lock("catalog")
        with catalog.read_lock():       # many readers at once
            ...
        with catalog.write_lock():      # one writer, no readers
            ...
        ```
    """

    def __init__(
        self,
        runner: Runner,
        name: str,
        on_lost: OnLost | None = None,
        on_doubt: OnLost | None = None,
    ) -> None:
        self._read = ReadLock(runner, name, on_lost, on_doubt)
        self._write = WriteLock(runner, name, on_lost, on_doubt)

    @property
    def name(self) -> str:
        """The lock's name as given (without the client's ``name_prefix``)."""
        return self._read.name

    def read_lock(self) -> ReadLock:
        """The read side (the same object on every call)."""
        return self._read

    def write_lock(self) -> WriteLock:
        """The write side (the same object on every call)."""
        return self._write

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
