"""The asyncio client on a real cluster: a redis.asyncio.cluster.RedisCluster passed in,
every lock kind over every shard, waiters woken on each shard, nothing left subscribed."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio.cluster

import tenure
from support.cluster import Cluster, wait_until

pytestmark = pytest.mark.cluster


async def test_async_cluster_client_locks_and_wakes_on_every_shard(fresh: Cluster) -> None:
    names = [f"async:{i}" for i in range(20)] + [f"{{atag{i}}}:x" for i in range(20)]
    by_master: dict[int, str] = {}
    for n in names:
        by_master.setdefault(fresh.master_of(n).port, n)
    assert len(by_master) == 3
    rc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=fresh.masters[1].port)
    try:
        async with tenure.AsyncClient(rc) as a, tenure.AsyncClient(fresh.url) as b:
            for n in names:
                assert await a.lock(n).acquire(timeout=1)
                assert not await b.lock(n).acquire(blocking=False)
                await a.lock(n).release()
                rw = a.read_write_lock(n + ":rw")
                assert await rw.write_lock().acquire(timeout=1)
                await rw.write_lock().release()
            holds = [a.lock(n) for n in by_master.values()]
            for lock in holds:
                assert await lock.acquire()

            async def wait(n: str) -> bool:
                got = await b.lock(n).acquire(timeout=10)
                await b.lock(n).release()
                return got

            waiters = [asyncio.create_task(wait(n)) for n in by_master.values()]
            await asyncio.sleep(0.3)
            assert not any(w.done() for w in waiters)
            for lock in holds:
                await lock.release()
            assert await asyncio.wait_for(asyncio.gather(*waiters), 10) == [True] * 3
    finally:
        await rc.aclose()
    for port, n in by_master.items():
        channel = tenure.keys.lock_channel(n)

        def none_left(p: int = port, c: str = channel) -> bool:
            with redis.Redis(port=p) as r:
                return dict(r.pubsub_shardnumsub(c)).get(c.encode(), 0) == 0

        wait_until(none_left, 5, "0 sharded subscriptions")
