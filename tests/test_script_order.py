"""Scripts fail before their first write (issue 9 item 5): a command that can fail (a PUBLISH
or SET an ACL refuses, an INCR on a counter of the wrong type) runs before anything is
written, so a failed script leaves the keys exactly as they were (a script is atomic only
up to its first error: writes before it stay)."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import tenure
from support.servers import Server

_users = itertools.count()


def snapshot(r: redis.Redis) -> dict[bytes | str, Any]:
    """Every key with its type, value and whether it expires (PTTL rounded to 1 s)."""
    state: dict[bytes | str, Any] = {}
    for key in sorted(r.keys("*")):
        kind = r.type(key)
        value: Any
        if kind == b"hash":
            value = r.hgetall(key)
        elif kind == b"list":
            value = r.lrange(key, 0, -1)
        elif kind == b"zset":
            value = r.zrange(key, 0, -1, withscores=True)
        else:
            value = r.get(key)
        pttl = r.pttl(key)
        state[key] = (kind, value, round(pttl / 1000) if pttl > 0 else pttl)
    return state


@pytest.fixture
def limited(server: Server, r: redis.Redis) -> Iterator[Callable[[str], tenure.Client]]:
    """Factory of tenure clients logged in as an ACL user with the given rules."""
    made: list[tuple[str, tenure.Client]] = []

    def make(rules: str) -> tenure.Client:
        user = f"tenure-limited-{next(_users)}"
        r.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", "~*", *rules.split())
        c = tenure.Client(f"redis://{user}:pw@127.0.0.1:{server.port}/0")
        made.append((user, c))
        return c

    yield make
    for user, c in made:
        c.close()
        r.execute_command("ACL", "DELUSER", user)


REFUSED = "(?i)no permissions|can't (publish|run)"
"""An ACL refusal inside a script, as Valkey and Redis 7.0 word it."""

NO_CHANNELS = "resetchannels +@all"
"""An ACL user that may run every command but publish on no channel."""


def queue_waiter(r: redis.Redis, name: str) -> None:
    """Put a live waiter (of no client) at the head of fair lock ``name``'s queue, so that
    a release must PUBLISH to wake it."""
    waiter = f"{uuid.uuid4()}:1"
    r.rpush(f"redisson_lock_queue:{{{name}}}", waiter)
    deadline = int(time.time() * 1000) + 600_000
    r.zadd(f"redisson_lock_timeout:{{{name}}}", {waiter: deadline})


def lock_of(c: tenure.Client, kind: str, name: str) -> tenure.Lock:
    if kind == "lock":
        return c.lock(name)
    if kind == "fenced":
        return c.fenced_lock(name)
    if kind == "fair":
        return c.fair_lock(name)
    rw = c.read_write_lock(name)
    return rw.read_lock() if kind == "read" else rw.write_lock()


KINDS = ["lock", "fenced", "fair", "read", "write"]


@pytest.mark.parametrize("operation", ["release", "force_release"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_publish_changes_nothing(
    limited: Callable[[str], tenure.Client], r: redis.Redis, kind: str, operation: str
) -> None:
    c = limited(NO_CHANNELS)
    lock = lock_of(c, kind, "acl")
    assert lock.acquire(lease_time=30)
    if kind == "fair":
        queue_waiter(r, "acl")
    before = snapshot(r)
    with pytest.raises(tenure.ServerError, match=REFUSED):  # a refusal: not retried
        getattr(lock, operation)()
    assert snapshot(r) == before


@pytest.mark.parametrize("operation", ["release", "force_release"])
def test_a_refused_publish_on_a_read_release_with_reads_left_elsewhere(
    limited: Callable[[str], tenure.Client], r: redis.Redis, operation: str
) -> None:
    # a write release that downgrades to read mode (the writer keeps a read hold) publishes
    c = limited(NO_CHANNELS)
    rw = c.read_write_lock("acl-down")
    assert rw.write_lock().acquire(lease_time=30)
    assert rw.read_lock().acquire(lease_time=30)
    before = snapshot(r)
    with pytest.raises(tenure.ServerError, match=REFUSED):  # a refusal: not retried
        getattr(rw.write_lock(), operation)()
    assert snapshot(r) == before


def test_a_refused_set_leaves_no_read_mode(
    limited: Callable[[str], tenure.Client], r: redis.Redis
) -> None:
    c = limited("&* +@all -set")
    with pytest.raises(tenure.ServerError, match=REFUSED):  # a refusal: not retried
        c.read_write_lock("acl-set").read_lock().acquire(lease_time=30)
    assert r.keys("*") == []


@pytest.mark.parametrize("junk", ["hash", "text"])
def test_a_failed_token_draw_grants_nothing(
    client: tenure.Client, r: redis.Redis, junk: str
) -> None:
    token_key = "redisson_lock_token:{fenced-junk}"
    if junk == "hash":
        r.hset(token_key, "x", "1")
    else:
        r.set(token_key, "not a number")
    before = snapshot(r)
    with pytest.raises(tenure.LockError):
        client.fenced_lock("fenced-junk").acquire(blocking=False)
    assert snapshot(r) == before
    assert not r.exists("fenced-junk")


def test_a_refused_wake_up_of_a_new_fair_head_changes_nothing(
    limited: Callable[[str], tenure.Client], r: redis.Redis
) -> None:
    # the lock is free and its queue head missed its deadline: the acquire drops it and
    # must wake the live waiter behind, which this user may not publish to
    now = int(time.time() * 1000)
    r.rpush("redisson_lock_queue:{fair-head}", "dead:1", "live:1")
    r.zadd("redisson_lock_timeout:{fair-head}", {"dead:1": now - 1000, "live:1": now + 600_000})
    before = snapshot(r)
    c = limited(NO_CHANNELS)
    with pytest.raises(tenure.ServerError, match=REFUSED):  # a refusal: not retried
        c.fair_lock("fair-head").acquire(blocking=False)
    assert snapshot(r) == before
