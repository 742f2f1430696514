"""Issue 24 on a real cluster: guarded writes in the lock's slot, named holders, validity."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import tenure
from support.cluster import Cluster, wait_until
from tenure import keys

pytestmark = pytest.mark.cluster

NAMES = [f"guard:{i}" for i in range(12)]


@pytest.fixture
def client(fresh: Cluster) -> Iterator[tenure.Client]:
    with tenure.Client(fresh.url, name="cluster-worker", watchdog_timeout=0.9) as c:
        yield c


def test_guarded_writes_on_every_shard(fresh: Cluster, client: tenure.Client) -> None:
    assert len({fresh.master_of(n).port for n in NAMES}) == 3
    for name in NAMES:
        lock = client.lock(name)
        with lock:
            key = "{" + keys.slot_tag(name) + "}:state"
            assert lock.execute_if_held("INCR", key) == 1
            with pytest.raises(ValueError, match="slot"):
                lock.execute_if_held("SET", f"elsewhere:{name}", "v")
            assert 0 < lock.valid_for() <= 0.9
            lock.checkpoint()
        with pytest.raises(tenure.NotOwnedError):
            lock.execute_if_held("INCR", key)


def test_holders_are_named_on_every_shard(fresh: Cluster, client: tenure.Client) -> None:
    locks = [client.lock(n) for n in NAMES]
    for lock in locks:
        assert lock.acquire()
    try:
        def named() -> bool:
            infos = [client.inspect(n) for n in NAMES]
            return all(i.holders and i.holders[0].client_name == "cluster-worker" for i in infos)

        wait_until(named, 10, "every holder named")
        info = client.inspect(NAMES[0])
        assert info.holders[0].pid == os.getpid()
    finally:
        for lock in locks:
            lock.release()
