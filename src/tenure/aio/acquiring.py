# Source of tenure.sync.acquiring: run python tools/unasync.py after editing.
"""One context-manager and decorator mixin for every lock object.

Every lock front (Lock, FairLock, FencedLock, read and write sides, MultiLock, RedLock)
gets ``with lock:``, ``with lock(timeout=5, lease_time=10):``, ``@lock`` and
``@lock(timeout=5)`` from here, instead of a copy per class.

In asyncio code the block is a cancel scope (docs/stopping-work.md): a loss of the hold
reported while the body runs cancels the body's task, and the block raises
[`tenure.LockLostError`][tenure.errors.LockLostError] with the body's ``CancelledError`` chained
(`tenure._scope.AsyncLossScope`). Sync bodies cannot be cancelled: they call
``lock.checkpoint()`` between steps.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, overload

from tenure._scope import AsyncLossScope, async_scope_caller
from tenure.core.args import check_lease, check_positive, check_wait
from tenure.errors import LockError, LockLostError, LockTimeout

# A decorated function keeps its parameters (P) and its (awaited) return type (R).
P = ParamSpec("P")
R = TypeVar("R")


class AsyncLockContext:
    """``with``/decorator forms over the subclass's ``acquire()`` and ``release()``."""

    name: str

    def acquire(
        self, blocking: bool = True, timeout: float | None = None, lease_time: float | None = None
    ) -> Awaitable[Any]:
        raise NotImplementedError

    def release(self) -> Awaitable[None]:
        raise NotImplementedError

    def _watch(self, scope: AsyncLossScope) -> bool:
        """Have ``scope`` told when the caller's hold is reported lost; False if the caller
        holds nothing (then it counts as lost at once)."""
        raise NotImplementedError

    def _unwatch(self, scope: AsyncLossScope) -> None:
        raise NotImplementedError

    @overload
    def __call__(
        self,
        timeout: Callable[P, Awaitable[R]],
        lease_time: None = None,
        *,
        cancel_on_loss: bool = True,
        max_hold: float | None = None,
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...

    @overload
    def __call__(
        self,
        timeout: float | None = None,
        lease_time: float | None = None,
        *,
        cancel_on_loss: bool = True,
        max_hold: float | None = None,
    ) -> AsyncAcquiring: ...

    def __call__(
        self,
        timeout: Any = None,
        lease_time: float | None = None,
        *,
        cancel_on_loss: bool = True,
        max_hold: float | None = None,
    ) -> Any:
        """``lock(timeout=5, lease_time=10)``: an acquiring context with these arguments,
        itself a decorator; ``lock(function)`` (``@lock``): ``function`` wrapped so that each
        call runs while holding the lock (acquired with the defaults: wait forever).

        ``cancel_on_loss`` (asyncio only): True (default) cancels the body when the hold
        is lost and raises LockLostError from the block; False lets the body run on (the
        loss then raises LockLostError at exit). ``max_hold``: seconds after the grant
        past which the watchdog stops renewing (``acquire(max_hold=...)``).

        Raises:
            TypeError, ValueError: a bad ``timeout``, ``lease_time``, ``max_hold`` or
                ``cancel_on_loss``, here (before the block is entered or the function
                decorated), as ``acquire()`` would.
        """
        if callable(timeout) and lease_time is None:
            return AsyncAcquiring(self, None, None, cancel_on_loss, max_hold)(timeout)
        if not isinstance(cancel_on_loss, bool):
            raise TypeError(
                f"cancel_on_loss must be a bool, not {type(cancel_on_loss).__name__}"
            )
        # Checked here too (acquire checks them again): a bad ``@lock(lease_time=-5)``
        # raises where it is written, not at the first call of the function it decorates.
        check_wait(True, timeout)
        check_lease(lease_time)
        if max_hold is not None:
            check_positive(max_hold, "max_hold")
        return AsyncAcquiring(self, timeout, lease_time, cancel_on_loss, max_hold)

    def _plain(self) -> AsyncAcquiring:
        plain: AsyncAcquiring | None = self.__dict__.get("_plain_context")
        if plain is None:
            plain = self.__dict__["_plain_context"] = AsyncAcquiring(self, None, None)
        return plain

    async def __aenter__(self) -> Any:
        return await self._plain().__aenter__()

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        await self._plain().__aexit__(kind, error, tb)


async def release_after(lock: AsyncLockContext, error: BaseException | None) -> None:
    """Release at the end of a ``with`` block. When the block raised, its exception is the
    one that propagates: a failed release (a lost hold, say) is attached to it as a note."""
    if error is None:
        await lock.release()
        return
    try:
        await lock.release()
    except LockError as failure:
        error.add_note(f"tenure: releasing {lock!r} failed too: {failure!r}")


class AsyncAcquiring:
    """The context manager (and decorator) that ``lock(timeout=..., lease_time=...)`` returns.

    Entering acquires with those arguments and raises
    [`tenure.LockTimeout`][tenure.errors.LockTimeout] when the
    wait runs out, so the block never runs without the lock; leaving releases. In asyncio
    code the body is cancelled when the hold is lost (unless ``cancel_on_loss=False``) and
    the block raises [`tenure.LockLostError`][tenure.errors.LockLostError] from the body's
    ``CancelledError``.
    One context may be entered by several tasks or threads at once, and nested.
    """

    def __init__(
        self,
        lock: AsyncLockContext,
        timeout: float | None,
        lease_time: float | None,
        cancel_on_loss: bool = True,
        max_hold: float | None = None,
    ) -> None:
        self._lock = lock
        self._timeout = timeout
        self._lease_time = lease_time
        self._cancel_on_loss = cancel_on_loss
        self._max_hold = max_hold
        self._scopes: dict[object, list[AsyncLossScope]] = {}

    async def __aenter__(self) -> Any:
        lock = self._lock
        extra = {} if self._max_hold is None else {"max_hold": self._max_hold}
        acquire: Any = lock.acquire
        if not await acquire(timeout=self._timeout, lease_time=self._lease_time, **extra):
            raise LockTimeout(f"{lock!r} not acquired within {self._timeout} s")
        scope = AsyncLossScope(lock, self._cancel_on_loss)
        if scope.active and not lock._watch(scope):
            scope.lost()  # lost already: the body is cancelled at its first await
        self._scopes.setdefault(async_scope_caller(), []).append(scope)
        return lock

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        caller = async_scope_caller()
        stack = self._scopes[caller]
        scope = stack.pop()
        if not stack:
            del self._scopes[caller]
        if scope.active:
            self._lock._unwatch(scope)
        loss = await scope.finish(error)
        if loss is None:
            await release_after(self._lock, error)
            return
        try:
            await self._lock.release()  # the loss again (no I/O), or a failed release
        except LockLostError:
            pass
        except LockError as failure:
            loss.add_note(f"tenure: releasing after the loss failed: {failure!r}")
        raise loss from error

    def __call__(
        self, function: Callable[P, Awaitable[R]]
    ) -> Callable[P, Coroutine[Any, Any, R]]:
        """Decorate ``function``: each call acquires around it (a fresh acquisition per call).
        The wrapper keeps ``function``'s parameters and return type for type checkers."""
        if not callable(function):
            raise TypeError(f"a lock decorates a function, not {type(function).__name__}")

        @functools.wraps(function)
        async def locked(*args: P.args, **kwargs: P.kwargs) -> R:
            async with self:
                return await function(*args, **kwargs)

        return locked
