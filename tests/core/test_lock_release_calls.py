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
        (2, 0, {"hmget": 1, "hincrby": 1, "pexpire": 1}),  # a re-entrant hold stays
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
