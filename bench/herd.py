"""Paths 5-6: many waiters on one lock (asyncio tasks; idle threads), and memory per lock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

import tenure
from bench import peers
from bench.common import (
    Results,
    calls_delta,
    command_calls,
    named_client_commands,
    with_client_name,
)


def async_tasks(results: Results, url: str, tasks: int, limit: float) -> None:
    """Path 5: ``tasks`` asyncio tasks of one AsyncClient each take one lock once.

    Server commands per acquisition over the whole drain (INFO commandstats, script-inner calls
    included), and the drain time. Gives up after ``limit`` seconds (recorded as such).
    """

    async def run(kind: str) -> dict[str, Any]:
        raw = redis.Redis.from_url(url)
        client = tenure.AsyncClient(url)
        name = f"bench:tasks:{kind}:{time.time_ns()}"
        lock = client.fair_lock(name) if kind == "fair" else client.lock(name)
        await lock.acquire()  # scripts loaded: not part of the run
        await lock.release()
        gate = asyncio.Event()
        done = 0

        async def one() -> None:
            nonlocal done
            await gate.wait()
            async with lock:
                done += 1

        pending = [asyncio.create_task(one()) for _ in range(tasks)]
        await asyncio.sleep(0)  # every task at the gate
        before = command_calls(raw)
        t0 = time.perf_counter()
        gate.set()
        _, unfinished = await asyncio.wait(pending, timeout=limit)
        elapsed = time.perf_counter() - t0
        after = command_calls(raw)
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
        await client.close()
        raw.close()
        delta = calls_delta(before, after)
        return {
            "cmds_per_acq": sum(delta.values()) / done if done else float("inf"),
            "seconds": elapsed,
            "done": done,
            "commands": delta,
        }

    for kind, subject in (("fair", "tenure AsyncFairLock"), ("lock", "tenure AsyncLock")):
        r = asyncio.run(run(kind))
        extra = {"tasks": tasks, "done": r["done"], "limit": limit, "commands": r["commands"]}
        results.add("async-tasks", subject, "tenure", "cmds_per_acq", r["cmds_per_acq"], **extra)
        results.add("async-tasks", subject, "tenure", "drain_s", r["seconds"], **extra)


RENEW = 3  # seconds: the holder's lease, renewed every third (tenure) or two thirds (prl)


def _tenure_side(
    url: str, name: str, waiters_count: int
) -> tuple[Callable[[], object], Callable[[], Any], Any]:
    holder = tenure.Client(with_client_name(url, "bench-holder"), watchdog_timeout=RENEW)
    waiters = tenure.Client(with_client_name(url, "bench-waiters"))
    hold = holder.lock(name)
    hold.acquire()

    def waiter() -> tuple[Callable[[], bool], Callable[[], object]]:
        lock = waiters.lock(name)
        return lambda: lock.acquire(timeout=120), lock.release

    def close() -> None:
        holder.close()
        waiters.close()

    return hold.release, waiter, close


def _prl_side(
    url: str, name: str, waiters_count: int
) -> tuple[Callable[[], object], Callable[[], Any], Any]:
    import redis_lock

    holder = peers.peer_redis(with_client_name(url, "bench-holder"))
    # Each python-redis-lock waiter blocks a connection in BLPOP: the pool must hold them all
    # (redis-py's default pool stops at 100 with MaxConnectionsError).
    waiters = peers.peer_redis(
        with_client_name(url, "bench-waiters"), max_connections=waiters_count + 10
    )
    hold = redis_lock.Lock(holder, name, expire=RENEW, auto_renewal=True)
    hold.acquire()

    def waiter() -> tuple[Callable[[], bool], Callable[[], object]]:
        lock = redis_lock.Lock(waiters, name, expire=peers.LEASE)
        return lock.acquire, lock.release  # its timeout may not exceed its expire

    def close() -> None:
        holder.close()
        waiters.close()

    return hold.release, waiter, close


def idle_waiters(results: Results, url: str, waiters: int, window: float) -> None:
    """Path 6: ``waiters`` threads wait on one held lock (one client for all of them).

    Measures the commands the waiters' connections sent during ``window`` seconds while the
    holder kept renewing (CLIENT LIST tot-cmds of the connections named bench-waiters), the
    connections they opened (pooled and pub/sub), and the time from the holder's release until
    every waiter has acquired once and released.
    """
    sides = {"tenure Lock": _tenure_side}
    if peers.installed("redis_lock"):
        sides["python-redis-lock"] = _prl_side
    raw = redis.Redis.from_url(url)
    for subject, side in sides.items():
        name = f"bench:idle:{subject}:{time.time_ns()}"
        release_holder, make_waiter, close = side(url, name, waiters)
        started = threading.Semaphore(0)
        finished: list[float] = []
        failures: list[BaseException] = []

        def wait(
            acquire: Callable[[], bool],
            release: Callable[[], object],
            started: threading.Semaphore = started,
            finished: list[float] = finished,
            failures: list[BaseException] = failures,
        ) -> None:
            started.release()
            try:
                if acquire():
                    release()
                    finished.append(time.perf_counter())
            except BaseException as error:  # reported below, not lost in a thread
                failures.append(error)

        threads = [threading.Thread(target=wait, args=make_waiter()) for _ in range(waiters)]
        for t in threads:
            t.start()
        for _ in threads:
            started.acquire()
        time.sleep(1.0)  # every waiter past its first attempt and asleep
        before = named_client_commands(raw, "bench-waiters")
        time.sleep(window)
        after = named_client_commands(raw, "bench-waiters")
        conns = [c for c in raw.client_list() if c.get("name") == "bench-waiters"]
        subscribed = sum(1 for c in conns if int(c["sub"]) + int(c.get("ssub", 0)) > 0)
        t0 = time.perf_counter()
        release_holder()
        for t in threads:
            t.join(180)
        drain = (max(finished) - t0) if len(finished) == waiters else float("inf")
        close()
        idle = sum(after.get(k, 0) - before.get(k, 0) for k in after)
        extra = {
            "waiters": waiters,
            "window_s": window,
            "holder_lease_s": RENEW,
            "acquired": len(finished),
            "failures": [repr(f) for f in failures[:3]],
        }
        role = "tenure" if subject.startswith("tenure") else "peer"
        results.add("idle-waiters", subject, role, "idle_cmds", idle, **extra)
        results.add("idle-waiters", subject, role, "connections", len(conns) - subscribed, **extra)
        results.add("idle-waiters", subject, role, "pubsub_connections", subscribed, **extra)
        results.add("idle-waiters", subject, role, "drain_s", drain, **extra)
    raw.close()


def memory_per_lock(results: Results, url: str) -> None:
    raw = redis.Redis.from_url(url)
    with tenure.Client(url) as client:
        lock = client.lock("bench:memory")
        lock.acquire()
        usage = int(raw.memory_usage("bench:memory") or 0)
        lock.release()
    raw.close()
    results.add("footprint", "tenure Lock", "tenure", "bytes_per_lock", usage)
