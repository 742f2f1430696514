"""Signal helpers of the interrupt tests (test_interrupts.py, test_fair_interrupts.py,
test_interrupt_cleanup.py, test_signal_windows.py)."""

from __future__ import annotations

import asyncio
import dis
import signal
import threading
import time
from collections.abc import Callable, Collection
from types import CodeType, FrameType
from typing import Any


def raising_at_place(
    n: int,
    codes: Collection[CodeType],
    after: Collection[str],
    alarm: Callable[[FrameType, str], BaseException],
    *,
    at_start: bool = False,
    armed: list[bool] | None = None,
) -> tuple[Callable[..., Any], list[int]]:
    """A `sys.settrace` tracer that raises ``alarm(frame, where)`` at the ``n``-th place
    (counted from 0) where a signal handler could run in a frame of one of ``codes``; and a
    list whose one item counts the places seen. The places: the instruction after each one
    named in ``after`` (``where`` is ``"after OPNAME"``), and with ``at_start`` also as the
    frame begins (``where`` is ``"start"``, at its 'call' event). With ``armed``, only the
    places met while ``armed[0]`` is set count."""
    seen = [0]
    names = {code: {i.offset: i.opname for i in dis.get_instructions(code)} for code in codes}

    def place(frame: FrameType, where: str) -> None:
        if armed is None or armed[0]:
            seen[0] += 1
            if seen[0] == n + 1:
                raise alarm(frame, where)

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code not in names:
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        last = [-1]

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                before = names[code].get(last[0], "")
                last[0] = frame.f_lasti
                if before in after:
                    place(frame, f"after {before}")
            return local

        if at_start:
            place(frame, "start")
        return local

    return tracer, seen


def alarm_when_leaving(armed: threading.Event) -> Callable[[Any, str, Any], None]:
    """A `sys.settrace` tracer that lands a second SIGALRM on a clean-up's Unsubscribe:
    when a pub/sub listener's ``unsubscribe`` begins while ``armed`` is set, it disarms,
    has another thread hold that listener's mutex for 0.3 s (so the Unsubscribe waits for
    it) and sets SIGALRM to fire 0.1 s later, while it waits."""

    def hold_the_mutex(mutex: Any, holding: threading.Event) -> None:
        with mutex:
            holding.set()
            time.sleep(0.3)  # the second SIGALRM comes at 0.1 s

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if (
            event == "call"
            and armed.is_set()
            and frame.f_code.co_name == "unsubscribe"
            and frame.f_code.co_filename.endswith("listener.py")
            and "self" in frame.f_locals
            and hasattr(frame.f_locals["self"], "_parking")
        ):
            armed.clear()
            holding = threading.Event()
            mutex = frame.f_locals["self"]._mutex
            threading.Thread(target=hold_the_mutex, args=(mutex, holding)).start()
            holding.wait(5)
            signal.setitimer(signal.ITIMER_REAL, 0.1)

    return tracer


def awaiting(task: asyncio.Task[Any]) -> list[str]:
    """The coroutines ``task`` is suspended in, outermost first."""
    names = []
    coro: Any = task.get_coro()
    while coro is not None and hasattr(coro, "cr_code"):
        names.append(coro.cr_code.co_name)
        coro = coro.cr_await
    return names


async def cancel_twice_while_leaving(task: asyncio.Task[Any], mutex: Any) -> None:
    """Cancel a waiting ``task`` (it reads or sleeps with the listener's ``mutex`` let go),
    then cancel it again while its clean-up waits for ``mutex`` to leave the channel."""
    from support.twins import async_wait_until

    await mutex.acquire()  # the waiter reads or sleeps with the mutex let go
    task.cancel()
    # The first cancellation: the waiter wakes and waits for the mutex to end its wait.
    assert await async_wait_until(lambda: awaiting(task)[-1:] == ["acquire"], 5, 0.001)
    mutex.release()
    await mutex.acquire()  # queued behind the waiter: it ends its wait, then waits here...
    assert "unsubscribe" in awaiting(task), awaiting(task)  # ...to leave the channel
    task.cancel()  # the second cancellation
    mutex.release()
