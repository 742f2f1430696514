# RedLock (asyncio source of tests/_sync/test_redlock.py).
"""RedLock over 5 real independent servers: quorum, dead and hung nodes, exclusion."""

from __future__ import annotations

import time

import pytest

import tenure
from support.twins import AsyncEvent, async_gather, async_sleep, async_spawn, async_wait_until
from support.wire import keys_on

NODE_TIMEOUT = 0.5


@pytest.fixture
async def red(nodes):
    clients = [
        tenure.AsyncClient(s.url, socket_timeout=1.0, socket_connect_timeout=1.0) for s in nodes
    ]
    lock = clients[0].red_lock(*(c.lock("red") for c in clients), node_timeout=NODE_TIMEOUT)
    yield lock
    lock.close()
    for c in clients:
        await c.close()


async def test_empty_red_lock(async_client):
    with pytest.raises(ValueError, match="at least one member"):
        async_client.red_lock()


async def test_all_up(red, nodes):
    assert red.validity is None
    assert await red.acquire(lease_time=10)
    assert red.validity is not None
    assert 0 < red.validity < 10
    assert sum(keys_on(nodes, "red")) >= 3  # a quorum at once; the others may still be answering
    assert await red.owned()
    # another caller is another owner
    assert await async_spawn(lambda: red.acquire(timeout=0.2)).result() is False
    await red.release()
    assert keys_on(nodes, "red") == [False] * 5
    assert red.validity is None
    with pytest.raises(tenure.NotOwnedError):
        await red.release()


@pytest.mark.parametrize("killed", [(0, 3), (1, 2)])
async def test_two_killed_still_acquires_fast(red, nodes, killed):
    for i in killed:
        nodes[i].kill()
    for _ in range(5):
        t0 = time.monotonic()
        assert await red.acquire(timeout=5, lease_time=10)
        assert time.monotonic() - t0 < 2 * NODE_TIMEOUT
        await red.release()


@pytest.mark.parametrize("hung", [(1, 4), (0, 1)])
async def test_two_hung_still_acquires(red, nodes, hung):
    for i in hung:
        nodes[i].pause()
    up = [s for i, s in enumerate(nodes) if i not in hung]
    t0 = time.monotonic()
    assert await red.acquire(timeout=5, lease_time=10)
    assert time.monotonic() - t0 < 5
    assert keys_on(up, "red") == [True] * 3
    await red.release()
    assert keys_on(up, "red") == [False] * 3


async def test_three_killed_refused_and_nothing_left(red, nodes):
    # A failed attempt's members are released as their replies come (docs/primitives/
    # red-lock.md), perhaps after acquire() returned: on a loaded machine one was still
    # held when looked at at once (in a run of tests/_async beside two CPU hogs). Gone
    # well before their 10 s lease ends: released, not expired.
    def nothing_left() -> bool:
        return keys_on([nodes[1], nodes[3]], "red") == [False, False]

    for i in (0, 2, 4):
        nodes[i].kill()
    for _ in range(3):
        assert not await red.acquire(timeout=0.3, lease_time=10)
        assert await async_wait_until(nothing_left, 5), keys_on([nodes[1], nodes[3]], "red")
    assert not await red.acquire(timeout=0)
    assert await async_wait_until(nothing_left, 5), keys_on([nodes[1], nodes[3]], "red")


async def test_ten_callers_increment_exactly(red, nodes):
    """A counter on the server and one in this process, each read and written back."""
    counter = {"value": 0}
    with nodes[0].client() as raw:
        raw.set("counter", 0)

    async def worker() -> None:
        with nodes[0].client() as raw:
            for _ in range(5):
                async with red(timeout=60, lease_time=10):
                    value, local = int(raw.get("counter")), counter["value"]
                    await async_sleep(0.002)
                    raw.set("counter", value + 1)
                    counter["value"] = local + 1

    await async_gather(*[worker] * 10)
    with nodes[0].client() as raw:
        assert int(raw.get("counter")) == 50
    assert counter["value"] == 50
    assert keys_on(nodes, "red") == [False] * 5


async def test_watchdog_quorum_loss_reported(nodes):
    clients = [
        tenure.AsyncClient(s.url, watchdog_timeout=0.6, socket_timeout=0.5) for s in nodes[:3]
    ]
    lost = AsyncEvent()
    try:
        red = clients[0].red_lock(*(c.lock("red") for c in clients), on_lost=lambda r: lost.set())
        assert await red.acquire()
        await clients[0].lock("red").force_release()  # one of 3 lost: a majority remains
        assert not await lost.wait(0.6)
        assert not red.lost
        await clients[1].lock("red").force_release()  # now only 1 of 3
        assert await lost.wait(5)
        assert red.lost
        await red.release()  # the remaining member is still released
        assert keys_on(nodes[:3], "red") == [False] * 3
        red.close()
    finally:
        for c in clients:
            await c.close()
