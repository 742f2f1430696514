"""Every primitive on a real 3-master cluster: routing, sharded pub/sub, renewal per slot,
slot migration and a master's death."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis
from redis.crc import key_slot

import tenure
from support.cluster import Cluster, ClusterNode, wait_until

pytestmark = pytest.mark.cluster

NAMES = [f"job:{i}" for i in range(30)] + [f"{{tenant{i}}}:job" for i in range(30)]


@pytest.fixture
def client(fresh: Cluster) -> Iterator[tenure.Client]:
    with tenure.Client(fresh.url) as c:
        yield c


def owners(cluster: Cluster, names: list[str]) -> set[int]:
    return {cluster.master_of(n).port for n in names}


def test_a_url_of_a_cluster_node_gives_a_cluster_client(fresh: Cluster) -> None:
    with tenure.Client(fresh.url) as c:
        assert c.lock("x").acquire(timeout=1)
        assert c._route.cluster
        assert c._route.sharded


def test_every_primitive_on_names_over_every_shard(fresh: Cluster, client: tenure.Client) -> None:
    assert len(owners(fresh, NAMES)) == 3
    other = tenure.Client(fresh.url)
    try:
        for name in NAMES:
            lock = client.lock(name)
            assert lock.acquire(timeout=1)
            assert lock.acquire(timeout=1)
            assert not other.lock(name).acquire(blocking=False)
            lock.release()
            lock.release()
            fair = client.fair_lock(name + ":fair")
            assert fair.acquire(timeout=1)
            assert not other.fair_lock(name + ":fair").acquire(timeout=0.05)
            fair.release()
            rw = client.read_write_lock(name + ":rw")
            assert rw.read_lock().acquire(timeout=1)
            assert other.read_write_lock(name + ":rw").read_lock().acquire(timeout=1)
            other.read_write_lock(name + ":rw").read_lock().release()
            rw.read_lock().release()
            assert rw.write_lock().acquire(timeout=1)
            rw.write_lock().release()
            fenced = client.fenced_lock(name + ":fenced")
            first = fenced.acquire_token(timeout=1)
            assert first is not None
            fenced.release()
            assert fenced.acquire_token(timeout=1) == first + 1
            fenced.release()
        members = [client.lock(n) for n in NAMES[::6]]
        assert len(owners(fresh, [m.name for m in members])) >= 2
        multi = client.multi_lock(*members)
        assert multi.acquire(timeout=2)
        assert not other.lock(NAMES[0]).acquire(blocking=False)
        multi.release()
        assert other.lock(NAMES[0]).acquire(blocking=False)
        other.lock(NAMES[0]).release()
    finally:
        other.close()


def test_one_waiter_per_shard_woken_by_spublish(fresh: Cluster, client: tenure.Client) -> None:
    # One name per shard; a raw SSUBSCRIBE next to the waiter sees the release's message.
    by_master: dict[int, str] = {}
    for name in NAMES:
        by_master.setdefault(fresh.master_of(name).port, name)
    assert len(by_master) == 3
    monitors = [_Monitor(m) for m in fresh.current_masters()]
    waiter_client = tenure.Client(fresh.url)
    try:
        for port, name in by_master.items():
            lock = client.lock(name)
            assert lock.acquire()
            channel = tenure.keys.lock_channel(name)
            raw = redis.Redis(port=port).pubsub()
            raw.ssubscribe(channel)
            assert raw.get_message(timeout=2)["type"] == "ssubscribe"
            woken: list[float] = []

            def wait(n: str = name, woken: list[float] = woken) -> None:
                if waiter_client.lock(n).acquire(timeout=10):
                    woken.append(time.monotonic())
                    waiter_client.lock(n).release()

            waiter = threading.Thread(target=wait)
            waiter.start()
            wait_until(lambda c=channel, p=port: _numsub(p, c) >= 2, 5, "the waiter")
            released = time.monotonic()
            lock.release()
            message = raw.get_message(timeout=2)
            assert message is not None
            assert message["type"] == "smessage"
            waiter.join(10)
            assert woken, "the waiter was never woken"
            assert woken[0] - released < 0.1, woken[0] - released
            raw.close()
            wait_until(lambda c=channel, p=port: _numsub(p, c) == 0, 5, "0 subscriptions")
        for m in monitors:
            assert not m.stop(), "plain PUBLISH seen in cluster mode"
    finally:
        waiter_client.close()


def _numsub(port: int, channel: str) -> int:
    with redis.Redis(port=port) as r:
        return int(dict(r.pubsub_shardnumsub(channel)).get(channel.encode(), 0))


class _Monitor:
    """MONITOR on one node: the PUBLISH commands it saw (scripts' calls included)."""

    def __init__(self, node: ClusterNode) -> None:
        self.seen: list[str] = []
        self._conn = redis.Redis(port=node.port)
        self._monitor = self._conn.monitor()
        self._monitor.__enter__()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stop = False
        self._thread.start()

    def _run(self) -> None:
        try:
            for command in self._monitor.listen():
                if self._stop:
                    return
                if command["command"].lower().startswith("publish "):
                    self.seen.append(command["command"])
        except (redis.RedisError, OSError, ValueError):
            return

    def stop(self) -> list[str]:
        self._stop = True
        with redis.Redis(port=self._conn.connection_pool.connection_kwargs["port"]) as r:
            r.ping()  # one more line for the monitor to read, so it sees _stop
        self._thread.join(5)
        self._conn.close()
        return self.seen


def test_fifty_watchdog_holds_over_every_shard_kept_past_three_periods(fresh: Cluster) -> None:
    names = NAMES[:50]
    lost: list[str] = []
    with tenure.Client(fresh.url, watchdog_timeout=0.6) as c:
        locks = [c.lock(n, on_lost=lambda lk: lost.append(lk.name)) for n in names]
        for lock in locks:
            assert lock.acquire()
        time.sleep(0.6 * 2)  # 2 leases = 6 renewal periods: only renewal keeps them
        raw = fresh.redis()
        try:
            assert all(raw.pttl(n) > 0 for n in names)
        finally:
            raw.close()
        assert not lost
        for lock in locks:
            lock.release()


def test_slot_migration_while_a_client_waits(fresh: Cluster) -> None:
    name = "migrating"
    source = fresh.master_of(name)
    target = next(m for m in fresh.current_masters() if m.port != source.port)
    holder, waiting = tenure.Client(fresh.url), tenure.Client(fresh.url)
    try:
        lock = holder.lock(name)
        assert lock.acquire()
        result: list[bool] = []
        def wait() -> None:
            result.append(waiting.lock(name).acquire(timeout=20))
            if result[-1]:
                waiting.lock(name).release()

        waiter = threading.Thread(target=wait)
        waiter.start()
        channel = tenure.keys.lock_channel(name)
        wait_until(lambda: _numsub(source.port, channel) == 1, 5, "the waiter's subscription")
        _migrate(fresh, key_slot(name.encode()), source, target)
        assert fresh.master_of(name).port == target.port
        # The waiter's listener moves to the new owner; exclusion is kept meanwhile.
        wait_until(lambda: _numsub(target.port, channel) == 1, 10, "resubscription")
        assert not result
        with redis.Redis(port=target.port) as r:
            assert r.exists(name)
        lock.release()  # MOVED followed by the holder
        waiter.join(10)
        assert result == [True]
        wait_until(lambda: _numsub(target.port, channel) == 0, 5, "0 subscriptions")
    finally:
        holder.close()
        waiting.close()


def _migrate(cluster: Cluster, slot: int, source: ClusterNode, target: ClusterNode) -> None:
    ids = {}
    for node in (source, target):
        with node.client(decode_responses=True) as r:
            ids[node.port] = r.execute_command("CLUSTER", "MYID")
    with target.client() as t, source.client() as s:
        t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source.port])
        s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target.port])
        while True:
            moving = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not moving:
                break
            s.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *moving)
        for node in cluster.current_masters():
            with node.client() as r:
                r.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[target.port])
    wait_until(lambda: cluster.master_of_slot_agreed(slot, target.port), 10, "slot agreement")


def test_release_during_migration_follows_ask(fresh: Cluster) -> None:
    name = "asked"
    source = fresh.master_of(name)
    target = next(m for m in fresh.current_masters() if m.port != source.port)
    slot = key_slot(name.encode())
    with tenure.Client(fresh.url) as c:
        lock = c.lock(name)
        held, go = threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def hold_then_release() -> None:
            assert lock.acquire(lease_time=30)
            held.set()
            go.wait(10)
            _catch(lock.release, errors)

        releaser = threading.Thread(target=hold_then_release)
        releaser.start()
        assert held.wait(5)
        with source.client(decode_responses=True) as s, target.client(decode_responses=True) as t:
            sid, tid = s.execute_command("CLUSTER", "MYID"), t.execute_command("CLUSTER", "MYID")
            t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", sid)
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", tid)
            s.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", name)
            # The release (key + channel) meets ASK, then TRYAGAIN on the importing node
            # while the migration is half done; it goes through once the slot has moved.
            go.set()
            time.sleep(0.2)
            assert releaser.is_alive()
            for node in fresh.current_masters():
                with node.client() as r:
                    r.execute_command("CLUSTER", "SETSLOT", slot, "NODE", tid)
            releaser.join(5)
            assert not releaser.is_alive()
            assert errors == []
            assert not t.exists(name)


def _catch(work: Callable[[], object], errors: list[BaseException]) -> None:
    try:
        work()
    except BaseException as error:
        errors.append(error)


def test_master_killed_acquires_resume_after_promotion(fresh: Cluster) -> None:
    """SIGKILL the master of one shard: acquires there fail until its replica is promoted,
    then succeed; waiters on the other shards never notice. Median of 5 kills."""
    times: list[float] = []
    for round_ in range(5):
        cluster = fresh if round_ == 0 else _restore(fresh)
        name = f"victim{round_}"
        victim = cluster.master_of(name)
        others = [n for n in NAMES if cluster.master_of(n).port != victim.port][:2]
        with tenure.Client(cluster.url, socket_timeout=1, socket_connect_timeout=1) as c:
            held = [c.lock(n) for n in others]
            for lock in held:
                assert lock.acquire()
            assert c.lock(name).acquire(timeout=1)
            c.lock(name).release()
            victim.kill()
            died = time.monotonic()
            while True:
                assert time.monotonic() - died < 30, "no acquire after the failover"
                try:
                    if c.lock(name).acquire(timeout=1):
                        break
                except tenure.BackendError:
                    time.sleep(0.05)
            times.append(time.monotonic() - died)
            c.lock(name).release()
            for lock in held:  # the other shards never noticed
                assert lock.owned()
                assert not lock.lost
                lock.release()
    print(f"death -> first acquire on its shard: median {statistics.median(times):.2f} s {times}")
    assert statistics.median(times) < 15


def _restore(cluster: Cluster) -> Cluster:
    cluster.restore()
    return cluster


def test_master_killed_during_four_process_contention(fresh: Cluster) -> None:
    """4 processes contend with wait_for_replicas=1 while the shard's master is SIGKILLed:
    grants resume after the promotion and no two acknowledged grants overlap."""
    import multiprocessing

    from support.wire import overlaps
    from support.workers import contend_through_failover

    name = "contended"
    victim = fresh.master_of(name)
    url = next(n for n in fresh.current_masters() if n.port != victim.port).url
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pending = pool.starmap_async(contend_through_failover, [(url, name, 15.0)] * 4)
        time.sleep(3.0)  # processes started (spawn) and contending
        victim.kill()
        killed = time.monotonic_ns()
        # wait_for_replicas=1 needs a replica: the promoted one has none until the killed
        # node comes back (as its replica).
        wait_until(lambda: fresh.master_of(name).port != victim.port, 20, "the promotion")
        victim.start()
        results = pending.get(60)
    spans = [s for result in results for s in result]
    assert overlaps(spans) == 0
    assert any(enter < killed for enter, _ in spans), "no grant before the kill"
    after = [enter for enter, _ in spans if enter > killed]
    assert after, "no grant after the failover"
    print(f"grants {len(spans)}; first after the kill: {(min(after) - killed) / 1e9:.2f} s")


@pytest.mark.parametrize("name", ["a{b", "{}{x}", "x}{y"])
def test_a_name_whose_keys_span_slots_is_refused_before_io(
    fresh: Cluster, client: tenure.Client, name: str
) -> None:
    # Redisson's layout keeps such a name's lock key and channel in different slots.
    assert client.lock("warm-up").acquire(timeout=1)  # topology known
    with pytest.raises(ValueError, match="hash tag"):
        client.lock(name).acquire(timeout=1)
    raw = fresh.redis()
    try:
        assert not raw.exists(name)
    finally:
        raw.close()


def test_url_cluster_client_pools_block_instead_of_failing(fresh: Cluster) -> None:
    with tenure.Client(fresh.url) as c:
        assert c.lock("p").acquire(timeout=1)
        pool = c._route.pool_for("p")
        assert isinstance(pool, redis.BlockingConnectionPool)
        assert pool.max_connections == 100


def test_waiter_on_a_killed_master_gets_the_lock_from_the_promoted_replica(
    fresh: Cluster,
) -> None:
    """A waiter whose shard's master dies: its listener moves to the promoted replica and
    it gets the lock when the holder releases there, within its timeout."""
    name = "waited-across-failover"
    victim = fresh.master_of(name)
    url = next(n for n in fresh.current_masters() if n.port != victim.port).url
    holder = tenure.Client(url, socket_timeout=1, socket_connect_timeout=1)
    waiting = tenure.Client(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        held = threading.Event()
        release = threading.Event()
        errors: list[BaseException] = []

        def hold() -> None:
            assert holder.lock(name).acquire(lease_time=30)
            held.set()
            release.wait(30)
            _retry(lambda: holder.lock(name).release(), errors)

        result: list[float] = []

        def wait() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if waiting.lock(name).acquire(timeout=deadline - time.monotonic()):
                        result.append(time.monotonic())
                        waiting.lock(name).release()
                    return
                except tenure.BackendError:  # the dead master, until the promotion
                    time.sleep(0.05)

        holder_thread = threading.Thread(target=hold)
        holder_thread.start()
        assert held.wait(10)
        waiter = threading.Thread(target=wait)
        waiter.start()
        channel = tenure.keys.lock_channel(name)
        wait_until(lambda: _numsub(victim.port, channel) == 1, 5, "the waiter's subscription")
        with victim.client() as r:
            assert r.wait(1, 5000) == 1  # the hold is on the replica
        victim.kill()
        wait_until(lambda: fresh.master_of(name).port != victim.port, 20, "the promotion")
        promoted = fresh.master_of(name)
        wait_until(lambda: _numsub(promoted.port, channel) == 1, 15, "the resubscription")
        released = time.monotonic()
        release.set()
        holder_thread.join(15)
        waiter.join(15)
        assert errors == [], errors
        assert result, "the waiter never got the lock"
        assert result[0] - released < 5
        wait_until(lambda: _numsub(promoted.port, channel) == 0, 5, "0 subscriptions")
    finally:
        holder.close()
        waiting.close()


def _retry(work: Callable[[], object], errors: list[BaseException]) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            work()
            return
        except tenure.BackendError as error:
            if time.monotonic() > deadline:
                errors.append(error)
                return
            time.sleep(0.05)


def test_a_channel_outside_its_keys_slot_uses_plain_pubsub(
    fresh: Cluster, client: tenure.Client
) -> None:
    """The latch exception (docs/internals.md, "Cluster"): Subscribe(sharded=False) listens with a
    plain SUBSCRIBE, and a plain PUBLISH on any node reaches it."""
    from tenure.core.effects import Subscribe, Unsubscribe, Wait

    channel = "redisson_countdownlatch__channel__{{tag}latch}"
    woke: list[str | bool] = []

    def flow():
        yield Subscribe(channel, sharded=False)
        try:
            woke.append((yield Wait(channel, 10.0)))
        finally:
            yield Unsubscribe(channel)

    waiter = threading.Thread(target=lambda: client._runner.run(flow()))
    waiter.start()
    masters = fresh.current_masters()

    def subscribed() -> bool:
        total = 0
        for m in masters:
            with redis.Redis(port=m.port) as r:
                total += int(dict(r.pubsub_numsub(channel)).get(channel.encode(), 0))
        return total == 1

    wait_until(subscribed, 5, "a plain subscription")
    with redis.Redis(port=masters[-1].port) as r:
        r.publish(channel, "0")
    waiter.join(10)
    assert woke == ["0"]  # woken by that message: Wait returns its payload
    wait_until(lambda: not subscribed(), 5, "unsubscribed")
