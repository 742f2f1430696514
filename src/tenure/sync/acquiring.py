# GENERATED from src/tenure/aio/acquiring.py by tools/unasync.py: edit that file, not this one.
"""One context-manager and decorator mixin for every lock object.

Every lock front (Lock, FairLock, FencedLock, read and write sides, MultiLock, RedLock)
gets ``with lock:``, ``with lock(timeout=5, lease_time=10):``, ``@lock`` and
``@lock(timeout=5)`` from here, instead of a copy per class.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Any, TypeVar

from tenure._concurrency import Function
from tenure.errors import LockError, LockTimeout

F = TypeVar("F", bound=Function)


class LockContext:
    """``with``/decorator forms over the subclass's ``acquire()`` and ``release()``."""

    name: str

    def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> Any:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __call__(self, timeout: Any = None, lease_time: float | None = None) -> Any:
        """``lock(timeout=5, lease_time=10)``: an acquiring context with these arguments,
        itself a decorator; ``lock(function)`` (``@lock``): ``function`` wrapped so that each
        call runs while holding the lock (acquired with the defaults: wait forever)."""
        if callable(timeout) and lease_time is None:
            return Acquiring(self, None, None)(timeout)
        return Acquiring(self, timeout, lease_time)

    def __enter__(self) -> Any:
        self.acquire()
        return self

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        release_after(self, error)


def release_after(lock: LockContext, error: BaseException | None) -> None:
    """Release at the end of a ``with`` block. When the block raised, its exception is the
    one that propagates: a failed release (a lost hold, say) is attached to it as a note."""
    if error is None:
        lock.release()
        return
    try:
        lock.release()
    except LockError as failure:
        error.add_note(f"tenure: releasing {lock!r} failed too: {failure!r}")


class Acquiring:
    """The context manager (and decorator) that ``lock(timeout=..., lease_time=...)`` returns.

    Entering acquires with those arguments and raises :class:`tenure.LockTimeout` when the
    wait runs out, so the block never runs without the lock; leaving releases.
    """

    def __init__(
        self,
        lock: LockContext,
        timeout: float | None,
        lease_time: float | None,
    ) -> None:
        self._lock = lock
        self._timeout = timeout
        self._lease_time = lease_time

    def __enter__(self) -> Any:
        if not self._lock.acquire(timeout=self._timeout, lease_time=self._lease_time):
            raise LockTimeout(f"{self._lock!r} not acquired within {self._timeout} s")
        return self._lock

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        release_after(self._lock, error)

    def __call__(self, function: F) -> F:
        """Decorate ``function``: each call acquires around it (a fresh acquisition per call)."""
        if not callable(function):
            raise TypeError(f"a lock decorates a function, not {type(function).__name__}")

        @functools.wraps(function)
        def locked(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return locked  # type: ignore[return-value]
