"""wait_for_replicas: WAIT after each lock change against a real primary + replica pair."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import tenure
from support.servers import Server, valkey_binary


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Server, Server]]:
    binary = valkey_binary()
    primary = Server(binary).start()
    replica = Server(binary, "--replicaof", "127.0.0.1", str(primary.port)).start()
    yield primary, replica
    replica.stop()
    primary.stop()


@pytest.fixture
def synced(pair: tuple[Server, Server]) -> tuple[Server, Server]:
    primary, replica = pair
    if replica.proc is None or replica.proc.poll() is not None:
        replica.start()
    with primary.client() as p, replica.client() as rep:
        p.flushall()
        deadline = time.monotonic() + 10
        while rep.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "replica did not sync"
            time.sleep(0.05)
        assert p.wait(1, 5000) == 1
    return primary, replica


def test_acquire_and_release_wait_for_the_replica(synced):
    primary, replica = synced
    with tenure.Client(primary.url, wait_for_replicas=1, replica_timeout=2.0) as c:
        lock = c.lock("replicated")
        assert lock.acquire(lease_time=30)
        # WAIT returned 1: the replica has the hold already, no polling needed.
        with replica.client() as rep:
            assert rep.hexists("replicated", f"{c.client_id}:1") or rep.hlen("replicated") == 1
        lock.release()
        with replica.client() as rep:
            assert not rep.exists("replicated")


def test_fenced_acquire_waits_for_the_replica(synced):
    primary, replica = synced
    with tenure.Client(primary.url, wait_for_replicas=1) as c:
        token = c.fenced_lock("f").acquire_token(lease_time=30)
        with replica.client() as rep:
            assert int(rep.get(tenure.keys.token_key("f"))) == token


@pytest.mark.parametrize("fault", ["pause", "kill"])
def test_unreplicated_acquire_is_undone(synced, fault):
    primary, replica = synced
    getattr(replica, fault)()
    try:
        with tenure.Client(primary.url, wait_for_replicas=1, replica_timeout=0.2) as c:
            lock = c.lock("r")
            t0 = time.monotonic()
            with pytest.raises(tenure.ReplicationError) as info:
                lock.acquire(lease_time=30)
            assert info.value.acknowledged == 0
            assert time.monotonic() - t0 < 3
            assert isinstance(info.value, tenure.BackendError)
            with primary.client() as p:
                assert not p.exists("r")  # the hold was released again on the primary
            assert not lock.owned()
            fenced = c.fenced_lock("rf")
            with pytest.raises(tenure.ReplicationError):
                fenced.acquire(lease_time=30)
            assert fenced.token is None
            with primary.client() as p:
                assert not p.exists("rf")
    finally:
        if fault == "pause":
            replica.resume()


def test_unreplicated_release_reports_after_taking_effect(synced):
    primary, replica = synced
    with tenure.Client(primary.url, wait_for_replicas=1, replica_timeout=0.2) as c:
        lock = c.lock("rel")
        assert lock.acquire(lease_time=30)
        replica.pause()
        try:
            with pytest.raises(tenure.ReplicationError):
                lock.release()
            with primary.client() as p:
                assert not p.exists("rel")
            with pytest.raises(tenure.NotOwnedError):
                lock.release()  # the hold is gone from the table too
        finally:
            replica.resume()


def test_async_unreplicated_acquire_is_undone(synced):
    import asyncio

    primary, replica = synced

    async def main() -> None:
        async with tenure.AsyncClient(primary.url, wait_for_replicas=1, replica_timeout=1) as c:
            lock = c.lock("ar")
            assert await lock.acquire(lease_time=30)  # replicated fine
            await lock.release()
            replica.pause()
            try:
                c2 = tenure.AsyncClient(primary.url, wait_for_replicas=1, replica_timeout=0.2)
                async with c2:
                    with pytest.raises(tenure.ReplicationError):
                        await c2.fenced_lock("ar").acquire(lease_time=30)
            finally:
                replica.resume()
            with primary.client() as p:
                assert not p.exists("ar")

    asyncio.run(asyncio.wait_for(main(), 60))
