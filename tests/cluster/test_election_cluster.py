"""Election and SpinLock on a real 3-master cluster: every key and the channel of one election
in one slot, handover heard through sharded pub/sub, observers woken on every shard."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis.cluster
from redis.crc import key_slot

import tenure
from support.cluster import Cluster, Sentinels
from support.twins import wait_until
from tenure.core.election import election_channel, election_keys

pytestmark = pytest.mark.cluster

NAMES = [f"sched:{i}" for i in range(12)] + [f"{{tenant{i}}}:sched" for i in range(6)]


@pytest.fixture
def clients(fresh: Cluster) -> Iterator[tuple[tenure.Client, tenure.Client]]:
    with tenure.Client(fresh.url) as a, tenure.Client(fresh.url) as b:
        yield a, b


def test_one_slot_per_election(fresh: Cluster) -> None:
    for name in NAMES:
        names = [*election_keys(name), election_channel(name)]
        assert len({key_slot(n.encode()) for n in names}) == 1, name
    assert len({fresh.master_of(election_keys(n)[0]).port for n in NAMES}) == 3


def hand_over(
    raw: redis.Redis | redis.cluster.RedisCluster, a: tenure.Client, b: tenure.Client, name: str
) -> None:
    """One election: an observer, a leader, a waiting candidate, a resign."""
    first, second = a.election(name), b.election(name)
    seen: list[tenure.Leader | None] = []

    def observe() -> None:
        for leader in a.election(name).observe():
            seen.append(leader)
            if leader is not None and leader.term == 2:
                return

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    assert wait_until(lambda: seen == [None])
    assert first.campaign("a", timeout=5) == 1
    got: list[tuple[int | None, float]] = []
    waiter = threading.Thread(
        target=lambda: got.append((second.campaign("b", timeout=10), time.monotonic()))
    )
    waiter.start()
    assert wait_until(lambda: raw.llen(election_keys(name)[2]) == 1)  # queued
    resigned = time.monotonic()
    first.resign()
    waiter.join(15)
    assert got, (name, got)
    assert got[0][0] == 2, (name, got)
    assert got[0][1] - resigned < 0.5, (name, got[0][1] - resigned)
    watcher.join(10)
    # the current leader first (vacant), then every change in order (the change log)
    assert [x.term if x else None for x in seen] == [None, 1, 2], (name, seen)
    second.resign()


def test_elections_hand_over_on_every_shard(
    fresh: Cluster, clients: tuple[tenure.Client, tenure.Client]
) -> None:
    a, b = clients
    raw = fresh.redis()
    for name in NAMES:
        hand_over(raw, a, b, name)


def test_spin_lock_on_every_shard(clients: tuple[tenure.Client, tenure.Client]) -> None:
    a, b = clients
    for name in NAMES:
        spin = a.spin_lock(name)
        assert spin.acquire(timeout=1)
        assert not b.spin_lock(name).acquire(timeout=0.05)
        spin.release()
        assert b.spin_lock(name).acquire(blocking=False)
        b.spin_lock(name).release()


def test_election_on_sentinel(sentinels: Sentinels) -> None:
    sentinel = sentinels.sentinel(socket_timeout=1)
    masters = [
        sentinel.master_for(Sentinels.NAME, socket_timeout=1, socket_connect_timeout=1)
        for _ in range(3)
    ]
    with tenure.Client(masters[0]) as a, tenure.Client(masters[1]) as b:
        name = f"sentinel-sched-{time.monotonic_ns()}"
        hand_over(masters[2], a, b, name)
