"""A signal handler raising while the sync client takes a connection from its pool or gives
one back (redis-py's BlockingConnectionPool, on the caller's thread: a signal handler runs
only there) must not leave the pool unusable: another thread then still gets a connection
at once. With ``queue.LifoQueue`` as the pool's queue, a handler raising as its
``threading.Condition.__exit__`` began (or after its ``__enter__`` took the lock) left the
queue's mutex held, and every later command of the client (a background clean-up's, a
renewal's) waited for it for ever.

Deterministic: a tracer raises ``Alarm`` at the n-th place a handler can run (as a frame
begins, after a call returns, at a backward jump), one run per place, in ``get_connection``
and ``release`` and everything they call."""

from __future__ import annotations

import dis
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
import redis

import tenure
from support.servers import Server

AFTER = {"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
"""Instructions after which CPython 3.11+ may run a pending signal handler; a frame's first
instruction (after its RESUME) too."""


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def alarm_at(n: int) -> tuple[Callable[..., Any], list[str]]:
    """A `sys.settrace` tracer raising ``Alarm`` at the ``n``-th place a handler can run, in
    every frame of the calling thread; and where it raised (empty if there were fewer)."""
    last: dict[tuple[int, Any], int] = {}
    seen = [0]
    where: list[str] = []

    def place(frame: FrameType) -> bool:
        key = (id(frame), frame.f_code)
        prev = last.get(key)
        last[key] = frame.f_lasti
        code = frame.f_code.co_code
        return prev is None or (0 <= prev < len(code) and dis.opname[code[prev]] in AFTER)

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode" and not where and place(frame):
            seen[0] += 1
            if seen[0] == n:
                where.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
                raise Alarm(where[0])
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return local

    return tracer, where


def usable(pool: Any) -> bool:
    """True if another thread gets a connection of ``pool`` and gives it back within 2 s (a
    daemon thread: one stuck on a jammed pool must not hold the run up at its end)."""
    done = threading.Event()

    def borrow() -> None:
        conn = pool.get_connection()
        pool.release(conn)
        done.set()

    threading.Thread(target=borrow, daemon=True).start()
    return done.wait(2)


@pytest.mark.parametrize("step", ["get_connection", "release"])
def test_a_signal_anywhere_in_the_pool_leaves_it_usable(
    make_client: Callable[..., tenure.Client], server: Server, step: str
) -> None:
    # The pool class a client made from a URL uses; a fresh pool per run (a run may lose a
    # connection it took: the interrupt came after get() returned it).
    redis_client = make_client().redis
    assert isinstance(redis_client, redis.Redis)
    pool_class = type(redis_client.connection_pool)
    stuck: list[str] = []
    n = 0
    while not stuck:
        n += 1
        pool = pool_class.from_url(server.url, max_connections=100, timeout=None)
        try:
            taken = pool.get_connection()
            pool.release(taken)  # one made and connected
            if step == "release":
                taken = pool.get_connection()
            tracer, where = alarm_at(n)
            sys.settrace(tracer)
            try:
                if step == "get_connection":
                    taken = pool.get_connection()
                else:
                    pool.release(taken)
            except Alarm:
                pass
            finally:
                sys.settrace(None)
            if not where:  # fewer places than n: every one was tried
                break
            if not usable(pool):
                stuck.append(where[0])
        finally:
            pool.disconnect()
    print(f"{step}: {n - 1} places")
    assert n > 10, "the tracer met no place"
    assert not stuck, f"the pool's queue stayed locked after an interrupt at {stuck}"
