"""FairLock (sync): FIFO order, queue cleanup, dead waiters, deadlines, across processes."""

from __future__ import annotations

import math
import multiprocessing
import threading
import time

import pytest
import redis
from fair_rw_workers import fair_queue_in_turn, fair_wait, server_ms, wait_until

import tenure
from servers import Server, valkey_binary
from tenure import keys

SPAWN = multiprocessing.get_context("spawn")


def queue_of(r: redis.Redis, name: str) -> list[str]:
    return [o.decode() for o in r.lrange(keys.fair_queue_key(name), 0, -1)]


def deadlines(r: redis.Redis, name: str) -> dict[str, float]:
    return {o.decode(): s for o, s in r.zrange(keys.fair_timeout_key(name), 0, -1, withscores=True)}


def in_thread(fn, *args):  # type: ignore[no-untyped-def]
    """Run fn in a thread; returns (thread, result list)."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except BaseException as error:  # reported by the test
            out.append(error)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_reentrant_hold_count_and_wire_layout(client: tenure.Client, r: redis.Redis) -> None:
    lock = client.fair_lock("orders:42")
    assert isinstance(lock, tenure.FairLock) and lock.name == "orders:42"
    assert lock.acquire() and lock.acquire(lease_time=20)
    assert lock.owned() and lock.locked() and lock.hold_count() == 2
    fields = r.hgetall("orders:42")
    assert len(fields) == 1
    (owner, count), = fields.items()
    assert owner.decode().startswith(client.client_id + ":") and count == b"2"
    assert 19 < lock.remaining_lease() <= 20  # type: ignore[operator]
    lock.release()
    assert lock.hold_count() == 1 and lock.remaining_lease() <= client.watchdog_timeout  # type: ignore[operator]
    lock.release()
    assert not lock.locked() and lock.remaining_lease() is None
    with pytest.raises(tenure.NotOwnedError):
        lock.release()
    assert r.keys("*") == []


def test_non_blocking_attempt_never_joins_queue(client: tenure.Client, r: redis.Redis) -> None:
    lock = client.fair_lock("nb")
    assert lock.acquire(lease_time=10)
    for kwargs in ({"blocking": False}, {"timeout": 0}):
        t, out = in_thread(lambda kw=kwargs: lock.acquire(**kw))
        t.join()
        assert out == [False]
    assert r.exists(keys.fair_queue_key("nb"), keys.fair_timeout_key("nb")) == 0
    # and a free lock with a waiter queued is not taken by a one-shot attempt either
    waiter, got = in_thread(lambda: lock.acquire(timeout=10, lease_time=10))
    assert wait_until(lambda: len(queue_of(r, "nb")) == 1)
    lock.release()
    waiter.join()
    assert got == [True]
    t, out = in_thread(lambda: lock.acquire(blocking=False))
    t.join()
    assert out == [False]


def test_timed_out_waiter_leaves_queue(client: tenure.Client, r: redis.Redis) -> None:
    lock = client.fair_lock("t")
    assert lock.acquire(lease_time=10)
    t, out = in_thread(lambda: lock.acquire(timeout=0.5))
    assert wait_until(lambda: len(queue_of(r, "t")) == 1)
    owner = queue_of(r, "t")[0]
    assert owner.startswith(client.client_id + ":")
    # deadline = lock expiry + allowance (the timeout), on server time
    expiry = server_ms(r) + r.pttl("t")
    assert abs(deadlines(r, "t")[owner] - (expiry + 500)) < 100
    t.join()
    assert out == [False]
    assert queue_of(r, "t") == [] and deadlines(r, "t") == {}


def test_eight_waiters_100ms_apart_acquire_in_order(client: tenure.Client) -> None:
    lock = client.fair_lock("eight")
    assert lock.acquire(lease_time=1)
    order: list[int] = []
    times: list[float] = []

    def waiter(i: int) -> None:
        assert lock.acquire(lease_time=1)  # never released: each hold ends with its lease
        order.append(i)
        times.append(time.monotonic())

    start = time.monotonic()
    threads = []
    for i in range(8):
        threads.append(threading.Thread(target=waiter, args=(i,)))
        threads[-1].start()
        time.sleep(0.1)  # the scenario: waiters arrive 100 ms apart
    for t in threads:
        t.join(timeout=30)
    assert order == list(range(8))
    # each takes over when the previous 1 s lease ends: no stall in between
    gaps = [b - a for a, b in zip([start, *times], times, strict=False)]
    assert all(0.5 < g < 2.0 for g in gaps), gaps


def test_500_threads_increment_under_fair_lock(client: tenure.Client, r: redis.Redis) -> None:
    lock = client.fair_lock("count")
    counter = [0]
    inside = [0]
    overlaps = [0]
    failures: list[BaseException] = []

    def work() -> None:
        try:
            with lock(timeout=90):
                inside[0] += 1
                if inside[0] != 1:
                    overlaps[0] += 1
                value = counter[0]
                time.sleep(0)  # yield the GIL: a missing exclusion would lose increments
                counter[0] = value + 1
                inside[0] -= 1
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=work) for _ in range(500)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=100)
    elapsed = time.monotonic() - start
    assert failures == []
    assert counter[0] == 500 and overlaps[0] == 0
    assert elapsed < 90
    assert not lock.locked() and r.exists(keys.fair_queue_key("count")) == 0
    assert r.zcard(keys.fair_timeout_key("count")) == 0


def test_deadlines_shift_when_waiters_time_out(client: tenure.Client, r: redis.Redis) -> None:
    """Waiters that time out move the deadlines behind them ahead: no drift."""
    lock = client.fair_lock("drift")
    assert lock.acquire(lease_time=10)
    for _round in range(2):
        early = [in_thread(lambda: lock.acquire(timeout=0.6)) for _ in range(3)]
        assert wait_until(lambda n=3 + _round: len(queue_of(r, "drift")) == n)
        if _round == 0:
            last, last_out = in_thread(lambda: lock.acquire(timeout=20, lease_time=5))
            assert wait_until(lambda: len(queue_of(r, "drift")) == 4)
            last_owner = queue_of(r, "drift")[-1]
        for t, out in early:
            t.join()
            assert out == [False]
        # only the patient waiter is left, and its deadline is the lock's expiry plus its
        # own allowance (20 s): the three allowances ahead of it were taken back
        assert queue_of(r, "drift") == [last_owner]
        expiry = server_ms(r) + r.pttl("drift")
        assert abs(deadlines(r, "drift")[last_owner] - (expiry + 20_000)) < 150
    # deadlines stay within now + (lease + allowance)
    now = server_ms(r)
    assert all(d <= now + 10_000 + 20_000 for d in deadlines(r, "drift").values())
    lock.release()
    last.join()
    assert last_out == [True]


def test_force_release_wakes_head(client: tenure.Client, r: redis.Redis) -> None:
    lock = client.fair_lock("force")
    assert lock.acquire()  # watchdog lease: only a wake-up lets the waiter in soon
    t, out = in_thread(lambda: (lock.acquire(timeout=10, lease_time=5), time.monotonic()))
    assert wait_until(lambda: len(queue_of(r, "force")) == 1)
    forced = time.monotonic()
    assert lock.force_release() is True
    t.join()
    acquired, at = out[0]  # type: ignore[misc]
    assert acquired and at - forced < 1.0
    assert lock.force_release() is True and lock.force_release() is False
    with pytest.raises(tenure.LockLostError):
        lock.release()  # the main thread's watchdog hold was taken away


def test_dead_waiter_delays_next_by_at_most_its_allowance(
    server: Server, client: tenure.Client, r: redis.Redis
) -> None:
    lock = client.fair_lock("dead")
    assert lock.acquire(lease_time=30)
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=fair_wait, args=(server.url, "dead", 2.0, ready))
    proc.start()
    try:
        assert ready.wait(30)
        assert wait_until(lambda: len(queue_of(r, "dead")) == 1, 30)
        dead_owner = queue_of(r, "dead")[0]
        proc.kill()
        proc.join()
        t, out = in_thread(lambda: (lock.acquire(timeout=30, lease_time=5), time.monotonic()))
        assert wait_until(lambda: len(queue_of(r, "dead")) == 2)
        released = time.monotonic()
        lock.release()  # wakes the dead head only; the next waiter must outwait its allowance
        t.join()
        acquired, at = out[0]  # type: ignore[misc]
        assert acquired
        assert 1.0 < at - released < 2.0 + 1.5
        assert dead_owner not in queue_of(r, "dead") and dead_owner not in deadlines(r, "dead")
    finally:
        proc.kill()


def test_fifo_across_four_processes(server: Server, client: tenure.Client, r: redis.Redis) -> None:
    lock = client.fair_lock("procs")
    assert lock.acquire()
    turns = [SPAWN.Queue() for _ in range(4)]
    dones = [SPAWN.Event() for _ in range(4)]
    procs = [
        SPAWN.Process(target=fair_queue_in_turn, args=(server.url, "procs", q, d))
        for q, d in zip(turns, dones, strict=True)
    ]
    for p in procs:
        p.start()
    try:
        # 12 waiters joining round-robin over the 4 processes, each once the previous queued
        for place in range(12):
            turns[place % 4].put(place)
            assert wait_until(lambda n=place + 1: r.llen(keys.fair_queue_key("procs")) == n, 30)
        for q in turns:
            q.put(None)
        lock.release()
        for d in dones:
            assert d.wait(60)
        assert [int(x) for x in r.lrange("order", 0, -1)] == list(range(12))
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


def test_backend_timeout_while_waiting_leaves_queue() -> None:
    """A waiter whose attempt times out (server stalled) leaves the queue afterwards."""
    srv = Server(valkey_binary()).start()
    raw = srv.client()
    try:
        holder = tenure.Client(srv.url)
        assert holder.fair_lock("stall").acquire(lease_time=30)
        waiter = tenure.Client(srv.url, socket_timeout=0.5)
        srv.pause()
        try:
            t, out = in_thread(lambda: waiter.fair_lock("stall").acquire(timeout=10))
            time.sleep(0.8)  # the waiter's attempt times out meanwhile; its cleanup is in flight
        finally:
            srv.resume()
        t.join()
        assert len(out) == 1 and isinstance(out[0], tenure.BackendError)
        assert raw.llen(keys.fair_queue_key("stall")) == 0
        assert raw.zcard(keys.fair_timeout_key("stall")) == 0
        assert raw.exists("stall") == 1  # the holder still holds it
        waiter.close()
        holder.close()
    finally:
        raw.close()
        srv.stop()


def test_bad_arguments_fail_before_io(client: tenure.Client) -> None:
    with pytest.raises(TypeError):
        client.fair_lock(3)  # type: ignore[arg-type]
    lock = client.fair_lock("args")
    with pytest.raises(ValueError, match="timeout"):
        lock.acquire(timeout=-2)
    with pytest.raises(ValueError, match="lease_time"):
        lock.acquire(lease_time=math.inf)
