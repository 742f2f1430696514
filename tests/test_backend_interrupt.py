"""The backend's clean-up of a call that failed or was interrupted on its connection
(`tenure.sync.backend.Backend._on`): a second interrupt anywhere in it, and a server that
never answers its background reader.

A first interrupt (a signal handler's exception, sync API) lands as the call's reply is
about to be read: a plain script's (its connection is dropped and given back) or a script
with ``settle``'s (a plain Semaphore acquire: its reply is read in the background, which
gives back the permit it took). A second interrupt at each place of the clean-up that
follows, one place per run, must leave no connection out of the pool and, for the acquire,
the permit back once. Before, one landing after the clean-up took the call's reply state
and before it spawned the reader (or dropped the connection) lost both: the connection
stayed out of the pool for good and the permit stayed taken.

Deterministic: a profiler raises the first ``Alarm`` as the reply read begins; a tracer
raises the second at the n-th place a handler could run (as a frame begins, after a call
returns, at a backward jump) in the clean-up's code, on a real server."""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

import tenure
import tenure._redis
from support.signals import TwoAlarms, entering
from support.twins import async_wait_until, wait_until
from tenure import _concurrency
from tenure._settle import settle_read_bound
from tenure.sync import backend

CODES = {
    backend.Backend._on.__code__,
    _concurrency.Spawner.spawn.__code__,
    _concurrency._start.__code__,
}
"""The clean-up's code in the caller's thread: the except branch of ``_on`` and the spawn of
its background work (which runs in a thread of its own, where no handler runs)."""


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def out_of_pool(client: Any) -> list[Any]:
    """The connections the client's pool lent that are neither back in it nor the backend's
    spares (sync: redis-py's BlockingConnectionPool; asyncio: its ConnectionPool)."""
    runner = client._runner
    pool = runner.route.client.connection_pool
    spare = {id(c) for c in runner.backend.spare}
    if hasattr(pool, "_in_use_connections"):  # asyncio
        return [c for c in pool._in_use_connections if id(c) not in spare]
    free = {id(c) for c in pool.pool.queue if c is not None}
    return [c for c in pool._connections if id(c) not in free and id(c) not in spare]


def twice_in_pool(client: Any) -> bool:
    """A connection in the sync pool's free list twice: it would be lent to two callers."""
    queue = [c for c in client._runner.route.client.connection_pool.pool.queue if c is not None]
    return len({id(c) for c in queue}) != len(queue)


@pytest.mark.parametrize("kind", ["script", "settle"])
def test_a_second_interrupt_in_a_failed_calls_clean_up_leaks_no_connection(
    make_client: Callable[..., tenure.Client], r: redis.Redis, kind: str
) -> None:
    if kind == "script":  # a plain script's reply (SemaphoreCore.available_permits)
        first = entering("read_response", backend.Backend._script.__code__)
    else:  # a script with settle: a plain Semaphore acquire's
        first = entering("read_kept", backend.Backend._kept.__code__)
    leaked: list[str] = []
    kept: list[str] = []
    n = 0
    while True:
        client = make_client()
        name = f"backend-interrupt-{kind}-{n}"
        sem = client.semaphore(name)
        assert sem.try_set_permits(1)
        assert sem.acquire(timeout=5)  # the scripts cached (no NOSCRIPT), a connection made
        sem.release()
        assert sem.available_permits() == 1
        acquire = functools.partial(sem.acquire, 1, timeout=5)
        call = sem.available_permits if kind == "script" else acquire
        tracer = TwoAlarms(n, first, CODES, Alarm, skip_handler_entry=True)
        sys.settrace(tracer.trace)
        sys.setprofile(tracer.profile)
        try:
            with pytest.raises(Alarm) as raised:
                call()
        finally:
            sys.settrace(None)
            sys.setprofile(None)
        assert tracer.fired >= 1, "the first alarm never fired"
        if tracer.fired == 2:  # the caller gets the second
            assert raised.value.args[0].startswith("second"), raised.value
        if not wait_until(lambda client=client: not out_of_pool(client), 2.0):
            leaked.append(f"place {n} ({tracer.where}): {len(out_of_pool(client))} out")
        assert not twice_in_pool(client), f"place {n} ({tracer.where})"
        if kind == "settle" and not wait_until(lambda key=name: r.get(key) == b"1", 2.0):
            kept.append(f"place {n} ({tracer.where}): count {r.get(name)!r}")
        client.close()
        if tracer.fired < 2:  # no place left after the first alarm
            break
        n += 1
        assert n < 200
    print(f"{kind}: {n} places, {len(leaked)} leaked, {len(kept)} kept")
    assert leaked == [], leaked
    assert kept == [], kept
    assert n >= 5, n  # the clean-up was traced


def test_a_background_reader_on_a_client_without_socket_timeout_gives_up(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    """``socket_timeout=None``: the first interrupt lands as a Semaphore acquire's reply is
    awaited on a paused server; its background reader gives the connection up after the
    bound (`settle_read_bound`: the watchdog lease, 1 s here), not when the server answers
    (5 s; before, never for a server that never does)."""
    client = make_client(socket_timeout=None, watchdog_timeout=1.0)
    bound = settle_read_bound(client._runner.ctx)
    assert bound == 1.0
    sem = client.semaphore("reader-bound")
    assert sem.try_set_permits(1)
    first = entering("read_kept", backend.Backend._kept.__code__)
    tracer = TwoAlarms(10**6, first, CODES, Alarm, skip_handler_entry=True)  # the first alarm only
    r.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
    try:
        sys.setprofile(tracer.profile)
        try:
            with pytest.raises(Alarm):
                sem.acquire(timeout=5)
        finally:
            sys.setprofile(None)
        started = time.monotonic()
        assert out_of_pool(client)  # the reader has it, waiting for the reply
        assert wait_until(lambda: not out_of_pool(client), bound + 1.5)
        waited = time.monotonic() - started
        print(f"the background reader gave up after {waited:.3f} s")
        assert waited >= bound * 0.9
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
    # Its outcome unknown, the acquire's permit is not given back (docs/primitives/
    # semaphore.md): the count is the server's to say, never above the permits set.
    assert r.get("reader-bound") in (b"0", b"1")


async def test_an_asyncio_acquire_left_in_flight_without_socket_timeout_gives_up(
    server: Any, r: redis.Redis
) -> None:
    """The same in asyncio: an acquire cancelled while its script waits on a paused server
    (its task reads the reply, `tenure._settle`) gives the connection up after at most
    twice the bound (the task's call is cut, then the backend's background reader waits
    the bound again), not when the server answers (6 s; before, never for a server that
    never does)."""
    client = tenure.AsyncClient(server.url, socket_timeout=None, watchdog_timeout=1.0)
    try:
        bound = settle_read_bound(client._runner.ctx)
        sem = client.semaphore("reader-bound-aio")
        assert await sem.try_set_permits(1)
        assert await sem.available_permits() == 1  # a connection made
        r.execute_command("CLIENT", "PAUSE", 6000, "WRITE")
        try:
            task = asyncio.ensure_future(sem.acquire(timeout=5))
            assert await async_wait_until(lambda: bool(out_of_pool(client)), 2.0)
            assert await async_wait_until(lambda: script_waits(r), 2.0)  # its reply awaited
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            started = time.monotonic()
            assert out_of_pool(client)  # the acquire's task still reads the reply
            assert await async_wait_until(lambda: not out_of_pool(client), 2 * bound + 1.0)
            waited = time.monotonic() - started
            print(f"the acquire's connection was given up after {waited:.3f} s")
            assert waited >= bound * 0.9
        finally:
            r.execute_command("CLIENT", "UNPAUSE")
        assert r.get("reader-bound-aio") in (b"0", b"1")
    finally:
        await client.close()


def script_waits(r: redis.Redis) -> bool:
    """A script waits on the paused server (its connection flagged ``b``)."""
    return any(
        entry.get("cmd") in ("evalsha", "eval") and "b" in entry["flags"]
        for entry in r.client_list()
    )
