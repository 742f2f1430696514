"""The cancel scope of a leadership's body (``async with election.leadership(...)``).

When the leadership is reported lost, the task running the body is cancelled, and the block
raises :class:`tenure.LockLostError` with the body's :class:`asyncio.CancelledError`
chained, as :func:`asyncio.timeout` turns its own cancellation into :class:`TimeoutError`. A
cancellation from outside stays a ``CancelledError``. Sync bodies cannot be cancelled from
another thread: :class:`LeadershipScope` only records the loss.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tenure.errors import LockLostError


class AsyncLeadershipScope:
    """Cancels the task that entered it when :meth:`lost` is called (from any thread)."""

    def __init__(self, what: object, active: bool = True) -> None:
        self._what = what
        self._task: asyncio.Task[Any] | None = asyncio.current_task() if active else None
        self.active = self._task is not None
        self._loop = asyncio.get_running_loop() if self.active else None
        self._cancelling = self._task.cancelling() if self._task is not None else 0
        self._open = True
        self._cancelled = False

    def lost(self) -> None:
        """The leadership was reported lost: cancel the body's task (once)."""
        if not self._open or self._loop is None or self._cancelled:
            return
        self._cancelled = True
        self._loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        task = self._task
        if self._open and task is not None and not task.done():
            task.cancel(f"tenure: the leadership of {self._what!r} was lost")
        else:
            self._cancelled = False

    async def finish(self, error: BaseException | None) -> LockLostError | None:
        """Close the scope at the end of the body (which raised ``error``, or None): the
        LockLostError the block raises instead when the scope cancelled the body, else None
        (no loss, a cancellation also came from outside, or an error of the body's own)."""
        self._open = False
        task = self._task
        if not self._cancelled or task is None:
            return None
        if not isinstance(error, asyncio.CancelledError) and (
            task.cancelling() - self._cancelling == 1
        ):
            with contextlib.suppress(asyncio.CancelledError):  # ours, not delivered yet
                await asyncio.sleep(0)
        if task.uncancel() > self._cancelling:
            return None  # cancelled from outside too: that cancellation goes on
        if error is not None and not isinstance(error, asyncio.CancelledError):
            return None
        return LockLostError(f"{self._what!r}: the leadership was lost; the block was cancelled")


class LeadershipScope:
    """The sync twin: a thread cannot be cancelled, so nothing is done."""

    def __init__(self, what: object, active: bool = True) -> None:
        self.active = False

    def lost(self) -> None:
        return None

    def finish(self, error: BaseException | None) -> LockLostError | None:
        return None
