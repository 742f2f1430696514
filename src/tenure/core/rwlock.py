"""The read-write lock algorithm (Redisson's RReadWriteLock), sans I/O: two lock sides on
one hash.

Wire layout (DESIGN §3): HASH ``<name>`` with field ``mode`` (``read``/``write``), one field
per reader owner (its read hold count) and the writer's field ``<owner>:write``; a STRING
``{<name>}:<owner>:rwlock_timeout:<n>`` per read hold with its own expiry; channel
``redisson_rwlock:{<name>}``. Reads share, writes exclude. The writer may also take reads;
releasing its last write hold while it holds reads leaves the lock in read mode (downgrade).
A read release publishes ``0`` (wake one waiter), a write release ``1`` (wake all).

Differences from Redisson: a caller holding only read holds that asks for the write lock
gets :class:`~tenure.errors.LockUpgradeError` at once (Redisson waits on itself forever);
the watchdog renews only the caller's own read holds (Redisson renews every reader's); lock
expiries are only ever extended by renewals and read acquisitions, never shortened; a
downgrade wakes waiting readers.
"""

from __future__ import annotations

from typing import ClassVar

from tenure import keys, scripts
from tenure.core.context import Context
from tenure.core.effects import Call, Command, Flow
from tenure.core.lock import LockCore, LossCallback
from tenure.errors import LockUpgradeError


class _SideCore(LockCore):
    """What both sides share: the hash, the channel, the per-side ``locked`` test."""

    mode: ClassVar[str]
    force_release_script = scripts.get("rw_force_release")
    wake_all: ClassVar[frozenset[str]] = frozenset({keys.WRITE_UNLOCK_MESSAGE})

    def __init__(self, ctx: Context, name: str, on_lost: LossCallback | None = None) -> None:
        super().__init__(ctx, name, on_lost)
        self.channel = keys.rw_channel(self.key)
        self.timeout_base = keys.rw_timeout_base(self.key)

    def timeout_prefix(self, owner: str) -> str:
        return keys.rw_read_timeout_prefix(self.key, owner)

    def locked(self) -> Flow[bool]:
        """True when the lock is held in this side's mode (Redisson ``isLocked``)."""
        reply = yield Command(("HGET", self.key, keys.RW_MODE_FIELD))
        return reply is not None and _text(reply) == self.mode

    def force_release_call(self) -> Call:
        return Call(
            self.force_release_script,
            [self.key, self.channel],
            [keys.WRITE_UNLOCK_MESSAGE, self.mode, self.timeout_base],
            changes=True,
        )


class ReadLockCore(_SideCore):
    """The read side: many owners may hold it at once, each hold with its own expiry."""

    mode = keys.RW_READ_MODE
    acquire_script = scripts.get("rw_read_acquire")
    release_script = scripts.get("rw_read_release")
    renewal_script = scripts.get("rw_read_renew")
    unlock_message = keys.READ_UNLOCK_MESSAGE

    def attempt(self, owner: str, lease: float | None, wait: float) -> Flow[int | None]:
        call = Call(
            self.acquire_script,
            [self.key, self.timeout_prefix(owner)],
            [self.lease_ms(lease), owner, keys.rw_writer_field(owner)],
            changes=True,
        )
        reply = yield from self.acquire_call(owner, call)
        if reply is not None:
            return int(reply)
        self.granted(owner, lease)
        return None

    def release_call(self, owner: str, lease: float | None) -> Call:
        return Call(
            self.release_script,
            [self.key, self.channel, self.timeout_prefix(owner)],
            [self.unlock_message, owner, self.timeout_base],
            changes=True,
        )


class WriteLockCore(_SideCore):
    """The write side: one owner at a time, and no readers but that owner."""

    mode = keys.RW_WRITE_MODE
    acquire_script = scripts.get("rw_write_acquire")
    release_script = scripts.get("rw_write_release")
    unlock_message = keys.WRITE_UNLOCK_MESSAGE

    def field(self, owner: str) -> str:
        return keys.rw_writer_field(owner)

    def attempt(self, owner: str, lease: float | None, wait: float) -> Flow[int | None]:
        call = Call(
            self.acquire_script,
            [self.key],
            [self.lease_ms(lease), self.field(owner), owner],
            changes=True,
        )
        reply = yield from self.acquire_call(owner, call)
        if reply is None:
            self.granted(owner, lease)
            return None
        if isinstance(reply, bytes | str):
            raise LockUpgradeError(
                f"read-write lock {self.name!r}: the caller holds read holds only and "
                "cannot wait for the write lock (it would wait on itself); release them first"
            )
        return int(reply)

    def release_call(self, owner: str, lease: float | None) -> Call:
        return Call(
            self.release_script,
            [self.key, self.channel, self.timeout_prefix(owner)],
            [self.unlock_message, self.lease_ms(lease), self.field(owner), owner],
            changes=True,
        )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
