"""The sync driver's mutex under signals: a handler that raises while a thread waits to take
the listener's mutex back (after reading the socket with it let go, or leaving a channel)
gives the caller the handler's exception with the mutex in a known state, never
``RuntimeError: release unlocked lock`` (docs/internals.md, "Signals").

Deterministic: another thread holds the mutex, waits until the main thread is blocked on
it in the function under test, then sends SIGALRM to the main thread."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from support.signals import current_frame
from tenure._concurrency import Mutex, Steady, Unlocked


class Alarm(Exception):
    """What the test's SIGALRM handler raises."""


@pytest.fixture
def alarmed() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise Alarm("alarm")

    previous = signal.signal(signal.SIGALRM, handler)
    yield
    signal.signal(signal.SIGALRM, previous)


def blocked_in(thread_id: int, function: str, seconds: float = 5.0) -> bool:
    """True once ``thread_id``'s innermost Python frame is ``function`` (blocked in a C call
    made from it, e.g. a lock's acquire) for 20 ms in a row."""
    deadline = time.monotonic() + seconds
    since = None
    while time.monotonic() < deadline:
        frame = current_frame(thread_id)
        if frame is not None and frame.f_code.co_name == function:
            since = since or time.monotonic()
            if time.monotonic() - since >= 0.02:
                return True
        else:
            since = None
        time.sleep(0.001)
    return False


def hold_then_signal(
    mutex: Any, function: str
) -> tuple[threading.Thread, threading.Event, dict[str, bool]]:
    """A thread that takes ``mutex``, then once the main thread is blocked in ``function``
    sends it SIGALRM and lets the mutex go 50 ms later. Returns it, the event set once it
    holds the mutex, and ``{"blocked": the main thread was seen blocked there}``."""
    main = threading.main_thread().ident
    assert main is not None
    holding = threading.Event()
    state: dict[str, bool] = {}

    def run() -> None:
        with mutex:
            holding.set()
            state["blocked"] = blocked_in(main, function)
            signal.pthread_kill(main, signal.SIGALRM)
            time.sleep(0.05)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, holding, state


def free(mutex: Any) -> bool:
    """True if another thread can take ``mutex`` now (nobody holds it)."""
    box: list[bool] = []

    def take() -> None:
        got = mutex.acquire(timeout=1)
        if got:
            mutex.release()
        box.append(got)

    thread = threading.Thread(target=take)
    thread.start()
    thread.join(5)
    return box == [True]


@pytest.mark.usefixtures("alarmed")
def test_a_handler_raising_while_the_mutex_is_taken_back_reaches_the_caller() -> None:
    mutex = Mutex()
    raised: list[BaseException] = []
    try:
        # As the listener's reader: its mutex let go around its read.
        with mutex, Unlocked(mutex):
            helper, holding, state = hold_then_signal(mutex, "__exit__")
            assert holding.wait(5)
    except BaseException as error:  # what reached the caller, whatever it is
        raised.append(error)
    helper.join(5)
    assert state == {"blocked": True}
    assert [type(e) for e in raised] == [Alarm], raised  # not RuntimeError
    assert free(mutex)  # taken back, then let go by the caller's with


@pytest.mark.usefixtures("alarmed")
def test_a_steady_block_runs_whole_and_raises_the_handlers_exception_after() -> None:
    mutex = Mutex()
    ran: list[bool] = []
    helper, holding, state = hold_then_signal(mutex, "__enter__")
    assert holding.wait(5)
    started = time.monotonic()
    with pytest.raises(Alarm), Steady(mutex) as steady:  # noqa: PT012 - the block
        ran.append(True)
        steady.rethrow()
    helper.join(5)
    assert state == {"blocked": True}
    assert ran == [True]
    assert time.monotonic() - started >= 0.04  # it waited for the holder to let go
    assert free(mutex)
