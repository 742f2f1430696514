"""The backend's clean-up of a script sent by `tenure.sync.backend.Backend.send()` or read
by `~tenure.sync.backend.Backend.receive()` (a MultiLock's rounds: every member's script
sent, then every reply read) that failed or was interrupted: a second interrupt anywhere
in it must leave no connection out of the pool and none in it twice (it would be lent to
two callers).

Before, both dropped the connection inline (`Backend._drop`): a second interrupt (a signal
handler raising) as that began, or in redis-py's ``pool.release`` before the connection
was put back, lost it for good. Now they give it up as `Backend._on` does: the socket
closed inline, given back once in the background (`Backend._give_up`), where no signal
handler runs; the clean-up run again from the top when interrupted.

Deterministic: a profiler raises the first ``Alarm`` as the reply read (or the script's
send) begins; a tracer (as `support.signals.raising_at_place`, but no place at an exception
handler's entry) raises the second at the n-th place a handler could run (as a frame
begins, after a call returns, at a backward jump) in the clean-up's code, one place per
run, on a real server."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import redis

import tenure
from support.signals import TwoAlarms, entering
from support.twins import wait_until
from tenure import _concurrency, _redis
from tenure.sync import backend

CODES = {
    backend.Backend.send.__code__,
    backend.Backend.receive.__code__,
    backend.Backend._drop.__code__,
    _redis.BlockingPool.release.__code__,
    _concurrency.Spawner.spawn.__code__,
    _concurrency._start.__code__,
}
"""The clean-up's code in the caller's thread: the except branches of ``send`` and
``receive``, the connection's give-back (inline before: ``_drop`` and redis-py's
``release``) and the spawn of the background work (a thread of its own: not traced)."""


class Alarm(BaseException):
    """What the stand-in for a signal handler raises (a BaseException, as
    KeyboardInterrupt: the MultiLock's rounds take it for an interrupt)."""


def out_of_pool(client: tenure.Client) -> list[Any]:
    """The connections the client's pool lent that are neither back in it nor spares."""
    runner = client._runner
    pool = runner.route.client.connection_pool
    spare = {id(c) for c in runner.backend.spare}
    free = {id(c) for c in pool.pool.queue if c is not None}
    return [c for c in pool._connections if id(c) not in free and id(c) not in spare]


def twice_in_pool(client: tenure.Client) -> bool:
    """A connection in the pool's free list twice: it would be lent to two callers."""
    queue = [c for c in client._runner.route.client.connection_pool.pool.queue if c is not None]
    return len({id(c) for c in queue}) != len(queue)


@pytest.mark.parametrize("where", ["send", "receive"])
def test_a_second_interrupt_in_a_sent_scripts_clean_up_leaks_no_connection(
    make_client: Callable[..., tenure.Client], r: redis.Redis, where: str
) -> None:
    if where == "send":
        first = entering("send_command", backend.Backend.send.__code__)
    else:
        first = entering("read_reply", backend.Backend.receive.__code__)
    leaked: list[str] = []
    twice: list[str] = []
    n = 0
    while True:
        client = make_client()
        a, b = client.lock(f"drop-{where}-{n}-a"), client.lock(f"drop-{where}-{n}-b")
        multi = client.multi_lock(a, b)
        assert multi.acquire(timeout=5)  # scripts cached, connections made, server trusted
        multi.release()
        tracer = TwoAlarms(n, first, CODES, Alarm, skip_handler_entry=True)
        sys.settrace(tracer.trace)
        sys.setprofile(tracer.profile)
        try:
            with pytest.raises(Alarm):
                multi.acquire(timeout=5)
        finally:
            sys.settrace(None)
            sys.setprofile(None)
        assert tracer.fired >= 1, "the first alarm never fired"
        at = tracer.where
        if not wait_until(lambda client=client: not out_of_pool(client), 3.0):
            leaked.append(f"place {n} ({at}): {len(out_of_pool(client))} out")
        if twice_in_pool(client):
            twice.append(f"place {n} ({at})")
        client.close()
        if tracer.fired < 2:  # no place left after the first alarm
            break
        n += 1
        assert n < 300
    print(f"{where}: {n} places, {len(leaked)} leaked, {len(twice)} twice in the pool")
    assert leaked == [], leaked
    assert twice == [], twice
    assert n >= 5, n  # the clean-up was traced
