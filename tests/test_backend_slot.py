"""One interrupt (a signal handler's exception, sync API) anywhere while the backend takes a
connection for a call or gives it back must leave it neither out of the pool for good nor
in it twice (`tenure.sync.backend.Backend`, tenure's `tenure._redis.BlockingPool`).

Before, a connection taken (from the pool, or a spare) was the caller's only once its
``try`` held it, and the pool's again only once redis-py's ``release`` had put it back: one
landing in between (after ``pool.get_connection()`` or ``spare.pop()`` returned, inside
redis-py's lending after its queue gave the connection out, as a spare found dirty was
given back) lost it, and with a bounded pool a few such interrupts left every later call
waiting for a connection that never comes back.

Deterministic: a tracer raises ``Alarm`` at the n-th place a handler could run (as a frame
begins, after a call returns, at a backward jump) in the code that lends and gives back,
one place per run, on a real server: a plain script (a spare connection, a pool's, a spare
found dirty) and a MultiLock acquire (scripts sent on two connections, then read)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import CodeType
from typing import Any

import pytest
import redis

import tenure
from support.signals import SIGNAL_CHECKS, raising_at_place
from support.twins import wait_until
from tenure import _concurrency, _redis
from tenure.sync import backend


def _code(function: Any) -> CodeType:
    return getattr(function, "__wrapped__", function).__code__


CODES = {
    backend.Backend._on.__code__,
    backend.Backend._connection.__code__,
    backend.Backend._done.__code__,
    backend.Backend.send.__code__,
    backend.Backend.receive.__code__,
    _redis.SignalSafeLifo.get.__code__,
    _redis.SignalSafeLifo.put_nowait.__code__,
    _redis.idle.__code__,
    _redis.torn.__code__,
    _code(redis.BlockingConnectionPool.get_connection),
    redis.BlockingConnectionPool.get_connection.__code__,  # its deprecation wrapper (5.3+)
    _code(redis.BlockingConnectionPool.release),
    _code(redis.BlockingConnectionPool.make_connection),
    _concurrency.Spawner.spawn.__code__,
    _concurrency._start.__code__,
} | {
    getattr(_redis.BlockingPool, name).__code__
    for name in vars(_redis.BlockingPool)
    if callable(getattr(_redis.BlockingPool, name)) and hasattr(
        getattr(_redis.BlockingPool, name), "__code__"
    )
}
"""The code that lends a connection to the call and takes it back, in the caller's thread
(redis-py's pool methods, and the wrapper redis-py 5.3+ puts around ``get_connection``)."""


class Alarm(BaseException):
    """What the stand-in for a signal handler raises (a BaseException, as
    KeyboardInterrupt)."""


def out_of_pool(client: tenure.Client) -> list[Any]:
    """The connections the client's pool lent that are neither back in it nor spares."""
    runner = client._runner
    pool = runner.route.client.connection_pool
    spare = {id(c) for c in runner.backend.spare}
    free = {id(c) for c in pool.pool.queue if c is not None}
    return [c for c in pool._connections if id(c) not in free and id(c) not in spare]


def places_lost(client: tenure.Client) -> int:
    """Places of the pool neither free (a connection, or None: one not made yet) nor
    held by a connection out of it: lost for good (the pool makes at most
    ``max_connections``)."""
    pool = client._runner.route.client.connection_pool
    return int(pool.max_connections - len(pool.pool.queue) - len(lent_connections(client)))


def lent_connections(client: tenure.Client) -> list[Any]:
    """The pool's connections not in its free list (spares and in-flight ones too)."""
    pool = client._runner.route.client.connection_pool
    free = {id(c) for c in pool.pool.queue if c is not None}
    return [c for c in pool._connections if id(c) not in free]


def twice(client: tenure.Client) -> bool:
    """A connection twice among the free list and the spares: lent to two callers."""
    runner = client._runner
    queue = [c for c in runner.route.client.connection_pool.pool.queue if c is not None]
    both = queue + list(runner.backend.spare)
    return len({id(c) for c in both}) != len(both)


def dirty(client: tenure.Client) -> None:
    """Make the spare connections dirty: a reply left unread on each (and come in, so
    that the look before a spare is used sees it)."""
    for conn in client._runner.backend.spare:
        conn.send_command("PING")
    for conn in client._runner.backend.spare:
        assert conn.can_read(timeout=5)


@pytest.mark.parametrize("kind", ["spare", "pool", "dirty", "multi"])
def test_an_interrupt_while_a_connection_is_lent_or_given_back_loses_none(
    make_client: Callable[..., tenure.Client], r: redis.Redis, kind: str
) -> None:
    lost: list[str] = []
    doubled: list[str] = []
    n = 0
    while True:
        client = make_client()
        sem = client.semaphore(f"slot-{kind}-{n}")
        assert sem.try_set_permits(1)
        a, b = client.lock(f"slot-{kind}-{n}-a"), client.lock(f"slot-{kind}-{n}-b")
        multi = client.multi_lock(a, b)
        assert multi.acquire(timeout=5)  # scripts cached, two connections made (spares)
        multi.release()
        assert sem.available_permits() == 1
        call: Callable[[], Any] = sem.available_permits
        if kind == "pool":  # the spares back in the pool: the call takes one from it
            spare = client._runner.backend.spare
            while spare:
                client._runner.route.client.connection_pool.release(spare.pop())
        elif kind == "dirty":  # a spare found dirty goes back to the pool
            dirty(client)
        elif kind == "multi":
            call = functools.partial(multi.acquire, timeout=5)
        armed = [True]
        tracer, _ = raising_at_place(
            n, CODES, SIGNAL_CHECKS, lambda f, w: Alarm(f"{w} {f.f_code.co_name}:{f.f_lineno}"),
            at_start=True, armed=armed,
        )
        raised: BaseException | None = None
        sys.settrace(tracer)
        try:
            call()
        except Alarm as alarm:
            raised = alarm
        finally:
            armed[0] = False
            sys.settrace(None)
        at = f"place {n} ({raised})"
        if raised is not None:
            if not wait_until(lambda client=client: not out_of_pool(client), 3.0):
                lost.append(f"{at}: {len(out_of_pool(client))} out")
            # A clean-up left to the background (a MultiLock member's release) may be taking
            # a place as we look (popped from the free list, its connection not made yet):
            # lost for good is a place still missing once it is done.
            elif not wait_until(lambda client=client: not places_lost(client), 3.0):
                lost.append(f"{at}: {places_lost(client)} places lost")
        if twice(client):
            doubled.append(at)
        client.close()
        if raised is None:  # no place left: the call ran to its end
            break
        n += 1
        assert n < 400
    print(f"{kind}: {n} places, {len(lost)} lost, {len(doubled)} twice")
    assert lost == [], lost
    assert doubled == [], doubled
    assert n >= 5, n
