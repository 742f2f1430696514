"""An acquire whose caller may leave while its script is on its way (a plain Semaphore's).

A plain Semaphore's permits have no owner, so an acquire cannot be reconciled afterwards by
asking the server what it holds (locks can: docs/primitives/semaphore.md). What its script
did is known from its reply only. So in asyncio the acquire flow runs in a task of its own,
which the caller awaits shielded: a caller cancelled while the flow waits (on the channel,
a subscription) cancels the task at once; a caller cancelled while a script call is in
flight lets that call finish, and the flow then stops at its next step as if cancelled
there, with the reply known: permits it said were taken are given back (by the flow, or
here when the flow had already returned them).

Either way the caller is gone for good (`Tracked.left`): a task that ends granted all the
same gives its permits back. A cancellation of the task can be absorbed on its way: on
Python 3.11, ``asyncio.wait_for`` (which redis-py writes through when a socket timeout is
set) returns the result of a write that finished just as it was cancelled, so a flow
leaving its channel after its grant (waking the waiter that reads the socket with a PING)
went on to return True to nobody, and the permits stayed taken.

Sync callers cannot be interrupted from outside except by a signal handler's exception,
which lands in the calling thread itself: `acquire_settled()` runs the flow in place.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Generator
from typing import Any

from tenure.core.context import Context
from tenure.core.effects import Background, Call, Unsubscribe

Flow = Generator[Any, Any, Any]
CLEAN_UP = (Background, Unsubscribe)

_running: set[asyncio.Future[Any]] = set()
"""Tasks left to finish after their caller was cancelled (kept referenced until done)."""


def settle_read_bound(ctx: Context) -> float:
    """Seconds a reply nobody waits for any more is waited for when the client has no socket
    timeout (``socket_timeout=None``), by the backend's background reader
    (`tenure.aio.backend.AsyncBackend._settle_later`) and, in asyncio, by an acquire task
    whose caller left while its script was in flight (`async_acquire_settled`): the
    watchdog lease (``watchdog_timeout``). A server silent that long is one the client
    already counts as gone: its renewals failed for a whole lease, so the holds it granted
    count as lost (docs/primitives/lock.md, "server paused"); and a reply that never comes
    leaves the outcome unknown, as a socket timeout does (docs/primitives/semaphore.md).
    Without a bound, a server that never answers kept a thread or task and a connection
    out of the pool for ever."""
    return ctx.watchdog_timeout


class Tracked:
    """Passes a flow's effects through, and knows whether a script call is in flight.

    Once `left` is set (the caller was cancelled), the flow gets a CancelledError at its
    next effect instead of that effect, once (leaving a channel and background work are
    carried out: they are clean-up); the effects of its clean-up that follow are carried
    out too. A flow that returns True (granted) after the caller left, however it got
    there (a cancellation absorbed on the way), has ``give_back()`` run in the background.
    """

    def __init__(self, flow: Flow, give_back: Callable[[], Flow]) -> None:
        self._flow = flow
        self._give_back = give_back
        self.in_call = False
        self.calls = 0
        """Script calls made so far (the one in flight, if ``in_call``, included)."""
        self.left = False
        self._stopped = False

    def run(self) -> Flow:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = self._flow.throw(error) if error is not None else self._flow.send(value)
            except StopIteration as stop:
                if self.left and stop.value is True:  # granted to nobody
                    yield Background(self._give_back())
                result = stop.value
                return result
            if self.left and not self._stopped and not isinstance(effect, CLEAN_UP):
                self._stopped = True
                value, error = None, asyncio.CancelledError()
                continue
            self.in_call = isinstance(effect, Call)
            if self.in_call:
                self.calls += 1
            try:
                value, error = (yield effect), None
            except BaseException as failure:
                value, error = None, failure
            finally:
                self.in_call = False


async def async_acquire_settled(
    runner: Any, lock: Any, owner: str, flow: Flow, give_back: Callable[[], Flow]
) -> bool:
    """``await runner.acquire(lock, owner, flow)`` in a task of its own, shielded from the
    caller's cancellation while one of its script calls is in flight (see the module
    docstring). ``give_back()``: the flow that undoes a grant the caller will never get."""
    tracked = Tracked(flow, give_back)
    loop = asyncio.get_running_loop()
    task = loop.create_task(runner.acquire(lock, owner, tracked.run()))
    done = loop.create_future()  # the caller's cancellation cancels this, not the task
    task.add_done_callback(functools.partial(_wake, done))
    try:
        await done
    except asyncio.CancelledError:
        if not task.done():
            # The reply of a call in flight decides; the flow stops at its next step. A
            # flow waiting is cancelled now, and stops at its next step all the same if
            # that cancellation is absorbed on the way (see the module docstring).
            tracked.left = True
            if not tracked.in_call:
                task.cancel()
            else:
                # A server that never answers (no socket timeout) must not keep the task
                # and its connection for ever: past the bound, the call still in flight is
                # cancelled, and the backend reads its reply in the background, bounded
                # too (`settle_read_bound`); a grant in it is still given back.
                loop.call_later(
                    settle_read_bound(runner.ctx), _cut, task, tracked, tracked.calls
                )
            _running.add(task)
            task.add_done_callback(_finished)
        elif not task.cancelled() and task.exception() is None and task.result() is True:
            # granted just as the caller was cancelled: the permits are nobody's
            undo = asyncio.ensure_future(runner.run(give_back()))
            _running.add(undo)
            undo.add_done_callback(_finished)
        raise
    granted: bool = task.result()
    return granted


def acquire_settled(
    runner: Any, lock: Any, owner: str, flow: Flow, give_back: Callable[[], Flow]
) -> bool:
    """The sync twin of `async_acquire_settled()`: ``runner.acquire(lock, owner,
    flow)`` in place. A signal handler's exception landing after the flow returned True
    and before the caller got it (the driver and the observer's hooks still running) has
    ``give_back()`` run in the background: nobody else would release those permits."""
    outcome: list[Any] = []
    try:
        granted: bool = runner.acquire(lock, owner, _noted(flow, outcome))
        return granted
    except BaseException:
        if outcome and outcome[0] is True and not runner.closed:
            runner.run(_in_background(give_back))
        raise


def _noted(flow: Flow, outcome: list[Any]) -> Flow:
    result = yield from flow
    outcome.append(result)
    return result


def _in_background(give_back: Callable[[], Flow]) -> Flow:
    yield Background(give_back())


def _cut(task: asyncio.Future[Any], tracked: Tracked, calls: int) -> None:
    if not task.done() and tracked.in_call and tracked.calls == calls:  # the same call
        task.cancel()


def _wake(done: asyncio.Future[None], task: asyncio.Future[Any]) -> None:
    if not done.done():
        done.set_result(None)


def _finished(task: asyncio.Future[Any]) -> None:
    _running.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: its own errors were logged by the runner
