"""Plain Semaphore permits taken by a sync acquire whose caller was interrupted (a signal
handler that raises) while its script was in flight come back (issue 23 item 7): the driver
keeps the connection, reads the reply and gives back what it took (``Call.settle``). No
twin in tests/_sync: a signal reaches the main thread only; the asyncio side
(cancellations) is tests/process/test_semaphore_cancelled.py."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from support.twins import wait_until

PERMITS = 2
TENURE_SRC = str(Path(tenure.__file__).parent)
TENURE_TESTING = str(Path(tenure.__file__).parent / "testing")


class Interrupted(BaseException):
    """A SIGALRM handler's exception, a BaseException as KeyboardInterrupt."""


def in_tenure(frame: Any) -> bool:
    """True while a frame of tenure's own source is on the interrupted stack."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(TENURE_SRC) and not name.startswith(TENURE_TESTING):
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def alarm() -> Iterator[Callable[[type[BaseException]], dict[str, int]]]:
    """``alarm(error)``: SIGALRM raises ``error`` while the main thread is inside tenure
    (once acquire returned, the permits are the caller's); returns the landing counts."""

    def arm(error: type[BaseException]) -> dict[str, int]:
        landed = {"tenure": 0, "caller": 0}

        def interrupt(signum: int, frame: Any) -> None:
            if in_tenure(frame):
                landed["tenure"] += 1
                raise error("alarm")
            landed["caller"] += 1

        signal.signal(signal.SIGALRM, interrupt)
        return landed

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    previous = signal.getsignal(signal.SIGALRM)
    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_an_acquire_interrupted_with_its_script_in_flight_gives_the_permits_back(
    alarm, make_client, r
) -> None:
    """The caller is interrupted while its acquire script waits behind a busy one: the
    script then runs and takes the permits; the reply, read in the background after the
    interruption, gives them back (before: the connection was dropped with the reply)."""
    name = "interrupted-in-flight"
    alarm(Interrupted)
    sem = make_client().semaphore(name)
    sem.set_permits(PERMITS)
    assert sem.acquire(2, blocking=False)  # the script is cached: EVALSHA runs it
    sem.release(2)
    busy = threading.Thread(target=r.eval, args=(BUSY, 0, 300))
    busy.start()
    time.sleep(0.05)  # the server is running the busy script
    signal.setitimer(signal.ITIMER_REAL, 0.05)  # lands while the reply is awaited
    with pytest.raises(Interrupted):
        sem.acquire(2)
    busy.join(5)
    assert wait_until(lambda: r.get(name) == str(PERMITS).encode(), 0.5, 0.01), (
        f"{r.get(name)!r} of {PERMITS} permits available"
    )


BUSY = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
    t = redis.call('TIME')
until t[1] * 1000000 + t[2] - start > tonumber(ARGV[1]) * 1000
return 1
"""
"""Keeps the server busy for ARGV[1] ms: a script sent meanwhile waits, in flight."""
