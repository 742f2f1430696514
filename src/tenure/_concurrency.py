"""The only hand-written sync/asyncio twins: the primitives the drivers wait and spawn with.

`tenure.aio` is written once against the ``Async*`` classes and ``async_*`` functions
here; ``tools/unasync.py`` turns those names into the sync ones (``AsyncEvent`` -> ``Event``,
``async_sleep`` -> ``sleep``) to generate `tenure.sync`. Each pair has the same
members and the same meaning; where threads and tasks must differ (a thread cannot be
cancelled), the docstring says how. Modelled on httpcore's ``_synchronization.py``.
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
import contextlib
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Hashable, Iterable
from typing import Any, TypeVar

from tenure.core.holds import Identity

T = TypeVar("T")


def _timeout(seconds: float | None) -> float | None:
    """``math.inf`` and None both mean 'no timeout' to the primitives below."""
    return None if seconds is None or math.isinf(seconds) else max(0.0, seconds)


# ---------------------------------------------------------------- owners
def async_current_owner(identity: Identity) -> str:
    """The owner id of the running asyncio task (one per task, never reused)."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("tenure's asyncio API must be called from inside a task")
    return identity.owner_of(task)


def current_owner(identity: Identity) -> str:
    """The owner id of the calling thread (one per thread, never reused)."""
    return identity.thread_owner()


def async_waiter_key() -> Hashable:
    """What tells the listener's waiters apart: the running task (one wait at a time each)."""
    return asyncio.current_task()


def waiter_key() -> Hashable:
    """What tells the listener's waiters apart: the calling thread (one wait at a time each)."""
    return threading.get_ident()


def async_cancellations() -> Callable[[], int] | None:
    """The running task's count of cancellation requests (``Task.cancelling``): a driver
    compares it before and after an effect to notice a cancellation absorbed on the way."""
    task = asyncio.current_task()
    return None if task is None else task.cancelling


def cancellations() -> Callable[[], int] | None:
    """None: a thread is never cancelled (the twin of `async_cancellations()`)."""
    return None


# ---------------------------------------------------------------- mutual exclusion
AsyncMutex = asyncio.Lock
"""``async with mutex:`` (FIFO; free to take at once when nobody holds it)."""
Mutex = threading.RLock
"""``with mutex:``. Reentrant only for what `threading.RLock` does beside: a
`threading.Condition` on it, and `Unlocked`, take it back after a wait without letting a
signal handler interrupt them (a handler's exception then comes with the mutex held, not
in its place). Nothing in tenure takes it twice."""


class AsyncUnlocked:
    """``async with AsyncUnlocked(mutex):`` lets go of a held `AsyncMutex` for the
    block and takes it back after, even when the task is cancelled meanwhile (the block's
    own exception, or the cancellation, is raised once the mutex is held again)."""

    def __init__(self, mutex: asyncio.Lock) -> None:
        self._mutex = mutex

    async def __aenter__(self) -> AsyncUnlocked:
        self._mutex.release()
        return self

    async def __aexit__(self, *exc: object) -> None:
        cancelled = False
        while True:  # as asyncio.Condition.wait takes its lock back
            try:
                await self._mutex.acquire()
                break
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError

    async def retake(self) -> None:
        """Nothing to do: a task is interrupted only where it awaits, and `__aexit__`
        takes the mutex back whatever comes (see `Unlocked.retake`)."""


class Unlocked:
    """``with Unlocked(mutex):`` lets go of a held `Mutex` for the block and takes
    it back after, even when a signal handler raises meanwhile: the mutex is taken back
    first (a wait that a handler cannot cut short), then the handler's exception is raised.
    Taken back interruptibly, the mutex could stay unheld, and the caller's ``with
    mutex:`` would raise ``RuntimeError`` (release of an unheld lock) in place of the
    handler's exception.

    A handler runs between bytecodes: when a Python function begins and after a call
    returns (CPython's eval breaker). One that raises as ``__exit__`` begins, before its
    first call, leaves the mutex let go: the caller calls `retake()` in a ``finally``
    around the ``with`` (the handler has then run; a second signal in the same few
    bytecodes is the only window left)."""

    def __init__(self, mutex: Any) -> None:
        self._mutex = mutex
        self._state: Any = (1, threading.get_ident())  # Nothing takes the mutex twice.

    def __enter__(self) -> Unlocked:
        try:
            self._state = self._mutex._release_save()
        except BaseException:
            # A handler that ran once the mutex was let go (the state not stored yet):
            # the block is not entered, so take it back before the exception goes on.
            self.retake()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        # RLock's own restore: a blocking acquire that signals do not interrupt (their
        # handlers run once it returns, the mutex held), as threading.Condition.wait uses.
        self._mutex._acquire_restore(self._state)

    def retake(self) -> None:
        """Take the mutex back if a handler that raised as `__exit__` began kept it from
        doing so (at once when the thread holds it)."""
        if not self._mutex._is_owned():
            self._mutex._acquire_restore(self._state)


class AsyncSteady:
    """``async with AsyncSteady(mutex) as steady:`` takes an `AsyncMutex` for a clean-up
    that must run whole (a waiter leaving its channel): a cancellation while waiting for
    the mutex is held back; the block ends with ``steady.rethrow()``, which raises it
    once the clean-up has run (the mutex let go as the block ends)."""

    def __init__(self, mutex: asyncio.Lock) -> None:
        self._mutex = mutex
        self._interrupt: BaseException | None = None

    async def __aenter__(self) -> AsyncSteady:
        while True:  # asyncio.Lock.acquire, cancelled, has not taken the lock
            try:
                await self._mutex.acquire()
                return self
            except asyncio.CancelledError as error:
                self._interrupt = self._interrupt or error

    async def __aexit__(self, *exc: object) -> None:
        self._mutex.release()

    def rethrow(self) -> None:
        """Raise the interrupt held back while the mutex was awaited, if any."""
        if self._interrupt is not None:
            interrupt, self._interrupt = self._interrupt, None
            raise interrupt


class Steady:
    """``with Steady(mutex) as steady:`` takes a `Mutex` for a clean-up that must run
    whole (a waiter leaving its channel): a signal handler that raises while the thread
    waits for the mutex does not cut the wait short; its exception is held back, and the
    block ends with ``steady.rethrow()``, which raises it once the clean-up has run.

    Why the mutex can never stay held after a handler (nor its holder wait on itself): a
    handler runs between bytecodes, when a Python function begins and after a call
    returns. ``__enter__`` takes the mutex with its last calls, inside a ``try`` that
    keeps whatever a handler raises after them; ``__exit__`` is the mutex's own
    ``RLock.__exit__`` (C, no Python frame: the ``with`` statement releases with no
    bytecode run between). A Python ``__exit__`` let a handler raise as it began, before
    its release: the thread kept the mutex, and its next ``Steady`` (whose
    ``_acquire_restore``, unlike ``acquire``, does not check the owner) waited on itself
    for ever. ``__enter__`` first tries a non-blocking ``acquire`` (which takes the mutex
    again at once if the thread holds it), so a thread never waits on itself here."""

    def __init__(self, mutex: Any) -> None:
        self._mutex = mutex
        self._interrupt: BaseException | None = None

    def __enter__(self) -> Steady:
        mutex = self._mutex
        try:
            if not mutex.acquire(False):
                # RLock's own restore (see Unlocked): the handlers run once it returns.
                mutex._acquire_restore((1, threading.get_ident()))
        except BaseException as error:  # a handler's, raised after one of the calls above
            self._interrupt = error
            if not mutex._is_owned():  # it ran before the mutex was taken
                mutex._acquire_restore((1, threading.get_ident()))
        return self

    @property
    def __exit__(self) -> Callable[..., Any]:
        # Looked up by the with statement before __enter__ runs; what it returns is
        # called at the block's end: RLock's C release, with no frame of ours around it.
        exit_: Callable[..., Any] = self._mutex.__exit__
        return exit_

    def rethrow(self) -> None:
        """Raise the handler's exception held back while the mutex was awaited, if any."""
        if self._interrupt is not None:
            interrupt, self._interrupt = self._interrupt, None
            raise interrupt


class AsyncCondition:
    """A condition on an `AsyncMutex` (use it while holding that mutex)."""

    def __init__(self, mutex: asyncio.Lock) -> None:
        self._cond = asyncio.Condition(mutex)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until ``predicate()`` holds or ``timeout`` seconds pass; its last value."""
        limit = _timeout(timeout)
        if limit is None:
            await self._cond.wait_for(predicate)
            return True
        try:
            async with asyncio.timeout(limit):
                await self._cond.wait_for(predicate)
        except TimeoutError:
            return predicate()
        return True

    async def wait(self, timeout: float | None) -> None:
        """Sleep until notified or ``timeout`` seconds pass (the caller re-checks)."""
        limit = _timeout(timeout)
        if limit is None:
            await self._cond.wait()
            return
        try:
            async with asyncio.timeout(limit):
                await self._cond.wait()
        except TimeoutError:
            pass

    def notify_all(self) -> None:
        self._cond.notify_all()


class Condition:
    """A condition on a `Mutex` (use it while holding that mutex)."""

    def __init__(self, mutex: Any) -> None:
        self._cond = threading.Condition(mutex)

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until ``predicate()`` holds or ``timeout`` seconds pass; its last value."""
        return self._cond.wait_for(predicate, _timeout(timeout))

    def wait(self, timeout: float | None) -> None:
        """Sleep until notified or ``timeout`` seconds pass (the caller re-checks)."""
        self._cond.wait(_timeout(timeout))

    def notify_all(self) -> None:
        self._cond.notify_all()


class AsyncEvent:
    """A flag that wakes its waiters when set (and can be cleared again)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until set or ``timeout`` seconds pass; True if set."""
        limit = _timeout(timeout)
        if limit is None:
            await self._event.wait()
            return True
        try:
            async with asyncio.timeout(limit):
                await self._event.wait()
        except TimeoutError:
            return self._event.is_set()
        return True


class Event:
    """A flag that wakes its waiters when set (and can be cleared again)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until set or ``timeout`` seconds pass; True if set."""
        return self._event.wait(_timeout(timeout))


# ---------------------------------------------------------------- time
async def async_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


class AsyncPauses:
    """The pauses of one client's flows (`tenure.core.effects.Sleep`: a retry's back-off):
    each ends early once `end()` is called (the client closes), and so do the ones begun
    after: a closed client's flows then stop at their next command."""

    def __init__(self) -> None:
        self._ended = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        if self._ended.is_set():
            return
        try:
            async with asyncio.timeout(max(0.0, seconds)):
                await self._ended.wait()
        except TimeoutError:
            pass

    def end(self) -> None:
        self._ended.set()


class Pauses:
    """The pauses of one client's flows (`tenure.core.effects.Sleep`: a retry's back-off):
    each ends early once `end()` is called (the client closes), and so do the ones begun
    after: a closed client's flows then stop at their next command.

    A pause waits on a bare lock, held until `end()` (each pause it ends lets it go again
    for the next): no Python frame holds it, so a signal handler raising in a pause of the
    main thread leaves nothing held but, at worst, a later pause that then sleeps its full
    length (a `threading.Event` waits in a `threading.Condition`, whose Python
    ``__enter__``/``__exit__`` a handler can leave with its lock held: `end()` would then
    wait for ever)."""

    def __init__(self) -> None:
        self._ended = False
        self._gate = threading.Lock()
        self._gate.acquire()

    def sleep(self, seconds: float) -> None:
        if self._ended:
            return
        if self._gate.acquire(timeout=min(max(0.0, seconds), threading.TIMEOUT_MAX)):
            self._gate.release()  # ended: let go again, for the next pause under way

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            with contextlib.suppress(RuntimeError):  # another thread's end() let it go first
                self._gate.release()


# ---------------------------------------------------------------- background work
class AsyncTask:
    """Work running in the background: an asyncio task."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task

    def done(self) -> bool:
        return self.task.done()

    def exception(self) -> BaseException | None:
        """The error the work ended with (None if it returned); only once `done()`."""
        if self.task.cancelled():
            return asyncio.CancelledError()
        return self.task.exception()

    def result(self) -> Any:
        return self.task.result()

    async def stop(self, timeout: float | None) -> None:
        """Cancel the work and wait up to ``timeout`` seconds for its end (not when called
        from the work itself: it ends at its next await)."""
        self.task.cancel()
        if self.task is not asyncio.current_task():
            await async_wait_any([self], timeout)


class Task:
    """Work running in the background: a daemon thread (or a pool thread), as a future."""

    def __init__(
        self, future: concurrent.futures.Future[Any], thread: threading.Thread | None = None
    ) -> None:
        self.task = future
        self.thread = thread

    def done(self) -> bool:
        return self.task.done()

    def exception(self) -> BaseException | None:
        """The error the work ended with (None if it returned); only once `done()`."""
        return self.task.exception()

    def result(self) -> Any:
        return self.task.result()

    def stop(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` seconds for the work to end (a thread cannot be
        cancelled: the work must see the flag that tells it to stop); at once when called
        from the work's own thread."""
        if self.thread is not threading.current_thread():
            wait_any([self], timeout)


class AsyncSpawner:
    """Starts background work on the running event loop and keeps it referenced until done."""

    def __init__(self, name: str, workers: int = 0) -> None:
        self._name = name
        self._running: set[asyncio.Task[Any]] = set()

    def spawn(self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> AsyncTask:
        task = asyncio.get_running_loop().create_task(function(*args), name=self._name)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return AsyncTask(task)

    def close(self) -> None:
        """Nothing to stop: started tasks finish on their own."""


# Threads are started off the main thread: a signal handler runs only there, between
# bytecodes, and one that raises as `threading.Thread.start` returns from its C call makes
# `start` take the new thread off threading's table while it runs, which then dies with
# KeyError before its target ran (CPython 3.11). So the main thread hands its threads to a
# starter: a bare `_thread` thread (no such table, so nothing for a handler to undo) that
# starts them. Other threads start their own: no handler runs in them.
# No lock guards the starter: only the main thread uses it, and a handler that starts work
# of its own enters `_start` again in that same thread (a lock held there would be a hang
# for good). A handler's call between the new starter's start and `_starter = starts`
# leaves one idle starter behind, no more; `SimpleQueue.put` may be called re-entrantly.
_starter: queue.SimpleQueue[tuple[threading.Thread, concurrent.futures.Future[Any]]] | None = None


def _start(thread: threading.Thread, future: concurrent.futures.Future[Any]) -> None:
    """Start ``thread``: at once, or on the starter (there, a failure to start is
    ``future``'s exception)."""
    global _starter
    if threading.get_ident() != threading.main_thread().ident:
        thread.start()
        return
    starter = _starter
    if starter is None:
        starter = queue.SimpleQueue()
        _thread.start_new_thread(_run_starter, (starter,))
        # A handler raising (or starting work) just above leaves an idle starter, no more.
        _starter = starter
    starter.put((thread, future))


def _run_starter(
    starts: queue.SimpleQueue[tuple[threading.Thread, concurrent.futures.Future[Any]]],
) -> None:
    while True:
        thread, future = starts.get()
        try:
            thread.start()
        except BaseException as error:  # RuntimeError: can't start new thread
            future.set_exception(error)


def _forget_starter() -> None:
    # A forked child has the main thread only: its first spawn makes a starter of its own.
    global _starter
    _starter = None


os.register_at_fork(after_in_child=_forget_starter)


class Spawner:
    """Starts background work: on a pool of ``workers`` threads, or a daemon thread each
    (``workers=0``, for long-lived loops). The main thread's threads start on a starter
    thread (see `_start`): ``spawn`` returns before the work begins."""

    def __init__(self, name: str, workers: int = 0) -> None:
        self._name = name
        self._pool = (
            concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=name)
            if workers
            else None
        )

    def spawn(self, function: Callable[..., Any], *args: Any) -> Task:
        if self._pool is not None:
            return Task(self._pool.submit(function, *args))
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(function(*args))
            except BaseException as error:
                future.set_exception(error)

        thread = threading.Thread(target=run, name=self._name, daemon=True)
        _start(thread, future)
        return Task(future, thread)

    def close(self) -> None:
        """Stop the pool's threads once their current work is done."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)


async def async_wait_any(
    tasks: Iterable[AsyncTask], timeout: float | None
) -> tuple[set[AsyncTask], set[AsyncTask]]:
    """Wait until one of ``tasks`` is done or ``timeout`` seconds pass: (done, pending)."""
    by_task = {t.task: t for t in tasks}
    if not by_task:
        return set(), set()
    done, pending = await asyncio.wait(
        by_task, timeout=_timeout(timeout), return_when=asyncio.FIRST_COMPLETED
    )
    return {by_task[t] for t in done}, {by_task[t] for t in pending}


def wait_any(tasks: Iterable[Task], timeout: float | None) -> tuple[set[Task], set[Task]]:
    """Wait until one of ``tasks`` is done or ``timeout`` seconds pass: (done, pending)."""
    by_task = {t.task: t for t in tasks}
    if not by_task:
        return set(), set()
    done, pending = concurrent.futures.wait(
        by_task, timeout=_timeout(timeout), return_when=concurrent.futures.FIRST_COMPLETED
    )
    return {by_task[t] for t in done}, {by_task[t] for t in pending}


async def async_join(tasks: Iterable[AsyncTask], timeout: float | None) -> set[AsyncTask]:
    """Wait until every task is done or ``timeout`` seconds pass; the tasks still pending.

    Cancelling the caller does not cancel the tasks: they finish their work regardless.
    """
    by_task = {t.task: t for t in tasks}
    if not by_task:
        return set()
    _, pending = await asyncio.wait(by_task, timeout=_timeout(timeout))
    return {by_task[t] for t in pending}


def join(tasks: Iterable[Task], timeout: float | None) -> set[Task]:
    """Wait until every task is done or ``timeout`` seconds pass; the tasks still pending."""
    by_task = {t.task: t for t in tasks}
    if not by_task:
        return set()
    _, pending = concurrent.futures.wait(by_task, timeout=_timeout(timeout))
    return {by_task[t] for t in pending}
