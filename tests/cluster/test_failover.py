"""A failover is absorbed by an acquire that still has time left (docs/operations.md,
"Failover"): a script that surely did not reach a server (its connection was refused) is
sent again after the topology is refreshed, within the caller's timeout, never raised.

Cluster: the master owning the lock's slot is SIGKILLed and its replica promoted (CLUSTER
FAILOVER TAKEOVER a moment later), while the client still knows the dead master; Sentinel:
the master is SIGKILLed and the sentinel promotes the replica. Both the sync and the
asyncio client, for a new acquire and for a waiter blocked across the failover.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import tenure
from support.cluster import Cluster, ClusterNode, Sentinels, wait_until

pytestmark = pytest.mark.cluster

TIMEOUT = 15.0
"""The caller's timeout: the failover (kill, promotion, slot map refresh) fits in it."""
PROMOTE_AFTER = 0.5
"""Seconds between the kill and the takeover: the acquire starts while the slot map still
names the dead master, and must ride out the promotion."""


def _victim(cluster: Cluster, name: str) -> tuple[ClusterNode, ClusterNode, str]:
    """(the master owning ``name``, its replica, the URL of another master) with the
    replica holding everything the master acknowledged."""
    victim = cluster.master_of(name)
    replica = cluster.replica_of(victim)
    url = next(n for n in cluster.current_masters() if n.port != victim.port).url
    return victim, replica, url


def _fail_over(cluster: Cluster, victim: ClusterNode, replica: ClusterNode) -> float:
    """SIGKILL ``victim``; promote ``replica`` :data:`PROMOTE_AFTER` later, in a thread.
    Returns the monotonic time of the kill."""
    with victim.client() as r:
        assert r.wait(1, 5000) == 1  # the replica has every write
    victim.kill()
    killed = time.monotonic()

    def promote() -> None:
        time.sleep(PROMOTE_AFTER)
        cluster.take_over(replica)

    threading.Thread(target=promote, daemon=True).start()
    return killed


def test_acquire_absorbs_a_cluster_failover(fresh: Cluster) -> None:
    name = "failover:sync"
    victim, replica, url = _victim(fresh, name)
    with tenure.Client(url, socket_timeout=1, socket_connect_timeout=1) as c:
        lock = c.lock(name)
        assert lock.acquire(timeout=1)  # slot map known, a pooled connection to the victim
        lock.release()
        killed = _fail_over(fresh, victim, replica)
        assert lock.acquire(timeout=TIMEOUT)
        took = time.monotonic() - killed
        lock.release()
        assert not lock.locked()
    print(f"sync cluster: kill -> acquire returned {took:.2f} s")
    assert PROMOTE_AFTER <= took < TIMEOUT
    assert fresh.master_of(name).port == replica.port


def test_waiter_rides_out_a_cluster_failover(fresh: Cluster) -> None:
    """A waiter blocked on the lock when its shard's master dies gets it when the hold's
    lease ends on the promoted replica, within its timeout, with no error."""
    name = "failover:waited"
    victim, replica, url = _victim(fresh, name)
    with (
        tenure.Client(url, socket_timeout=1, socket_connect_timeout=1) as holder,
        tenure.Client(url, socket_timeout=1, socket_connect_timeout=1) as waiting,
    ):
        assert holder.lock(name).acquire(lease_time=3)
        outcome: list[object] = []

        def wait() -> None:
            try:
                outcome.append(waiting.lock(name).acquire(timeout=TIMEOUT))
                outcome.append(time.monotonic())
                waiting.lock(name).release()
            except BaseException as error:
                outcome.append(error)

        waiter = threading.Thread(target=wait)
        waiter.start()
        channel = tenure.keys.lock_channel(name)
        wait_until(lambda: _numsub(victim.port, channel) == 1, 5, "the waiter's subscription")
        killed = _fail_over(fresh, victim, replica)
        waiter.join(TIMEOUT + 5)
        assert not waiter.is_alive()
        assert outcome[0] is True, outcome
        print(f"sync cluster waiter: kill -> acquire returned {outcome[1] - killed:.2f} s")  # type: ignore[operator]


def test_semaphore_acquires_absorb_a_cluster_failover(fresh: Cluster) -> None:
    plain, expirable = "{failover-sem}:plain", "{failover-sem}:permits"  # one slot
    victim, replica, url = _victim(fresh, plain)
    with tenure.Client(url, socket_timeout=1, socket_connect_timeout=1) as c:
        semaphore = c.semaphore(plain)
        permits = c.permit_expirable_semaphore(expirable)
        assert semaphore.try_set_permits(1)
        assert permits.try_set_permits(1)
        killed = _fail_over(fresh, victim, replica)
        assert semaphore.acquire(timeout=TIMEOUT)
        took = time.monotonic() - killed
        permit = permits.acquire(timeout=TIMEOUT, lease_time=10)
        assert permit is not None
        permits.release(permit)
        semaphore.release()
        assert semaphore.available_permits() == 1
        assert permits.available_permits() == 1
    print(f"sync cluster semaphore: kill -> acquire returned {took:.2f} s")
    assert took < TIMEOUT


def test_spin_lock_acquire_absorbs_a_cluster_failover(fresh: Cluster) -> None:
    name = "failover:spin"
    victim, replica, url = _victim(fresh, name)
    with tenure.Client(url, socket_timeout=1, socket_connect_timeout=1) as c:
        lock = c.spin_lock(name)
        assert lock.acquire(timeout=1)
        lock.release()
        killed = _fail_over(fresh, victim, replica)
        assert lock.acquire(timeout=TIMEOUT)
        took = time.monotonic() - killed
        lock.release()
    print(f"sync cluster spin lock: kill -> acquire returned {took:.2f} s")
    assert took < TIMEOUT


async def test_async_acquire_absorbs_a_cluster_failover(fresh: Cluster) -> None:
    name = "failover:async"
    victim, replica, url = _victim(fresh, name)
    async with tenure.AsyncClient(url, socket_timeout=1, socket_connect_timeout=1) as c:
        lock = c.lock(name)
        assert await lock.acquire(timeout=1)
        await lock.release()
        # In a thread: the loop runs meanwhile and sees the dead master's sockets close,
        # as a live application's loop would (a command written before that may have run).
        killed = await asyncio.to_thread(_fail_over, fresh, victim, replica)
        assert await lock.acquire(timeout=TIMEOUT)
        took = time.monotonic() - killed
        await lock.release()
        assert not await lock.locked()
    print(f"asyncio cluster: kill -> acquire returned {took:.2f} s")
    assert PROMOTE_AFTER <= took < TIMEOUT


def test_release_absorbs_a_cluster_failover(fresh: Cluster) -> None:
    """A release, which has no wait of its own, rides out the failover within the
    client's socket timeout (docs/operations.md, "Failover"): the hold, replicated before
    the kill, is gone from the promoted replica, and the watchdog renews nothing."""
    name = "failover:release"
    victim, replica, url = _victim(fresh, name)
    with tenure.Client(url, socket_timeout=3, socket_connect_timeout=1) as c:
        lock = c.lock(name)
        assert lock.acquire(timeout=1)
        killed = _fail_over(fresh, victim, replica)
        lock.release()
        took = time.monotonic() - killed
        assert not lock.locked()
        assert len(c._runner.ctx.holds) == 0  # nothing left for the watchdog to renew
    print(f"sync cluster: kill -> release returned {took:.2f} s")
    assert PROMOTE_AFTER <= took < 3 + 1
    assert fresh.master_of(name).port == replica.port


async def test_async_release_absorbs_a_cluster_failover(fresh: Cluster) -> None:
    name = "failover:async-release"
    victim, replica, url = _victim(fresh, name)
    async with tenure.AsyncClient(url, socket_timeout=3, socket_connect_timeout=1) as c:
        lock = c.lock(name)
        assert await lock.acquire(timeout=1)
        killed = await asyncio.to_thread(_fail_over, fresh, victim, replica)
        await lock.release()
        took = time.monotonic() - killed
        assert not await lock.locked()
        assert len(c._runner.ctx.holds) == 0  # nothing left for the watchdog to renew
    print(f"asyncio cluster: kill -> release returned {took:.2f} s")
    assert PROMOTE_AFTER <= took < 3 + 1


async def test_async_waiter_rides_out_a_cluster_failover(fresh: Cluster) -> None:
    name = "failover:async-waited"
    victim, replica, url = _victim(fresh, name)
    async with (
        tenure.AsyncClient(url, socket_timeout=1, socket_connect_timeout=1) as holder,
        tenure.AsyncClient(url, socket_timeout=1, socket_connect_timeout=1) as waiting,
    ):
        assert await holder.lock(name).acquire(lease_time=3)

        async def wait() -> float:
            assert await waiting.lock(name).acquire(timeout=TIMEOUT)
            got = time.monotonic()
            await waiting.lock(name).release()
            return got

        waiter = asyncio.create_task(wait())
        channel = tenure.keys.lock_channel(name)
        deadline = time.monotonic() + 5
        while _numsub(victim.port, channel) != 1:
            assert time.monotonic() < deadline, "the waiter's subscription"
            await asyncio.sleep(0.02)
        killed = await asyncio.to_thread(_fail_over, fresh, victim, replica)
        got = await asyncio.wait_for(waiter, TIMEOUT + 5)
        print(f"asyncio cluster waiter: kill -> acquire returned {got - killed:.2f} s")


def _numsub(port: int, channel: str) -> int:
    import redis

    with redis.Redis(port=port, socket_timeout=1) as r:
        return int(dict(r.pubsub_shardnumsub(channel)).get(channel.encode(), 0))


def _kill_primary(sentinels: Sentinels) -> float:
    with sentinels.primary.client() as r:
        assert r.wait(1, 5000) == 1
    sentinels.primary.kill()
    return time.monotonic()


def test_acquire_absorbs_a_sentinel_failover(own_sentinels: Sentinels) -> None:
    sentinel = own_sentinels.sentinel(socket_timeout=1)
    master = sentinel.master_for(Sentinels.NAME, socket_timeout=1, socket_connect_timeout=1)
    old = own_sentinels.master_port()
    with tenure.Client(master) as c:
        lock = c.lock("failover:sentinel")
        assert lock.acquire(timeout=1)
        lock.release()
        killed = _kill_primary(own_sentinels)
        assert lock.acquire(timeout=TIMEOUT)
        took = time.monotonic() - killed
        lock.release()
    print(f"sync sentinel: kill -> acquire returned {took:.2f} s")
    assert own_sentinels.master_port() != old
    assert took < TIMEOUT


def test_waiter_rides_out_a_sentinel_failover(own_sentinels: Sentinels) -> None:
    """A waiter blocked when the master dies gets the lock on the promoted replica when the
    hold's lease ends there, within its timeout, with no error."""
    sentinel = own_sentinels.sentinel(socket_timeout=1)

    def client() -> tenure.Client:
        master = sentinel.master_for(Sentinels.NAME, socket_timeout=1, socket_connect_timeout=1)
        return tenure.Client(master)

    name = "failover:sentinel-waited"
    with client() as holder, client() as waiting:
        assert holder.lock(name).acquire(lease_time=3)
        outcome: list[object] = []

        def wait() -> None:
            try:
                outcome.append(waiting.lock(name).acquire(timeout=TIMEOUT))
                outcome.append(time.monotonic())
                waiting.lock(name).release()
            except BaseException as error:
                outcome.append(error)

        waiter = threading.Thread(target=wait)
        waiter.start()
        channel = tenure.keys.lock_channel(name)

        def subscribed() -> bool:
            with own_sentinels.primary.client(socket_timeout=1) as r:
                return int(dict(r.pubsub_numsub(channel)).get(channel.encode(), 0)) == 1

        wait_until(subscribed, 5, "the waiter's subscription")
        killed = _kill_primary(own_sentinels)
        waiter.join(TIMEOUT + 5)
        assert not waiter.is_alive()
        assert outcome[0] is True, outcome
        print(f"sync sentinel waiter: kill -> acquire returned {outcome[1] - killed:.2f} s")  # type: ignore[operator]


async def test_async_acquire_absorbs_a_sentinel_failover(own_sentinels: Sentinels) -> None:
    sentinel = own_sentinels.async_sentinel(socket_timeout=1)
    master = sentinel.master_for(Sentinels.NAME, socket_timeout=1, socket_connect_timeout=1)
    old = own_sentinels.master_port()
    try:
        async with tenure.AsyncClient(master) as c:
            lock = c.lock("failover:sentinel")
            assert await lock.acquire(timeout=1)
            await lock.release()
            killed = await asyncio.to_thread(_kill_primary, own_sentinels)
            assert await lock.acquire(timeout=TIMEOUT)
            took = time.monotonic() - killed
            await lock.release()
    finally:
        await master.aclose()
        for each in sentinel.sentinels:  # the Sentinel's own connections to the sentinels
            await each.aclose()
    print(f"asyncio sentinel: kill -> acquire returned {took:.2f} s")
    assert own_sentinels.master_port() != old
    assert took < TIMEOUT
