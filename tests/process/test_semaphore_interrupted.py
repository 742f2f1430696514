"""Plain Semaphore permits taken by a sync acquire whose caller was interrupted (a signal
handler that raises) while its script was in flight come back (issue 23 item 7): the driver
keeps the connection, reads the reply and gives back what it took (``Call.settle``). No
twin in tests/_sync: a signal reaches the main thread only; the asyncio side
(cancellations) is tests/process/test_semaphore_cancelled.py."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from support.twins import wait_until
from tenure import _redis
from tenure.sync import backend as sync_backend

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
    alarm, make_client, r, server, monkeypatch
) -> None:
    """The caller is interrupted while it awaits the reply to its acquire script, sent to
    a server stopped with SIGSTOP: the script then runs and takes the permits; the reply,
    read in the background after the interruption, gives them back (before: the
    connection was dropped with the reply).

    The alarm is set once the script's bytes are written, and the server goes on from
    the handler: nothing waits for a time to pass (a busy script racing a 50 ms sleep
    let the acquire end first on a loaded machine, as its asyncio twin did in CI)."""
    name = "interrupted-in-flight"
    landed = alarm(Interrupted)
    sem = make_client().semaphore(name)
    sem.set_permits(PERMITS)
    assert sem.acquire(2, blocking=False)  # the script is cached: EVALSHA runs it
    sem.release(2)
    send = _redis.send_kept  # how a call with a settle sends its script

    def noting(conn, *args):
        send(conn, *args)
        if args[:1] == ("EVALSHA",):
            signal.setitimer(signal.ITIMER_REAL, 0.05)  # lands while the reply is awaited

    monkeypatch.setattr(sync_backend, "send_kept", noting)
    previous = signal.getsignal(signal.SIGALRM)
    assert callable(previous)  # the alarm fixture's handler

    def resuming(signum: int, frame: Any) -> None:
        server.resume()  # the reply comes once the interruption has landed
        previous(signum, frame)

    signal.signal(signal.SIGALRM, resuming)
    server.pause()
    try:
        with pytest.raises(Interrupted):
            sem.acquire(2)
    finally:
        server.resume()
    assert landed == {"tenure": 1, "caller": 0}
    assert wait_until(lambda: r.get(name) == str(PERMITS).encode(), 0.5, 0.01), (
        f"{r.get(name)!r} of {PERMITS} permits available"
    )


class _AlarmOnGrant(logging.Handler):
    """Raises SIGALRM in the acquiring thread as the driver logs a granted acquire of a
    ``kind``: after its flow returned the grant (a permit: recorded, renewed by the
    watchdog), before the front hands it to the caller."""

    def __init__(self, kind: str) -> None:
        super().__init__(logging.DEBUG)
        self.kind = kind
        self.fired = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if not self.fired and text.startswith(f"acquire {self.kind} ") and (" failed " not in text):
            self.fired += 1
            signal.raise_signal(signal.SIGALRM)  # its handler raises here, in this thread


@contextlib.contextmanager
def alarm_on_grant(kind: str) -> Iterator[_AlarmOnGrant]:
    handler = _AlarmOnGrant(kind)
    logger = logging.getLogger("tenure")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_an_acquire_interrupted_after_its_grant_gives_the_permits_back(
    alarm, make_client, r
) -> None:
    """A plain Semaphore acquire whose caller is interrupted after the flow returned True
    and before the caller got it: nobody will release the permits, so they are given back
    (within 0.5 s)."""
    name = "sem-interrupted-after-grant"
    landed = alarm(Interrupted)
    sem = make_client().semaphore(name)
    sem.set_permits(PERMITS)
    with alarm_on_grant("Semaphore") as handler, pytest.raises(Interrupted):
        sem.acquire(2)
    assert handler.fired == 1
    assert landed["tenure"] == 1, landed
    assert wait_until(lambda: r.get(name) == str(PERMITS).encode(), 0.5, 0.01), (
        f"{r.get(name)!r} of {PERMITS} permits available"
    )


@pytest.mark.parametrize("lease_time", [None, 10.0])
def test_a_permit_acquire_interrupted_after_its_grant_leaves_nothing_held(
    alarm, make_client, r, lease_time
) -> None:
    """A sync PermitExpirableSemaphore acquire whose caller is interrupted (a raising
    SIGALRM handler) after the flow returned the permit and before the caller got it:
    the permit must not stay out, renewed by the watchdog for nobody (before: still in
    ``{name}:timeout`` after 12 s, its score moved on by each renewal). It is back within
    0.5 s, and the client's hold table no longer has it."""
    name = "interrupted-after-grant"
    landed = alarm(Interrupted)
    client = make_client()
    sem = client.permit_expirable_semaphore(name)
    sem.try_set_permits(1)
    with alarm_on_grant("PermitExpirableSemaphore") as handler, pytest.raises(Interrupted):
        sem.acquire(lease_time=lease_time)
    assert handler.fired == 1
    assert landed["tenure"] == 1, landed
    assert wait_until(lambda: sem.available_permits() == 1, 0.5, 0.01), (
        f"{sem.available_permits()} of 1 permit available; out: "
        f"{r.zrange('{' + name + '}:timeout', 0, -1, withscores=True)}"
    )
    assert not client._runner.ctx.holds.watchdog_holds(), "a permit nobody has is renewed"
