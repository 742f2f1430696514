"""A signal handler that raises while the sync driver starts a background thread (the
watchdog, a give-back) must not kill that thread: `tenure._concurrency.Spawner` holds the
process's signals back from the main thread until the thread has started.

Seen in CI: SIGALRM raised as ``_start_new_thread()`` returned, ``Thread.start()`` took the
started thread off its table and the new ``tenure-watchdog`` thread died with a KeyError."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

from tenure._concurrency import Spawner, _signals_held


class Alarm(Exception):
    pass


@pytest.fixture
def alarm_raises():
    def handler(signum: int, frame: Any) -> None:
        raise Alarm("alarm")

    old = signal.signal(signal.SIGALRM, handler)
    yield
    signal.signal(signal.SIGALRM, old)


def test_a_signal_while_signals_are_held_runs_its_handler_after(alarm_raises) -> None:
    steps: list[str] = []
    with pytest.raises(Alarm):  # noqa: PT012 - the step before the handler is the point
        with _signals_held():
            os.kill(os.getpid(), signal.SIGALRM)
            steps.append("held")  # the handler did not run inside
        steps.append("after")
    assert steps == ["held"]


def test_a_thread_started_while_a_signal_arrives_runs(alarm_raises) -> None:
    ran = threading.Event()

    def body() -> None:
        ran.set()

    spawner = Spawner("tenure-test")
    real_start = threading.Thread.start

    def start_with_a_signal(self: threading.Thread) -> None:
        os.kill(os.getpid(), signal.SIGALRM)  # pending until the thread has started
        real_start(self)

    threading.Thread.start = start_with_a_signal  # type: ignore[method-assign]
    try:
        with pytest.raises(Alarm):
            spawner.spawn(body)
    finally:
        threading.Thread.start = real_start  # type: ignore[method-assign]
    assert ran.wait(5)
