# GENERATED from src/tenure/aio/fenced.py by tools/unasync.py: edit that file, not this one.
"""The FencedLock front."""

from __future__ import annotations

from collections.abc import Awaitable

from tenure.sync.lock import Lock
from tenure.core.fenced import FencedLockCore


class FencedLock(Lock):
    """A reentrant lock whose every acquisition draws a fencing token (Redisson ``RFencedLock``).

    Made by ``client.fenced_lock(name)``. Tokens strictly increase per lock name across all
    clients (INCR of ``redisson_lock_token:{<name>}`` inside the acquire script, re-entries
    included). A lease cannot stop a holder that was paused past it from acting on a stale
    belief that it holds the lock; the protected resource must compare tokens and refuse the
    lower one (Kleppmann, "How to do distributed locking", 2016).
    [`tenure.fenced_write()`][tenure.fencing.fenced_write]
    does that for a value stored in Redis.

    Tokens come from a Redis counter (no TTL): a server that restarts without persistence
    (no RDB save points and AOF off) forgets it, and tokens start over from 1 — they go
    backwards, so a resource that saw a higher token refuses every new holder, and one that
    was reset accepts stale ones. Run fenced locks on a server with AOF (``appendfsync
    everysec`` or ``always``) or RDB snapshots; the client's first fenced acquire logs a
    WARNING on the ``tenure`` logger (once per client) when the server reports neither.

    Every member of [`tenure.Lock`][tenure.Lock], plus [`token`][tenure.FencedLock.token] and
    [`acquire_token()`][tenure.FencedLock.acquire_token].

    Example:
        ```python
        ledger = client.fenced_lock("ledger")
        token = ledger.acquire_token(timeout=10)
        if token is not None:
            try:
                tenure.fenced_write(resource, "balance", token, b"42")  # refused if stale
            finally:
                ledger.release()
        ```
    """

    core_class = FencedLockCore
    core: FencedLockCore

    @property
    def token(self) -> int | None:
        """The token (int) of the caller's latest acquisition; None if it never acquired.

        It stays readable after release (the last token this owner drew).
        """
        return self.core.token(self.runner.owner())

    def acquire_token(
        self,
        blocking: bool = True,
        timeout: float | None = None,
        lease_time: float | None = None,
        *,
        max_hold: float | None = None,
    ) -> int | None:
        """`acquire()`, returning the new fencing token, or None when the wait ran out.

        Arguments and errors as [`tenure.Lock.acquire()`][tenure.Lock.acquire].
        """
        runner, owner = self.runner, self.runner.owner()
        flow = self.core.acquire_token(owner, blocking, timeout, lease_time)
        return runner.acquire(self, owner, self.core.capped(owner, max_hold, flow))
