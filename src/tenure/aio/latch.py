# Source of tenure.sync.latch: run python tools/unasync.py after editing.
"""CountDownLatch objects. Each method runs one core flow."""

from __future__ import annotations

from collections.abc import Awaitable

from tenure.aio.runner import AsyncRunner
from tenure.core.latch import LatchCore


class AsyncCountDownLatch:
    """A distributed count-down latch (Redisson ``RCountDownLatch``): callers wait until
    other callers have counted it down to zero.

    Made by ``client.count_down_latch(name)``. Waiters sleep on the latch's pub/sub channel
    and all wake when the count reaches zero, never by polling. Every member is a coroutine
    in the asyncio API.

    Example:
        ```python
        latch = client.count_down_latch("warmup")
        await latch.try_set_count(3)          # only if not set yet
        ...                                   # each of 3 workers: await latch.count_down()
        if await latch.wait(timeout=60):      # True once the count is 0
            ...
        ```
    """

    def __init__(self, runner: AsyncRunner, name: str) -> None:
        self.runner = runner
        self.core = LatchCore(runner.ctx, name)

    @property
    def name(self) -> str:
        """The latch's name as given (without the client's ``name_prefix``)."""
        return self.core.name

    def try_set_count(self, count: int) -> Awaitable[bool]:
        """Set the count (int >= 1) if the latch has none (it is gone once it reached zero).

        Returns True if set, False if a count was already set (unchanged). Raises
        TypeError/ValueError before any I/O, BackendError.
        """
        return self.runner.run(self.core.try_set_count(count))

    def count_down(self) -> Awaitable[None]:
        """Count down by one; at zero the latch is deleted and every waiter wakes.
        Raises BackendError."""
        return self.runner.run(self.core.count_down())

    def count(self) -> Awaitable[int]:
        """The current count (0 when not set or reached). Raises BackendError."""
        return self.runner.run(self.core.count())

    def wait(self, timeout: float | None = None) -> Awaitable[bool]:
        """Wait until the count is zero (Redisson ``await``).

        Args:
            timeout: seconds (float); None or -1 waits forever, 0 only checks.

        Returns:
            True when the count is zero (also at once for a latch never set); False when
                ``timeout`` ran out first.

        Raises:
            TypeError, ValueError: a bad ``timeout``, before any I/O.
            BackendError: the server failed.
        """
        return self.runner.run(self.core.wait(timeout))

    def delete(self) -> Awaitable[bool]:
        """Delete the latch, waking its waiters; True if it existed. Raises BackendError."""
        return self.runner.run(self.core.delete())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
