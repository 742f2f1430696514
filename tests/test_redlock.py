"""RedLock over 5 real independent servers: quorum, dead and hung nodes, exclusion."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import tenure
from servers import Server, valkey_binary

NODE_TIMEOUT = 0.5


@pytest.fixture(scope="module")
def five() -> Iterator[list[Server]]:
    servers = [Server(valkey_binary()).start() for _ in range(5)]
    yield servers
    for s in servers:
        s.stop()


@pytest.fixture
def nodes(five: list[Server]) -> Iterator[list[Server]]:
    for s in five:
        if s.proc is None or s.proc.poll() is not None:
            s.start()
        with s.client() as raw:
            raw.flushall()
    yield five
    for s in five:
        if s.proc is not None and s.proc.poll() is None:
            s.resume()


@pytest.fixture
def red(nodes: list[Server]) -> Iterator[tenure.RedLock]:
    clients = [tenure.Client(s.url, socket_timeout=1.0, socket_connect_timeout=1.0) for s in nodes]
    lock = clients[0].red_lock(*(c.lock("red") for c in clients), node_timeout=NODE_TIMEOUT)
    yield lock
    lock.close()
    for c in clients:
        c.close()


def keys_on(servers: list[Server]) -> list[bool]:
    out = []
    for s in servers:
        with s.client() as raw:
            out.append(bool(raw.exists("red")))
    return out


def test_empty_red_lock(client):
    with pytest.raises(ValueError):
        client.red_lock()


def test_all_up(red, nodes):
    assert red.validity is None
    assert red.acquire(lease_time=10)
    assert 0 < red.validity < 10
    assert sum(keys_on(nodes)) >= 3  # a quorum at once; the others may still be answering
    assert red.owned()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(red.acquire(timeout=0.2)))
    t.start()
    t.join()
    assert result == [False]  # another thread is another owner
    red.release()
    assert keys_on(nodes) == [False] * 5
    assert red.validity is None
    with pytest.raises(tenure.NotOwnedError):
        red.release()


def test_two_killed_still_acquires_fast(red, nodes):
    nodes[0].kill()
    nodes[3].kill()
    for _ in range(5):
        t0 = time.monotonic()
        assert red.acquire(timeout=5, lease_time=10)
        assert time.monotonic() - t0 < 2 * NODE_TIMEOUT
        red.release()


def test_two_hung_still_acquires(red, nodes):
    nodes[1].pause()
    nodes[4].pause()
    t0 = time.monotonic()
    assert red.acquire(timeout=5, lease_time=10)
    assert time.monotonic() - t0 < 5
    assert keys_on([nodes[0], nodes[2], nodes[3]]) == [True] * 3
    red.release()
    assert keys_on([nodes[0], nodes[2], nodes[3]]) == [False] * 3


def test_three_killed_refused_and_nothing_left(red, nodes):
    for i in (0, 2, 4):
        nodes[i].kill()
    for _ in range(3):
        assert not red.acquire(timeout=0.3, lease_time=10)
        assert keys_on([nodes[1], nodes[3]]) == [False, False]
    assert not red.acquire(timeout=0)
    assert keys_on([nodes[1], nodes[3]]) == [False, False]


def test_ten_threads_increment_exactly(red, nodes):
    with nodes[0].client() as raw:
        raw.set("counter", 0)

    def worker() -> None:
        with nodes[0].client() as raw:
            for _ in range(5):
                with red(timeout=60, lease_time=10):
                    value = int(raw.get("counter"))
                    time.sleep(0.002)
                    raw.set("counter", value + 1)

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with nodes[0].client() as raw:
        assert int(raw.get("counter")) == 50
    assert keys_on(nodes) == [False] * 5


def test_watchdog_quorum_loss_reported(nodes):
    clients = [tenure.Client(s.url, watchdog_timeout=0.6, socket_timeout=0.5) for s in nodes[:3]]
    lost = threading.Event()
    try:
        red = clients[0].red_lock(*(c.lock("red") for c in clients), on_lost=lambda r: lost.set())
        assert red.acquire()
        clients[0].lock("red").force_release()  # one of 3 lost: a majority remains
        assert not lost.wait(0.6)
        assert not red.lost
        clients[1].lock("red").force_release()  # now only 1 of 3
        assert lost.wait(5)
        assert red.lost
        red.release()  # the remaining member is still released
        assert keys_on(nodes[:3]) == [False] * 3
        red.close()
    finally:
        for c in clients:
            c.close()


def run(coro):
    import asyncio

    return asyncio.run(asyncio.wait_for(coro, 60))


def async_red(nodes, **kw):
    clients = [
        tenure.AsyncClient(s.url, socket_timeout=1.0, socket_connect_timeout=1.0) for s in nodes
    ]
    red = clients[0].red_lock(*(c.lock("red") for c in clients), node_timeout=NODE_TIMEOUT, **kw)
    return clients, red


async def close_all(clients):
    for c in clients:
        await c.close()


def test_async_all_up_and_two_killed(nodes):
    async def main() -> None:
        clients, red = async_red(nodes)
        try:
            assert await red.acquire(lease_time=10)
            assert 0 < red.validity < 10 and await red.owned()
            assert sum(keys_on(nodes)) >= 3
            await red.release()
            assert keys_on(nodes) == [False] * 5
            nodes[1].kill()
            nodes[2].kill()
            for _ in range(3):
                t0 = time.monotonic()
                assert await red.acquire(timeout=5, lease_time=10)
                assert time.monotonic() - t0 < 2 * NODE_TIMEOUT
                await red.release()
        finally:
            await close_all(clients)

    run(main())


def test_async_two_hung_and_three_killed(nodes):
    async def main() -> None:
        clients, red = async_red(nodes)
        try:
            nodes[0].pause()
            nodes[1].pause()
            assert await red.acquire(timeout=5, lease_time=10)
            await red.release()
            nodes[0].resume()
            nodes[1].resume()
            for i in (0, 2, 4):
                nodes[i].kill()
            for _ in range(2):
                assert not await red.acquire(timeout=0.3, lease_time=10)
                assert keys_on([nodes[1], nodes[3]]) == [False, False]
        finally:
            await close_all(clients)

    run(main())


def test_async_ten_tasks_increment_exactly(nodes):
    import asyncio

    async def main() -> None:
        clients, red = async_red(nodes)
        counter = {"value": 0}
        try:

            async def work() -> None:
                for _ in range(5):
                    async with red(timeout=60, lease_time=10):
                        value = counter["value"]
                        await asyncio.sleep(0.002)
                        counter["value"] = value + 1

            await asyncio.gather(*(work() for _ in range(10)))
        finally:
            await close_all(clients)
        assert counter["value"] == 50

    run(main())
    assert keys_on(nodes) == [False] * 5
