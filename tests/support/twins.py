"""Concurrency for tests written once: asyncio helpers and their thread twins.

Tests in ``tests/_async`` use the ``Async*`` classes and ``async_*`` functions; the sync
tests generated from them by ``tools/unasync.py`` get the twin with the prefix removed
(``AsyncEvent`` -> ``Event``, ``async_spawn`` -> ``spawn``). Each pair has the same members
and meaning: concurrent work is an asyncio task on one side and a thread on the other.

``fn`` arguments are plain callables: on the asyncio side, a returned awaitable is awaited
(so ``lambda: lock.acquire(timeout=1)`` works on both sides).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio

from tenure._concurrency import AsyncEvent as AsyncEvent
from tenure._concurrency import Event as Event

# a redis-py client of each kind (a test passing its own client to tenure)
AsyncRedis = redis.asyncio.Redis
Redis = redis.Redis

# the side a test runs on: asyncio (a body is a task, blocking the loop pauses the whole
# client) or threads
async_is_asyncio = True
is_asyncio = False


def _timeout(seconds: float | None) -> float | None:
    return None if seconds is None else max(0.0, seconds)


# ---------------------------------------------------------------- background work
async def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


class AsyncJob:
    """``fn(*args)`` running as an asyncio task."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.task = asyncio.get_running_loop().create_task(_call(fn, args))

    def done(self) -> bool:
        return self.task.done()

    async def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the end; True once ended."""
        await asyncio.wait({self.task}, timeout=_timeout(timeout))
        return self.task.done()

    async def outcome(self, timeout: float | None = 30.0) -> Any:
        """The returned value, or the exception it ended with."""
        assert await self.join(timeout), "the job is still running"
        if self.task.cancelled():
            return asyncio.CancelledError()
        error = self.task.exception()
        return error if error is not None else self.task.result()

    async def result(self, timeout: float | None = 30.0) -> Any:
        """The returned value; re-raises the exception it ended with."""
        assert await self.join(timeout), "the job is still running"
        return self.task.result()


class Job:
    """``fn(*args)`` running in a thread."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = fn(*args)
            except BaseException as error:  # reported by outcome() / result()
                self._error = error

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def done(self) -> bool:
        return not self.thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the end; True once ended."""
        self.thread.join(_timeout(timeout))
        return not self.thread.is_alive()

    def outcome(self, timeout: float | None = 30.0) -> Any:
        """The returned value, or the exception it ended with."""
        assert self.join(timeout), "the job is still running"
        return self._error if self._error is not None else self._value

    def result(self, timeout: float | None = 30.0) -> Any:
        """The returned value; re-raises the exception it ended with."""
        assert self.join(timeout), "the job is still running"
        if self._error is not None:
            raise self._error
        return self._value


def async_spawn(fn: Callable[..., Any], *args: Any) -> AsyncJob:
    """Start ``fn(*args)`` as a task (another owner than the caller)."""
    return AsyncJob(fn, *args)


def spawn(fn: Callable[..., Any], *args: Any) -> Job:
    """Start ``fn(*args)`` in a thread (another owner than the caller)."""
    return Job(fn, *args)


async def async_gather(*fns: Callable[[], Any], timeout: float | None = 90.0) -> list[Any]:
    """Run every ``fn()`` at once (a task each); their results in order; the first error
    is raised once all ended."""
    jobs = [AsyncJob(fn) for fn in fns]
    return [await job.result(timeout) for job in jobs]


def gather(*fns: Callable[[], Any], timeout: float | None = 90.0) -> list[Any]:
    """Run every ``fn()`` at once (a thread each); their results in order; the first error
    is raised once all ended."""
    jobs = [Job(fn) for fn in fns]
    return [job.result(timeout) for job in jobs]


async def async_stamped(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()``'s result and the monotonic time it was returned at."""
    value = await _call(fn, ())
    return value, time.monotonic()


def stamped(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()``'s result and the monotonic time it was returned at."""
    value = fn()
    return value, time.monotonic()


# ---------------------------------------------------------------- synchronization
# AsyncEvent / Event: the library's own twins (tenure._concurrency), re-exported.
class AsyncBarrier:
    """``parties`` tasks meet at :meth:`wait`."""

    def __init__(self, parties: int) -> None:
        self._barrier = asyncio.Barrier(parties)

    async def wait(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(_timeout(timeout)):
            await self._barrier.wait()


class Barrier:
    """``parties`` threads meet at :meth:`wait`."""

    def __init__(self, parties: int) -> None:
        self._barrier = threading.Barrier(parties)

    def wait(self, timeout: float | None = None) -> None:
        self._barrier.wait(_timeout(timeout))


# ---------------------------------------------------------------- time
async def async_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


async def async_wait_until(
    predicate: Callable[..., Any], timeout: float = 10.0, poll: float = 0.01
) -> bool:
    """Poll ``predicate()`` (a plain function, e.g. a raw-redis check) every ``poll``
    seconds; True once it holds, False after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        await asyncio.sleep(poll)
    return True


def wait_until(predicate: Callable[..., Any], timeout: float = 10.0, poll: float = 0.01) -> bool:
    """Poll ``predicate()`` (no argument, or only defaulted ones) every ``poll`` seconds; True
    once it holds, False after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(poll)
    return True
