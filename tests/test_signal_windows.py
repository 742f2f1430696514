"""Every bytecode window of the sync mutex helpers, in turn: a signal handler runs between
bytecodes (as a Python function begins, after a call returns), so a tracer that raises at
each trace event of `Steady` and `Unlocked` (and of the code that uses them the way
the listener does) stands for a handler raising there. After each, the mutex must be free
(never left held by the interrupted thread, which would then wait on itself in its next
``Steady``, and starve the janitor) and another thread must take it within 1 s; the only
exception the caller may see is the handler's (docs/internals.md, "Signals").

Deterministic: no timers, no servers; one run per trace event."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import pytest

from support.signals import raising_at_place
from tenure._concurrency import Mutex, Spawner, Steady, Unlocked


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def codes_of(cls: type) -> set[CodeType]:
    """The code objects of ``cls``'s own functions (and property getters)."""
    out: set[CodeType] = set()
    for value in vars(cls).values():
        if isinstance(value, property) and value.fget is not None:
            value = value.fget
        code = getattr(value, "__code__", None)
        if code is not None:
            out.add(code)
    return out


AFTER = {"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
"""Instructions after which CPython checks for pending signals (3.11-3.13: the eval
breaker is checked after a call returns and at a backward jump; and as a function
begins, the 'call' event here)."""


def raising_at(n: int, codes: set[CodeType]) -> tuple[Callable[..., Any], list[int]]:
    """A tracer that raises Alarm at the ``n``-th place where a signal handler could run
    in a frame of one of ``codes``: as the frame begins, or at the instruction after a
    call (or a backward jump); and a list that counts the places seen."""

    def alarm(frame: FrameType, where: str) -> Alarm:
        return Alarm(f"at place {n}: {where} {frame.f_code.co_name}:{frame.f_lineno}")

    return raising_at_place(n, codes, AFTER, alarm, at_start=True)


def free_for_others(mutex: Any) -> bool:
    """True if another thread takes ``mutex`` within 1 s (it lets it go at once)."""
    got: list[bool] = []

    def take() -> None:
        if mutex.acquire(timeout=1.0):
            got.append(True)
            mutex.release()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join(2.0)
    return bool(got)


def leave_steadily(mutex: Any, done: list[str]) -> None:
    """As the listener leaves a channel: ``with Steady(mutex) as s: ...; s.rethrow()``."""
    steady = Steady(mutex)
    with steady:
        done.append("left")
        rethrow = getattr(steady, "rethrow", None)
        if rethrow is not None:
            rethrow()


def read_unlocked(mutex: Any, done: list[str]) -> None:
    """As the listener's reader: under the mutex, let go of it around a read."""
    with mutex:
        unlocked = Unlocked(mutex)
        try:
            with unlocked:
                done.append("read")
        finally:
            retake = getattr(unlocked, "retake", None)
            if retake is not None:
                retake()
        done.append("after")


SCENARIOS = {"steady": leave_steadily, "unlocked": read_unlocked}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_handler_raising_at_any_bytecode_leaves_the_mutex_free(name: str) -> None:
    scenario = SCENARIOS[name]
    codes = codes_of(Steady) | codes_of(Unlocked) | {scenario.__code__}
    n = 0
    outcomes: dict[str, int] = {"alarm": 0, "clean": 0}
    while True:
        mutex = Mutex()
        done: list[str] = []
        tracer, seen = raising_at(n, codes)
        sys.settrace(tracer)
        try:
            scenario(mutex, done)
        except Alarm:
            outcomes["alarm"] += 1
        except BaseException as error:  # anything but the handler's is the bug
            sys.settrace(None)
            pytest.fail(f"event {n}: {error!r} in place of the handler's Alarm")
        else:
            outcomes["clean"] += 1
        finally:
            sys.settrace(None)
        assert not mutex._is_owned(), f"event {n}: the interrupted thread kept the mutex"  # type: ignore[attr-defined]
        assert free_for_others(mutex), f"event {n}: nobody else can take the mutex"
        if seen[0] <= n:  # the tracer never fired: every event was covered
            break
        n += 1
    assert outcomes["alarm"] == n, outcomes
    assert n >= 5, outcomes


def test_steady_holds_a_handler_back_until_the_clean_up_ran() -> None:
    """At each place in ``Steady.__enter__``: a handler that raised before the mutex was
    taken ends the clean-up before it starts (nothing held); one that raised after is
    held back until the block ran. The latter must happen (the acquire is the wait)."""
    n, held_back = 0, 0
    while True:
        mutex = Mutex()
        done: list[str] = []
        tracer, seen = raising_at(n, {Steady.__enter__.__code__})
        sys.settrace(tracer)
        try:
            with pytest.raises(Alarm):  # noqa: PT012 - the block is what is interrupted
                steady = Steady(mutex)
                with steady:
                    done.append("left")
                    steady.rethrow()
                if seen[0] <= n:
                    raise Alarm("no place left")
        finally:
            sys.settrace(None)
        assert not mutex._is_owned()  # type: ignore[attr-defined]
        assert free_for_others(mutex)
        if seen[0] <= n:
            break
        held_back += done == ["left"]
        n += 1
    assert held_back >= 1, (held_back, n)
    assert n >= 2, (held_back, n)


def test_steady_never_waits_on_a_mutex_its_thread_holds() -> None:
    mutex = Mutex()
    with mutex:
        finished = threading.Event()

        def leave() -> None:
            with mutex, Steady(mutex) as steady:  # taken twice by one thread
                steady.rethrow()
            finished.set()

        thread = threading.Thread(target=leave, daemon=True)
        # In this thread: Steady on the mutex it holds returns at once.
        with Steady(mutex) as steady:
            steady.rethrow()
    thread.start()
    assert finished.wait(1.0)
    assert free_for_others(mutex)


def test_a_handler_raising_as_a_thread_starts_does_not_kill_the_thread() -> None:
    # A handler that raises as `threading.Thread.start` returns from its C call makes
    # `start` take the thread off threading's table while it runs: the new thread then
    # dies with KeyError before its target ran (seen in CI: the client's watchdog). A
    # profiler that raises at that C call's return stands for the handler; the Spawner
    # starts the main thread's threads elsewhere, so the work still runs.
    spawner = Spawner("tenure-test")
    ran = threading.Event()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if (
            event == "c_return"
            and getattr(arg, "__name__", "") == "start_new_thread"
            and frame.f_code is threading.Thread.start.__code__
        ):
            sys.setprofile(None)
            raise Alarm("alarm")

    assert threading.current_thread() is threading.main_thread()
    sys.setprofile(profile)
    try:
        spawner.spawn(ran.set)
    except Alarm:
        pass  # the handler's exception may reach the caller: the work must run anyway
    finally:
        sys.setprofile(None)
    assert ran.wait(5.0)


REENTRY = r"""
import signal, sys, threading
from tenure import _concurrency as cc

lines = sorted({n for _, _, n in cc._start.__code__.co_lines() if n is not None})
done = 0
for fresh in (True, False):
    for line in lines:
        if fresh:
            cc._forget_starter()  # the first start makes the starter
        armed, ran = [True], []

        def handler(signum, frame):
            # e.g. a SIGTERM handler releasing a contended lock: the release starts work
            cc.Spawner("handler").spawn(ran.append, "handler")

        def tracer(frame, event, arg):
            if frame.f_code is not cc._start.__code__:
                return None

            def local(frame, event, arg):
                if event == "line" and frame.f_lineno == line and armed[0]:
                    armed[0] = False
                    signal.raise_signal(signal.SIGUSR1)  # runs at the next bytecode
                return local

            return local

        signal.signal(signal.SIGUSR1, handler)
        sys.settrace(tracer)
        task = cc.Spawner("main").spawn(ran.append, "main")
        sys.settrace(None)
        task.task.result(timeout=5)
        for _ in range(500):
            if len(ran) == 2 or armed[0]:
                break
            threading.Event().wait(0.01)
        assert sorted(ran) == (["main"] if armed[0] else ["handler", "main"]), (line, ran)
        done += 1
print("ok", done)
"""


def test_a_handler_starting_work_while_the_main_thread_starts_a_thread_never_hangs() -> None:
    # A signal handler runs in the main thread between bytecodes, so also inside `_start`
    # while it hands a thread to the starter; a handler that starts tenure work of its own
    # (a release's back-up look, a give-back) enters `_start` again. It must neither wait on
    # the main thread itself (a lock held there: a hang for good) nor lose either start.
    # In a child process: a hang fails the test instead of the suite.
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", REENTRY], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok "), done.stdout
    assert int(done.stdout.split()[1]) >= 10
