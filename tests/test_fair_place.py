"""fair_acquire.lua: a queued waiter asking for its place (entry -3, its first look once
woken) at a free lock, on a real server: the head takes the lock from one pop of the queue,
and a waiter behind the head leaves the queue, scores and alive-until times as they were."""

from __future__ import annotations

from typing import Any

import redis

from tenure import keys, scripts
from tenure.core.fair import BEHIND, PLACE, alive_key

WAIT = 300000  # Redisson's threadWaitTime: each grant takes it off every waiting score
ENTRY = 30000  # a waiter's entry lease ms (its client's watchdog_timeout)
GRACE = 10000
NAME = "place"
KEYS = [NAME, keys.fair_queue_key(NAME), keys.fair_timeout_key(NAME), alive_key(NAME)]


def acquire(r: redis.Redis, owner: str, entry: int) -> Any:
    script = scripts.get("fair_acquire")
    args: list[Any] = [30000, owner, entry, GRACE, keys.fair_waiter_channel_prefix(NAME), "0", 0]
    return r.eval(script.source, len(KEYS), *KEYS, *args)


def release(r: redis.Redis, owner: str) -> Any:
    script = scripts.get("fair_release")
    args: list[Any] = ["0", 30000, owner, keys.fair_waiter_channel_prefix(NAME)]
    return r.eval(script.source, len(KEYS), *KEYS, *args)


def state(r: redis.Redis) -> tuple[Any, ...]:
    queue, zset, alive = KEYS[1:]
    return (
        r.hgetall(NAME),
        r.lrange(queue, 0, -1),
        r.zrange(zset, 0, -1, withscores=True),
        r.hgetall(alive),
    )


def calls(r: redis.Redis, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def queued_behind_a_released_holder(r: redis.Redis, waiters: list[str]) -> None:
    """``waiters`` join (in order) while "holder" holds; the holder then releases: the lock
    is free, the first of them woken as the head."""
    assert acquire(r, "holder", 0) is None
    for owner in waiters:
        assert acquire(r, owner, ENTRY) in (BEHIND, *range(1, 30001))
    assert release(r, "holder") == 2  # freed, the head woken


def test_the_head_takes_a_free_lock_from_one_pop(r: redis.Redis) -> None:
    queued_behind_a_released_holder(r, ["a", "b", "c"])
    _, _, before, _ = state(r)
    lranges = calls(r, "lrange")
    assert acquire(r, "a", PLACE) is None
    assert calls(r, "lrange") == lranges  # popped, not read first
    lock, queue, after, alive = state(r)
    assert lock == {b"a": b"1"}
    assert queue == [b"b", b"c"]
    scores = dict(before)
    assert after == [(b"b", scores[b"b"] - WAIT), (b"c", scores[b"c"] - WAIT)]
    assert set(alive) == {b"b", b"c"}


def test_a_waiter_behind_the_head_changes_nothing_at_a_free_lock(r: redis.Redis) -> None:
    queued_behind_a_released_holder(r, ["a", "b", "c"])
    before = state(r)
    assert acquire(r, "b", PLACE) == BEHIND
    assert acquire(r, "c", PLACE) == BEHIND
    assert state(r) == before  # the head popped and pushed back: the queue as it was
    assert acquire(r, "a", PLACE) is None
    assert state(r)[1] == [b"b", b"c"]


def test_a_waiter_dropped_from_the_queue_is_told_to_wait(r: redis.Redis) -> None:
    """Its entry gone (dropped as dead while its client was away), a place it asks for
    leaves the queue as it was; its renewal pass finds the entry gone and it joins again."""
    queued_behind_a_released_holder(r, ["a", "b"])
    before = state(r)
    assert acquire(r, "gone", PLACE) == BEHIND
    assert state(r) == before
