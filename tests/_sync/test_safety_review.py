# GENERATED from tests/_async/test_safety_review.py by tools/unasync.py: edit that file, not this one.
"""Safety review items on real servers (issue 9): ``ReadLock.locked`` with a writer's reads,
kind collisions, ``extend``, pub/sub permission errors, the fencing persistence warning.

The caller is a task here and a thread in the generated sync twin (tests/_sync)."""

from __future__ import annotations

import logging

import pytest
import redis

import tenure
from support.servers import Server, valkey_binary
from support.twins import spawn, wait_until


# ------------------------------------------------------------------ item 16
def test_read_side_is_locked_while_the_writer_holds_reads(
    client: tenure.Client, r: redis.Redis
) -> None:
    rw = client.read_write_lock("rw16")
    read, write = rw.read_lock(), rw.write_lock()
    assert write.acquire(lease_time=10)
    assert not read.locked()  # write mode, no read holds: the read side is free
    assert read.acquire(lease_time=10)  # the writer takes a read hold too
    assert r.hget("rw16", "mode") == b"write"
    assert read.locked()
    assert write.locked()
    read.release()
    assert not read.locked()
    write.release()
    assert not read.locked()
    assert not write.locked()


# ------------------------------------------------------------------ item 19: extend
def side(client: tenure.Client, kind: str, name: str) -> tenure.Lock:
    if kind == "lock":
        return client.lock(name)
    if kind == "fenced":
        return client.fenced_lock(name)
    if kind == "fair":
        return client.fair_lock(name)
    rw = client.read_write_lock(name)
    return rw.read_lock() if kind == "read" else rw.write_lock()


KINDS = ["lock", "fenced", "fair", "read", "write"]


@pytest.mark.parametrize("kind", KINDS)
def test_extend_adds_to_the_remaining_lease(
    client: tenure.Client, r: redis.Redis, kind: str
) -> None:
    lock = side(client, kind, "ext")
    assert lock.acquire(lease_time=2)
    assert lock.acquire(lease_time=2)  # every hold of the caller shares the expiry
    lock.extend(20)
    remaining = lock.remaining_lease()
    assert remaining is not None
    assert 20 < remaining <= 24  # a write re-entry adds its lease
    if kind == "read":  # each read hold's own timeout key was extended too
        timeouts = r.keys("{ext}:*:rwlock_timeout:*")
        assert len(timeouts) == 2
        assert all(20_000 < r.pttl(k) <= 22_000 for k in timeouts)
    # the client's record follows: its newest lease now counts from the extension
    hold = client._runner.ctx.holds.get(lock.core.key, lock.core.field(lock.runner.owner()))
    assert hold is not None
    newest = hold.leases[-1]
    assert newest is not None
    assert 20 < newest <= 24
    lock.release()
    lock.release()
    assert r.keys("*") == [] or kind == "fenced"  # a fenced lock keeps its token counter


def test_extend_leaves_the_fair_waiters_entries_alone(
    client: tenure.Client, make_client, r: redis.Redis
) -> None:
    # a waiter's entry lasts while its client refreshes it, whatever the holder's lease
    fair = client.fair_lock("ext-fair")
    assert fair.acquire(lease_time=5)
    other = make_client().fair_lock("ext-fair")
    waiting = spawn(lambda: other.acquire(timeout=30))
    assert wait_until(lambda: r.zcard("redisson_lock_timeout:{ext-fair}") == 1)
    entry = "redisson_lock_timeout:{ext-fair}"
    [before] = r.zrange(entry, 0, -1, withscores=True)
    fair.extend(10)
    remaining = fair.remaining_lease()
    assert remaining is not None
    assert 14 < remaining <= 15
    [after] = r.zrange(entry, 0, -1, withscores=True)
    assert after == before
    fair.release()
    assert waiting.result() is True


def test_extend_errors_are_those_of_release(
    client: tenure.Client, make_client
) -> None:
    lock = client.lock("ext-err")
    with pytest.raises(tenure.NotOwnedError) as not_owned:
        lock.extend(1)
    assert not isinstance(not_owned.value, tenure.LockLostError)
    for bad in (0, -1, float("nan"), float("inf"), 2e12):
        with pytest.raises(ValueError, match="additional_time"):
            lock.extend(bad)
    with pytest.raises(TypeError, match="additional_time"):
        lock.extend("1")  # type: ignore[arg-type]
    assert lock.acquire()  # renewed by the watchdog: an extension would be undone
    with pytest.raises(tenure.LockError, match="watchdog") as watchdog:
        lock.extend(1)
    assert not isinstance(watchdog.value, tenure.NotOwnedError)
    lock.release()
    lost: list[object] = []
    taken = client.lock("ext-lost", on_lost=lost.append)
    assert taken.acquire(lease_time=30)
    assert make_client().lock("ext-lost").force_release()
    with pytest.raises(tenure.LockLostError):
        taken.extend(1)
    assert taken.lost  # on_lost runs apart from the caller, soon after:
    assert wait_until(lambda: lost == [taken], timeout=2)
    with pytest.raises(tenure.NotOwnedError):
        taken.release()


def test_multi_lock_and_red_lock_extend_every_member(
    client: tenure.Client, r: redis.Redis
) -> None:
    multi = client.multi_lock(client.lock("m1"), client.lock("m2"))
    assert multi.acquire(lease_time=2)
    multi.extend(20)
    assert all(20_000 < r.pttl(k) <= 22_000 for k in ("m1", "m2"))
    multi.release()
    red = client.red_lock(*(client.lock(f"r{i}") for i in range(3)))
    assert red.acquire(lease_time=2)
    red.extend(20)  # the members held (a quorum at least; the last may come late)
    assert sum(20_000 < r.pttl(f"r{i}") <= 22_000 for i in range(3)) >= 2
    red.release()
    with pytest.raises(tenure.NotOwnedError):
        red.extend(1)
    red.close()
    multi.close()


# ------------------------------------------------------------------ item 12: kinds
FAMILY = {"lock": "plain", "fenced": "plain", "fair": "plain", "read": "rw", "write": "rw"}


@pytest.mark.parametrize("holder", KINDS)
@pytest.mark.parametrize("other", KINDS)
def test_a_name_held_by_another_kind(
    client: tenure.Client, make_client, r: redis.Redis, holder: str, other: str
) -> None:
    """Lock, FairLock and FencedLock share one hash and exclude one another (as held);
    a ReadWriteLock's hash is another family: each refuses the other's with LockKindError,
    changing nothing (also for the very owner that holds the other kind)."""
    held = side(client, holder, "kind")
    assert held.acquire(lease_time=30)
    before = r.hgetall("kind")
    same_family = FAMILY[holder] == FAMILY[other]
    if same_family:
        if holder == "read" and other == "read":
            pytest.skip("readers share")
        contender = side(make_client(), other, "kind")
        assert contender.acquire(blocking=False) is False
        if "read" not in (holder, other):
            assert contender.acquire(timeout=0.2) is False
    else:
        mine, theirs = side(client, other, "kind"), side(make_client(), other, "kind")
        for contender in (mine, theirs):
            with pytest.raises(tenure.LockKindError, match="kind"):
                contender.acquire(timeout=5)
            with pytest.raises(tenure.LockKindError):
                contender.release()
            if other in ("read", "write"):  # per side, as in Redisson: not in its mode
                assert contender.force_release() is False
            else:
                with pytest.raises(tenure.LockKindError):
                    contender.force_release()
    assert r.hgetall("kind") == before
    held.release()
    assert not r.exists("kind")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "junk",
    [
        "kind",
        "redisson_lock_queue:{kind}",
        "redisson_lock_timeout:{kind}",
        "redisson_lock_token:{kind}",
    ],
)
def test_keys_of_a_wrong_type_are_refused(
    client: tenure.Client, r: redis.Redis, kind: str, junk: str
) -> None:
    r.set(junk, "junk")
    uses = {
        "kind": KINDS,
        "redisson_lock_queue:{kind}": ["fair"],
        "redisson_lock_timeout:{kind}": ["fair"],
        "redisson_lock_token:{kind}": ["fenced"],
    }
    lock = side(client, kind, "kind")
    if kind not in uses[junk]:
        assert lock.acquire(lease_time=5)  # a key this kind does not use
        lock.release()
        return
    with pytest.raises(tenure.LockKindError, match=junk.replace("{", r"\{")):
        lock.acquire(timeout=5)
    assert r.keys("*") == [junk.encode()]
    assert r.get(junk) == b"junk"


# ------------------------------------------------------------------ item 18
def persistence_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        rec.getMessage()
        for rec in caplog.records
        if rec.name == "tenure"
        and rec.levelno == logging.WARNING
        and "persists" in rec.getMessage()
    ]


def test_fenced_acquire_warns_once_per_client_without_persistence(
    make_client, caplog: pytest.LogCaptureFixture
) -> None:
    # the session servers run with --save '' --appendonly no
    caplog.set_level(logging.WARNING, logger="tenure")
    first = make_client()
    assert first.fenced_lock("f18").acquire_token() is not None
    first.fenced_lock("f18").release()
    assert first.fenced_lock("f18-other").acquire(lease_time=5)
    warnings = persistence_warnings(caplog)
    assert len(warnings) == 1
    assert "go backwards" in warnings[0]
    second = make_client()
    assert second.fenced_lock("f18").acquire(lease_time=5)
    assert len(persistence_warnings(caplog)) == 2  # once per client
    assert second.lock("plain18").acquire(lease_time=5)  # plain locks never check
    assert len(persistence_warnings(caplog)) == 2


def test_no_warning_with_aof(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    srv = Server(valkey_binary(), "--appendonly", "yes").start()
    try:
        client = tenure.Client(srv.url)
        assert client.fenced_lock("f18").acquire(lease_time=5)
        client.close()
    finally:
        srv.stop()
    assert persistence_warnings(caplog) == []
