"""The sync FencedLock front."""

from __future__ import annotations

from tenure.core.fenced import FencedLockCore
from tenure.sync.lock import Lock


class FencedLock(Lock):
    """A reentrant lock whose every acquisition draws a fencing token (Redisson ``RFencedLock``).

    Made by :meth:`tenure.Client.fenced_lock`. Tokens strictly increase per lock name across
    all clients (INCR of ``redisson_lock_token:{<name>}`` inside the acquire script, re-entries
    included). A lease cannot stop a holder that was paused past it from acting on a stale
    belief that it holds the lock; the protected resource must compare tokens and refuse the
    lower one (Kleppmann, "How to do distributed locking"). :func:`tenure.fenced_write` does
    that for a value stored in Redis.

    Every member of :class:`tenure.Lock`, plus :attr:`token` and :meth:`acquire_token`.
    """

    _core: FencedLockCore

    @property
    def token(self) -> int | None:
        """The token of the calling thread's latest acquisition; None if it never acquired.

        It stays readable after release (the last token this thread drew).
        """
        return self._core.token(self._client._owner())

    def acquire_token(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> int | None:
        """:meth:`acquire`, returning the new fencing token, or None when the wait ran out.

        Arguments and errors as :meth:`tenure.Lock.acquire`.
        """
        if not self.acquire(blocking, timeout, lease_time):
            return None
        return self.token
