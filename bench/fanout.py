"""Path 7: RedLock (and MultiLock) over 5 independent embedded servers vs one master."""

from __future__ import annotations

import asyncio
import statistics
import uuid
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio

import tenure
from bench import peers
from bench.common import Pair, Results, ainterleave, interleave
from bench.latency import FLOOR_RELEASE

LEASE = 10.0
SINGLE = "tenure Lock (1 master)"


def _record(results: Results, path: str, samples: dict[str, Any], roles: dict[str, str]) -> None:
    for name, (acq, rel) in samples.items():
        results.add(path, name, roles[name], "acquire_ms", statistics.median(acq) * 1e3, n=len(acq))
        results.add(path, name, roles[name], "release_ms", statistics.median(rel) * 1e3, n=len(rel))


def _raw_fanout(urls: tuple[str, ...], key: str) -> tuple[Pair, Callable[[], None]]:
    """The floor: SET NX PX written to every server's connection, then every reply read; the
    release likewise with an owner-checked script. No threads, one round trip of wall time."""
    pools = [redis.ConnectionPool.from_url(u) for u in urls]
    conns = [pool.get_connection() for pool in pools]
    shas = [redis.Redis(connection_pool=pool).script_load(FLOOR_RELEASE) for pool in pools]
    token = str(uuid.uuid4())

    def acquire() -> None:
        for c in conns:
            c.send_command("SET", key, token, "NX", "PX", int(LEASE * 1000))
        assert all(c.read_response() for c in conns)

    def release() -> None:
        for c, sha in zip(conns, shas, strict=True):
            c.send_command("EVALSHA", sha, 1, key, token)
        assert all(c.read_response() == 1 for c in conns)

    def close() -> None:
        for pool, c in zip(pools, conns, strict=True):
            pool.release(c)
            pool.disconnect()

    return (acquire, release), close


async def _async_raw_fanout(urls: tuple[str, ...], key: str) -> tuple[Pair, Any]:
    """:func:`_raw_fanout` with redis.asyncio connections: every command written, then every
    reply read (no task per server: asyncio.gather of whole commands is slower)."""
    pools = [redis.asyncio.ConnectionPool.from_url(u) for u in urls]
    conns = [await pool.get_connection() for pool in pools]
    shas = [
        await redis.asyncio.Redis(connection_pool=pool).script_load(FLOOR_RELEASE) for pool in pools
    ]
    token = str(uuid.uuid4())

    async def acquire() -> None:
        for c in conns:
            await c.send_command("SET", key, token, "NX", "PX", int(LEASE * 1000))
        assert all([await c.read_response() for c in conns])

    async def release() -> None:
        for c, sha in zip(conns, shas, strict=True):
            await c.send_command("EVALSHA", sha, 1, key, token)
        assert all([await c.read_response() == 1 for c in conns])

    async def close() -> None:
        for pool, c in zip(pools, conns, strict=True):
            await pool.release(c)
            await pool.disconnect()

    return (acquire, release), close


def redlock(results: Results, urls: tuple[str, ...], n: int) -> None:
    """Sync and asyncio acquire / release latency, every case interleaved round by round."""
    clients = [tenure.Client(u) for u in urls]
    single = clients[0].lock("bench:r:single")
    red = clients[0].red_lock(*(c.lock("bench:r:red") for c in clients))
    multi = clients[0].multi_lock(*(c.lock("bench:r:multi") for c in clients))
    one_floor, one_close = _raw_fanout(urls[:1], "bench:r:floor1")
    fan_floor, fan_close = _raw_fanout(urls, "bench:r:floor5")
    cases: dict[str, Pair] = {
        SINGLE: (lambda: single.acquire(lease_time=LEASE), single.release),
        "tenure RedLock (5 masters)": (lambda: red.acquire(lease_time=LEASE), red.release),
        "tenure MultiLock (5 masters)": (lambda: multi.acquire(lease_time=LEASE), multi.release),
        "raw SET NX PX (1 master)": one_floor,
        "raw fan-out SET NX PX (5 masters)": fan_floor,
    }
    roles = {k: "tenure" for k in list(cases)[:3]} | {k: "floor" for k in list(cases)[3:]}
    masters: list[redis.Redis] = []
    if peers.installed("pottery"):
        from pottery import Redlock

        masters = [redis.Redis.from_url(u) for u in urls]
        plock = Redlock(key="bench:r:pottery", masters=set(masters), auto_release_time=LEASE)
        cases["pottery Redlock (5 masters)"] = (plock.acquire, plock.release)
        roles["pottery Redlock (5 masters)"] = "peer"
    try:
        _record(results, "redlock", interleave(cases, n), roles)
    finally:
        red.close()
        multi.close()
        for c in clients:
            c.close()
        one_close()
        fan_close()
        for m in masters:
            m.close()

    async def main() -> None:
        aclients = [tenure.AsyncClient(u) for u in urls]
        asingle = aclients[0].lock("bench:ra:single")
        ared = aclients[0].red_lock(*(c.lock("bench:ra:red") for c in aclients))
        one_floor, one_close = await _async_raw_fanout(urls[:1], "bench:ra:floor1")
        fan_floor, fan_close = await _async_raw_fanout(urls, "bench:ra:floor5")

        async def single_acquire() -> None:
            await asingle.acquire(lease_time=LEASE)

        async def red_acquire() -> None:
            await ared.acquire(lease_time=LEASE)

        acases: dict[str, Pair] = {
            "tenure AsyncLock (1 master)": (single_acquire, asingle.release),
            "tenure AsyncRedLock (5 masters)": (red_acquire, ared.release),
            "raw asyncio SET NX PX (1 master)": one_floor,
            "raw asyncio fan-out SET NX PX (5 masters)": fan_floor,
        }
        aroles = dict(zip(acases, ("tenure", "tenure", "floor", "floor"), strict=True))
        try:
            _record(results, "redlock-async", await ainterleave(acases, n), aroles)
        finally:
            for c in aclients:
                await c.close()
            await one_close()
            await fan_close()

    asyncio.run(main())
