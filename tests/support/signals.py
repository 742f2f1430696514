"""Signal helpers of the interrupt tests (test_interrupts.py, test_fair_interrupts.py,
test_interrupt_cleanup.py, test_signal_windows.py, test_release_interrupt.py...)."""

from __future__ import annotations

import asyncio
import dis
import gc
import inspect
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Collection
from types import CodeType, FrameType
from typing import Any


def codes_of(*modules: types.ModuleType) -> set[CodeType]:
    """Every function, method, property getter and nested function defined in ``modules``:
    the code a sweep raises in."""
    out: set[CodeType] = set()

    def add(function: Any) -> None:
        code = getattr(inspect.unwrap(function), "__code__", None)
        if code is not None:
            out.add(code)
            out.update(c for c in code.co_consts if isinstance(c, CodeType))

    for module in modules:
        for value in vars(module).values():
            if inspect.isfunction(value) and value.__module__ == module.__name__:
                add(value)
            elif inspect.isclass(value) and value.__module__ == module.__name__:
                for attribute in vars(value).values():
                    if isinstance(attribute, staticmethod | classmethod):
                        attribute = attribute.__func__
                    elif isinstance(attribute, property):
                        attribute = attribute.fget
                    if inspect.isfunction(attribute):
                        add(attribute)
    return out


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


SIGNAL_CHECKS = {
    "CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
    "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE",
}  # fmt: skip
"""Instructions after which CPython checks for pending signals (after a call returns, at a
backward jump; and as a function begins: `TwoAlarms`'s 'start' place)."""


class TwoAlarms:
    """The first ``alarm`` from a profiler as ``first(frame, event, arg)`` says (the
    interrupt a clean-up answers: the profiler is unset once it raised), then a second
    from a tracer at the ``n``-th place in ``codes`` after it: as a frame begins, and
    after each instruction of `SIGNAL_CHECKS`. With ``skip_handler_entry``, not at an
    exception handler's entry (``PUSH_EXC_INFO``: the call before it raised, and CPython
    checks for pending signals only after a call that returned). Install ``profile`` with
    `sys.setprofile` and ``trace`` with `sys.settrace`."""

    def __init__(
        self,
        n: int,
        first: Callable[[FrameType, str, Any], bool],
        codes: Collection[CodeType],
        alarm: type[BaseException],
        *,
        skip_handler_entry: bool = False,
    ) -> None:
        self.n = n
        self.first = first
        self.alarm = alarm
        self.skip_handler_entry = skip_handler_entry
        self.names = {c: {i.offset: i.opname for i in dis.get_instructions(c)} for c in codes}
        self.fired = 0  # alarms raised
        self.places = 0  # places seen after the first alarm
        self.where = ""

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.fired == 0 and self.first(frame, event, arg):
            self.fired = 1
            sys.setprofile(None)
            raise self.alarm("first")

    def hit(self, frame: FrameType, where: str) -> None:
        if self.fired != 1:
            return
        if self.skip_handler_entry and (
            self.names[frame.f_code].get(frame.f_lasti) == "PUSH_EXC_INFO"
        ):
            return
        self.places += 1
        if self.places == self.n + 1:
            self.fired = 2
            self.where = f"{where} {frame.f_code.co_name}:{frame.f_lineno}"
            raise self.alarm(f"second, place {self.n}: {self.where}")

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code not in self.names:
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        names = self.names[code]
        last = [-1]

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                before = names.get(last[0], "")
                last[0] = frame.f_lasti
                if before in SIGNAL_CHECKS:
                    self.hit(frame, f"after {before}")
            return local

        self.hit(frame, "start")
        return local


def entering(name: str, caller: CodeType) -> Callable[[FrameType, str, Any], bool]:
    """`TwoAlarms`'s ``first``: as function ``name`` begins, called from ``caller``."""

    def first(frame: FrameType, event: str, arg: Any) -> bool:
        return (
            event == "call"
            and frame.f_code.co_name == name
            and frame.f_back is not None
            and frame.f_back.f_code is caller
        )

    return first


def current_frame(thread_id: int | None) -> FrameType | None:
    """The innermost Python frame of the thread ``thread_id`` now (None: no such thread).

    `sys._current_frames()` with the garbage collector off: on CPython 3.11 a collection
    started by the dict it builds runs while it holds the runtime's thread-list lock, and
    a finalizer or the collector's own look at the threads then waits for that lock for
    ever, the GIL held: the whole process hung (CPython gh-106883, fixed in 3.12). Seen in
    CI: the thread polling where the main thread waits hung test_fair_interrupts."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames().get(thread_id or 0)
    finally:
        if enabled:
            gc.enable()
