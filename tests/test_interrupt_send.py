"""A signal handler raising (sync API) while the shared pub/sub connection's driver sends a
command the channel table counted (a SUBSCRIBE whose answer is then awaited): the table's
count must stay true, whatever the place, and the interrupt is logged as what it was.

Before: an interrupt after `Listening.subscribing()` counted a SUBSCRIBE and before it was
sent left the lingering channel waiting for an answer that never came; the next waiter on
that channel raised "no confirmation of SUBSCRIBE" after 5 s. An interrupt inside the write
(redis-py drops the socket) was taken by the next read for a lost connection (a WARNING).

A tracer raises at each place a handler could run (tests/test_signal_windows.py) in the
driver's send path, one place per run, on a real server."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
import redis
from test_signal_windows import Alarm, raising_at

import tenure
from tenure import _redis
from tenure.sync import listener

# A long fault run: deselected by default, run by .ci/run (`pytest -m long`).
pytestmark = pytest.mark.long


class Holder:
    """A thread that holds ``lock`` until `release_in()` (a lock is released by its owner)."""

    def __init__(self, lock: Any) -> None:
        self.held, self.go = threading.Event(), threading.Event()
        self.after = 0.0
        self.thread = threading.Thread(target=self.run, args=(lock,))
        self.thread.start()
        assert self.held.wait(5)

    def run(self, lock: Any) -> None:
        assert lock.acquire()
        self.held.set()
        self.go.wait(30)
        time.sleep(self.after)
        lock.release()

    def release_in(self, seconds: float) -> None:
        self.after = seconds
        self.go.set()


def connect_pubsub(client: tenure.Client, make_client: Callable[..., tenure.Client]) -> None:
    """Make ``client``'s pub/sub connection (its janitor sends the first SUBSCRIBE; the
    waiters send the later ones themselves: those are the sends under test)."""
    holder = Holder(make_client().lock("warm-up"))
    assert not client.lock("warm-up").acquire(timeout=0.2)
    holder.release_in(0)
    holder.thread.join(5)


def test_an_interrupt_at_any_place_of_a_subscribe_send_leaves_a_true_count(
    make_client: Callable[..., tenure.Client], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tenure")
    client = make_client()
    connect_pubsub(client, make_client)
    codes = {
        listener.Listener._subscribe_send.__code__,
        listener.Listener._send.__code__,
        _redis.send_command.__code__,
    }
    n, slow = 0, []
    while True:
        name = f"count-{n}"
        holder = Holder(make_client().lock(name))
        tracer, seen = raising_at(n, codes)
        sys.settrace(tracer)
        try:
            client.lock(name).acquire(timeout=5)
        except Alarm:
            pass
        finally:
            sys.settrace(None)
        # At once, while the channel lingers: the next waiter of this client on it.
        holder.release_in(0.2)
        started = time.monotonic()
        try:
            got = client.lock(name).acquire(timeout=10)
        except tenure.BackendError as error:
            got, took = False, f"{error}"
        else:
            took = f"{time.monotonic() - started:.2f} s"
        holder.thread.join(5)
        if not got or time.monotonic() - started > 3.0:
            slow.append(f"place {n}: {took}")
        else:
            client.lock(name).release()
        if seen[0] <= n:  # no place left
            break
        n += 1
        assert n < 100
    assert not slow, f"{len(slow)} of {n + 1} places: " + "; ".join(slow)
    assert n >= 3
    lost = [r.getMessage() for r in caplog.records if "connection lost" in r.getMessage()]
    assert lost == []


def test_an_interrupt_inside_the_write_is_no_connection_loss(
    make_client: Callable[..., tenure.Client],
    r: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A handler raising as the SUBSCRIBE's sendall returns: redis-py drops the socket.
    caplog.set_level(logging.DEBUG, logger="tenure")
    client = make_client()
    connect_pubsub(client, make_client)
    holder = Holder(make_client().lock("written"))
    fired: list[str] = []

    def in_subscribe_send(frame: FrameType | None) -> bool:
        while frame is not None:
            if frame.f_code is listener.Listener._subscribe_send.__code__:
                return True
            frame = frame.f_back
        return False

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if (
            not fired
            and event == "c_return"
            and getattr(arg, "__name__", "") == "sendall"
            and in_subscribe_send(frame)
        ):
            fired.append(frame.f_code.co_name)
            sys.setprofile(None)
            raise Alarm("alarm")

    sys.setprofile(profile)
    try:
        with pytest.raises(Alarm):
            client.lock("written").acquire(timeout=5)
    finally:
        sys.setprofile(None)
    assert fired
    holder.release_in(0.2)
    assert client.lock("written").acquire(timeout=10)
    holder.thread.join(5)
    messages = [(rec.levelno, rec.getMessage()) for rec in caplog.records]
    assert [m for lv, m in messages if lv >= logging.WARNING] == [], messages
    assert any("interrupt" in m for lv, m in messages if lv == logging.DEBUG), messages
