"""The cancel scope of a lock's body: when the lease ends, the work ends.

``async with lock:`` runs its body as a cancel scope (docs/stopping-work.md): when the hold
is reported lost (a renewal found it gone, its validity ran out on the local clock), the
task running the body is cancelled at once, and the block raises
[`tenure.LockLostError`][tenure.errors.LockLostError] with the body's `asyncio.CancelledError`
chained, as
`asyncio.timeout()` turns its own cancellation into `TimeoutError`. A
cancellation from outside stays a ``CancelledError``.

Sync bodies cannot be cancelled from another thread: `LossScope` does nothing, and
the body asks ``lock.checkpoint()`` / ``lock.valid_for()`` between steps.

The loss reaches a scope through the hold table (`tenure.core.holds.HoldTable.watch()`)
or a composite's acquisition, never through the lock object.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from tenure.errors import LockLostError


class AsyncLossScope:
    """Cancels the task that entered it when `lost()` is called (from any thread)."""

    def __init__(self, what: object, active: bool = True) -> None:
        self._what = what
        self.active = active
        """False: watch nothing (``cancel_on_loss=False``, or no running task)."""
        self._task: asyncio.Task[Any] | None = asyncio.current_task() if active else None
        if self._task is None:
            self.active = False
        self._loop = asyncio.get_running_loop() if self.active else None
        self._cancelling = self._task.cancelling() if self._task is not None else 0
        self._open = True
        self.seen = False
        """True once the loss was reported to this scope."""
        self._cancelled = False

    def lost(self) -> None:
        """The hold was reported lost: cancel the body's task (once)."""
        if not self._open or self.seen or self._loop is None:
            return
        self.seen = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._cancel()
        else:
            self._loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        task = self._task
        if self._open and task is not None and not task.done():
            self._cancelled = True
            task.cancel(f"tenure: the hold on {self._what!r} was lost")

    async def finish(self, error: BaseException | None) -> LockLostError | None:
        """Close the scope at the end of the body (which raised ``error``, or None).

        Returns the LockLostError the block raises instead when the scope cancelled the
        body (or the body ended while that cancellation was on its way, which is then
        absorbed here); None otherwise (no loss, a cancellation also came from outside,
        or the body raised an error of its own: that one propagates).
        """
        self._open = False
        task = self._task
        if not self._cancelled or task is None:
            return None
        if not isinstance(error, asyncio.CancelledError) and (
            task.cancelling() - self._cancelling == 1
        ):
            # Our cancellation, requested but not delivered yet: take it here.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)
        if task.uncancel() > self._cancelling:
            return None  # cancelled from outside too: that cancellation goes on
        if error is not None and not isinstance(error, asyncio.CancelledError):
            return None
        return LockLostError(
            f"{self._what!r}: the hold was lost while the block ran; the block was cancelled"
        )


class LossScope:
    """The sync twin: a thread cannot be cancelled, so nothing is watched."""

    def __init__(self, what: object, active: bool = True) -> None:
        self._what = what
        self.active = False
        self.seen = False

    def lost(self) -> None:
        self.seen = True

    def finish(self, error: BaseException | None) -> LockLostError | None:
        return None


def async_scope_caller() -> object:
    """Who enters a block in asyncio code: the running task."""
    return asyncio.current_task()


def scope_caller() -> object:
    """Who enters a block in sync code: the calling thread."""
    return threading.get_ident()
