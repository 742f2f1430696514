"""The sync lock objects. Each method runs one core flow for the calling thread."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from tenure.core.lock import LockCore
from tenure.errors import LockTimeout

if TYPE_CHECKING:
    from tenure.sync.client import Client


class Lock:
    """A reentrant distributed lock (Redisson ``RLock``), owned per (client, thread).

    Made by :meth:`tenure.Client.lock`. The holder's lease is renewed by the client's
    watchdog unless ``lease_time`` is given. Waiters sleep on the lock's pub/sub channel and
    wake on unlock or when the holder's lease ends, never by polling.
    """

    def __init__(self, client: Client, core: LockCore) -> None:
        self._client = client
        self._core = core
        core.front = self

    @property
    def name(self) -> str:
        """The lock's name as given (without the client's ``name_prefix``)."""
        return self._core.name

    def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> bool:
        """Take one hold, waiting if another owner holds the lock.

        Args:
            blocking: False makes one attempt (as ``timeout=0``).
            timeout: seconds to wait; None or -1 waits forever, 0 makes one attempt.
            lease_time: seconds until the hold expires on its own; None lets the watchdog
                renew it (lease ``watchdog_timeout``) until release.

        Returns:
            True once held; False only when the wait ran out.

        Raises:
            TypeError, ValueError: a bad argument (NaN, negative, ``lease_time`` <= 0),
                before any I/O.
            BackendError: the server failed or did not answer within the socket timeout.
                If the acquire reached the server, its hold expires with its lease.
        """
        client = self._client
        acquired = client._run(self._core.acquire(client._owner(), blocking, timeout, lease_time))
        if acquired and lease_time is None:
            client._watch()
        return acquired

    def release(self) -> None:
        """Give back one hold; the lock is free once the caller's hold count reaches 0.

        Raises:
            LockLostError: the caller's hold expired or was taken since it was acquired
                (also reported through ``lost`` and ``on_lost``).
            NotOwnedError: the caller holds no hold on this lock.
            BackendError: the server failed; the hold is given up here and expires with
                its lease on the server.
        """
        client = self._client
        client._run(self._core.release(client._owner()))

    def locked(self) -> bool:
        """True if any owner holds the lock. Raises BackendError."""
        return self._client._run(self._core.locked())

    def owned(self) -> bool:
        """True if the calling thread holds the lock (Redisson ``isHeldByCurrentThread``)."""
        client = self._client
        return client._run(self._core.owned(client._owner()))

    def hold_count(self) -> int:
        """The calling thread's reentrancy count (0 when it holds nothing)."""
        client = self._client
        return client._run(self._core.hold_count(client._owner()))

    def remaining_lease(self) -> float | None:
        """Seconds until the lock expires; None if not held; ``math.inf`` without expiry."""
        return self._client._run(self._core.remaining_lease())

    def force_release(self) -> bool:
        """Delete the lock whoever holds it and wake its waiters; True if it was held.

        The former holder finds out at its next release (LockLostError) or renewal.
        """
        return self._client._run(self._core.force_release())

    @property
    def lost(self) -> bool:
        """True if the calling thread's latest hold was lost (expired or taken away)."""
        return self._core.is_lost(self._client._owner())

    def __call__(
        self, timeout: float | None = None, lease_time: float | None = None
    ) -> _Acquisition:
        """``with lock(timeout=5, lease_time=10):`` — acquire with these arguments."""
        return _Acquisition(self, timeout, lease_time)

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class _Acquisition:
    """The context manager of ``with lock(timeout=..., lease_time=...)``."""

    def __init__(self, lock: Lock, timeout: float | None, lease_time: float | None) -> None:
        self._lock = lock
        self._timeout = timeout
        self._lease_time = lease_time

    def __enter__(self) -> Lock:
        if not self._lock.acquire(timeout=self._timeout, lease_time=self._lease_time):
            raise LockTimeout(f"lock {self._lock.name!r} not acquired within {self._timeout} s")
        return self._lock

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()
