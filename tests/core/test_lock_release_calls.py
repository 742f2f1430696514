"""The server work of lock_release per outcome, counted on a real server (issue 23: the
uncontended release must cost no more than it must; speed itself is measured in
bench/uncontended_ab.py, never asserted)."""

from __future__ import annotations

import pytest
import redis

from tenure import keys, scripts


def stats(r: redis.Redis) -> dict[str, int]:
    info = r.info("commandstats")
    return {k[len("cmdstat_") :]: int(v["calls"]) for k, v in info.items()}


def release(r: redis.Redis, name: str, *extra: str | int) -> tuple[object, dict[str, int]]:
    """Run lock_release for owner ``u:1`` of lock ``name``; its reply and the commands it
    ran inside the script."""
    script = scripts.get("lock_release")
    r.script_load(script.source)
    before = stats(r)
    got = r.evalsha(script.sha, 2, name, keys.lock_wake_queue(name), "0", 30000, "u:1", *extra)
    after = stats(r)
    calls = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    calls.pop("info", None)
    assert calls.pop("evalsha") == 1
    return got, calls


@pytest.mark.parametrize(
    ("holds", "reply", "inner"),
    [
        # the last hold, no wake queue, nobody listening: every uncontended release
        (1, 1, {"hmget": 1, "exists": 1, "publish": 1, "del": 1}),
        # a re-entrant hold stays; its PTTL tells whether the lease left is shorter (not here)
        (2, 0, {"hmget": 1, "pttl": 1, "hincrby": 1, "pexpire": 1}),
        (0, None, {"hmget": 1}),  # not the owner's
    ],
)
def test_lock_release_calls_per_outcome(
    r: redis.Redis, holds: int, reply: int | None, inner: dict[str, int]
) -> None:
    name = f"calls:{holds}"
    r.hset(name, "u:2" if holds == 0 else "u:1", max(holds, 1))
    r.pexpire(name, 20000)
    got, calls = release(r, name)
    assert got == reply
    assert calls == inner
    assert r.exists(name) == (holds != 1)


def test_a_release_leaving_a_shorter_lease_tells_it_on_the_lock_channel(r: redis.Redis) -> None:
    """Waiters were refused with the released hold's lease end: the shorter one left is
    published as a renewal (``-<ms>``), which moves their re-check."""
    name = "calls:shorter"
    r.hset(name, "u:1", 2)
    r.pexpire(name, 20000)
    listener = r.pubsub()
    listener.subscribe(keys.lock_channel(name))
    assert listener.get_message(timeout=5) is not None
    script = scripts.get("lock_release")
    queue = keys.lock_wake_queue(name)
    assert r.evalsha(script.sha, 2, name, queue, "0", 500, "u:1") == 0
    assert 0 < r.pttl(name) <= 500
    message = listener.get_message(timeout=5)
    assert message is not None
    assert message["data"] == b"-500"
    # the same lease again ends no sooner (beyond the drift allowance): nothing is sent
    r.hset(name, "u:1", 2)
    assert r.evalsha(script.sha, 2, name, queue, "0", 500, "u:1") == 0
    assert listener.get_message(timeout=0.2) is None
    listener.close()


def test_an_idle_releaser_alone_on_the_channel_is_an_uncontended_release(
    r: redis.Redis,
) -> None:
    """The releaser's own lingering subscription (ARGV[4] = 1) is nobody to wake: still
    the short path, and the releaser's client is not put in the queue."""
    listener = r.pubsub()
    listener.subscribe(keys.lock_channel("idle"))
    assert listener.get_message(timeout=5) is not None
    r.hset("idle", "u:1", 1)
    got, calls = release(r, "idle", 1)
    assert got == 2  # 1 + the one listener the message reached
    assert calls == {"hmget": 1, "exists": 1, "publish": 1, "del": 1}
    assert r.exists(keys.lock_wake_queue("idle")) == 0
    listener.close()


def test_an_unlock_heard_with_no_queue_puts_the_releaser_behind_it(r: redis.Redis) -> None:
    """Someone else listens (a Redisson waiter, a tenure client not registered yet): the
    unlock goes to Redisson's channel, and the releaser's client is queued (_wake.lua)."""
    listener = r.pubsub()
    listener.subscribe(keys.lock_channel("heard"))
    assert listener.get_message(timeout=5) is not None
    r.hset("heard", "u:1", 1)
    got, calls = release(r, "heard")
    assert got == 2
    assert calls == {"hmget": 1, "exists": 1, "publish": 1, "zadd": 1, "pexpire": 1, "del": 1}
    assert r.zrange(keys.lock_wake_queue("heard"), 0, -1) == [b"u"]
    message = listener.get_message(timeout=5)
    assert message is not None
    assert message["channel"] == keys.lock_channel("heard").encode()
    listener.close()


def test_a_release_of_a_key_of_another_kind_is_refused(r: redis.Redis) -> None:
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="TENURE_KIND key str holds a string"):
        release(r, "str")
    r.hset("rw", mapping={"mode": "read", "u:1": 1})
    with pytest.raises(redis.ResponseError, match="TENURE_KIND key rw holds a ReadWriteLock"):
        release(r, "rw")
    assert r.hget("rw", "u:1") == b"1"


def test_a_releaser_without_waiters_at_its_linger_end_wakes_the_other_client(
    r: redis.Redis,
) -> None:
    """ARGV[4] = 2: the releaser's client lingers on the lock's channel and its own with no
    waiter, in the last moment of its lingering (still counted as a listener). Its client
    heads the wake queue, yet the unlock goes to the other registered client alone (-2), not
    to its own (-1: it could only pass the wake-up on, a round trip later). Without the flag
    (a waiter of its own there) its own client is woken, as before."""
    for extra, reply, woken in (((2,), -2, "w"), ((), -1, "u")):
        name = f"own{reply}"
        channel = keys.lock_channel(name)
        connections = {}
        for client in ("u", "w"):  # each client's connection: the lock's channel, its own
            connections[client] = r.pubsub()
            connections[client].subscribe(channel, keys.lock_client_channel(name, client))
            for _ in range(2):
                assert connections[client].get_message(timeout=5) is not None
        r.zadd(keys.lock_wake_queue(name), {"u": 1, "w": 2})  # the releaser's client first
        r.hset(name, "u:1", 1)
        got, _ = release(r, name, *extra)
        assert got == reply
        message = connections[woken].get_message(timeout=5)
        assert message is not None
        assert message["channel"] == keys.lock_client_channel(name, woken).encode()
        silent = connections["u" if woken == "w" else "w"]
        assert silent.get_message(timeout=0.2) is None
        assert r.exists(name) == 0
        for connection in connections.values():
            connection.close()


def test_a_releaser_at_its_linger_end_still_counts_a_foreign_listener(r: redis.Redis) -> None:
    """ARGV[4] = 2 leaves the releaser's listener counted: with a Redisson waiter on the
    lock's channel beside two registered clients, the unlock goes to the channel, heard by
    all three (as with no flag), not to one client (an idle count of 2 would have)."""
    name = "own-foreign"
    channel = keys.lock_channel(name)
    connections = []
    for names in ([channel, keys.lock_client_channel(name, c)] for c in ("u", "w")):
        connections.append(r.pubsub())
        connections[-1].subscribe(*names)
    connections.append(r.pubsub())
    connections[-1].subscribe(channel)  # the Redisson waiter
    for connection, n in zip(connections, (2, 2, 1), strict=True):
        for _ in range(n):
            assert connection.get_message(timeout=5) is not None
    r.zadd(keys.lock_wake_queue(name), {"u": 1, "w": 2})
    r.hset(name, "u:1", 1)
    got, _ = release(r, name, 2)
    assert got == 4  # 1 + the three listeners of the lock's channel
    for connection in connections:
        message = connection.get_message(timeout=5)
        assert message is not None
        assert message["channel"] == channel.encode()
        connection.close()
