# Safety review items (asyncio source of tests/_sync/test_safety_review.py).
"""Safety review items on real servers (issue 9): ``ReadLock.locked`` with a writer's reads,
kind collisions, ``extend``, pub/sub permission errors, the fencing persistence warning.

The caller is a task here and a thread in the generated sync twin (tests/_sync)."""

from __future__ import annotations

import logging

import pytest
import redis

import tenure
from support.servers import Server, valkey_binary
from support.twins import async_spawn, async_wait_until


# ------------------------------------------------------------------ item 16
async def test_read_side_is_locked_while_the_writer_holds_reads(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    rw = async_client.read_write_lock("rw16")
    read, write = rw.read_lock(), rw.write_lock()
    assert await write.acquire(lease_time=10)
    assert not await read.locked()  # write mode, no read holds: the read side is free
    assert await read.acquire(lease_time=10)  # the writer takes a read hold too
    assert r.hget("rw16", "mode") == b"write"
    assert await read.locked()
    assert await write.locked()
    await read.release()
    assert not await read.locked()
    await write.release()
    assert not await read.locked()
    assert not await write.locked()


# ------------------------------------------------------------------ item 19: extend
def side(client: tenure.AsyncClient, kind: str, name: str) -> tenure.AsyncLock:
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
async def test_extend_adds_to_the_remaining_lease(
    async_client: tenure.AsyncClient, r: redis.Redis, kind: str
) -> None:
    lock = side(async_client, kind, "ext")
    assert await lock.acquire(lease_time=2)
    assert await lock.acquire(lease_time=2)  # every hold of the caller shares the expiry
    await lock.extend(20)
    remaining = await lock.remaining_lease()
    assert remaining is not None
    assert 20 < remaining <= 24  # a write re-entry adds its lease
    if kind == "read":  # each read hold's own timeout key was extended too
        timeouts = r.keys("{ext}:*:rwlock_timeout:*")
        assert len(timeouts) == 2
        assert all(20_000 < r.pttl(k) <= 22_000 for k in timeouts)
    # the client's record follows: its newest lease now counts from the extension
    hold = async_client._runner.ctx.holds.get(lock.core.key, lock.core.field(lock.runner.owner()))
    assert hold is not None
    newest = hold.leases[-1]
    assert newest is not None
    assert 20 < newest <= 24
    await lock.release()
    await lock.release()
    assert r.keys("*") == [] or kind == "fenced"  # a fenced lock keeps its token counter


async def test_extend_leaves_the_fair_waiters_entries_alone(
    async_client: tenure.AsyncClient, async_make_client, r: redis.Redis
) -> None:
    # a waiter's entry lasts while its client refreshes it, whatever the holder's lease
    fair = async_client.fair_lock("ext-fair")
    assert await fair.acquire(lease_time=5)
    other = async_make_client().fair_lock("ext-fair")
    waiting = async_spawn(lambda: other.acquire(timeout=30))
    assert await async_wait_until(lambda: r.zcard("redisson_lock_timeout:{ext-fair}") == 1)
    entry = "redisson_lock_timeout:{ext-fair}"
    [before] = r.zrange(entry, 0, -1, withscores=True)
    await fair.extend(10)
    remaining = await fair.remaining_lease()
    assert remaining is not None
    assert 14 < remaining <= 15
    [after] = r.zrange(entry, 0, -1, withscores=True)
    assert after == before
    await fair.release()
    assert await waiting.result() is True


async def test_extend_errors_are_those_of_release(
    async_client: tenure.AsyncClient, async_make_client
) -> None:
    lock = async_client.lock("ext-err")
    with pytest.raises(tenure.NotOwnedError) as not_owned:
        await lock.extend(1)
    assert not isinstance(not_owned.value, tenure.LockLostError)
    for bad in (0, -1, float("nan"), float("inf"), 2e12):
        with pytest.raises(ValueError, match="additional_time"):
            lock.extend(bad)
    with pytest.raises(TypeError, match="additional_time"):
        lock.extend("1")  # type: ignore[arg-type]
    assert await lock.acquire()  # renewed by the watchdog: an extension would be undone
    with pytest.raises(tenure.LockError, match="watchdog") as watchdog:
        await lock.extend(1)
    assert not isinstance(watchdog.value, tenure.NotOwnedError)
    await lock.release()
    lost: list[object] = []
    taken = async_client.lock("ext-lost", on_lost=lost.append)
    assert await taken.acquire(lease_time=30)
    assert await async_make_client().lock("ext-lost").force_release()
    with pytest.raises(tenure.LockLostError):
        await taken.extend(1)
    assert taken.lost  # on_lost runs apart from the caller, soon after:
    assert await async_wait_until(lambda: lost == [taken], timeout=2)
    with pytest.raises(tenure.NotOwnedError):
        await taken.release()


async def test_multi_lock_and_red_lock_extend_every_member(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    multi = async_client.multi_lock(async_client.lock("m1"), async_client.lock("m2"))
    assert await multi.acquire(lease_time=2)
    await multi.extend(20)
    assert all(20_000 < r.pttl(k) <= 22_000 for k in ("m1", "m2"))
    await multi.release()
    red = async_client.red_lock(*(async_client.lock(f"r{i}") for i in range(3)))
    assert await red.acquire(lease_time=2)
    await red.extend(20)  # the members held (a quorum at least; the last may come late)
    assert sum(20_000 < r.pttl(f"r{i}") <= 22_000 for i in range(3)) >= 2
    await red.release()
    with pytest.raises(tenure.NotOwnedError):
        await red.extend(1)
    red.close()
    multi.close()


# ------------------------------------------------------------------ item 12: kinds
FAMILY = {"lock": "plain", "fenced": "plain", "fair": "plain", "read": "rw", "write": "rw"}


@pytest.mark.parametrize("holder", KINDS)
@pytest.mark.parametrize("other", KINDS)
async def test_a_name_held_by_another_kind(
    async_client: tenure.AsyncClient, async_make_client, r: redis.Redis, holder: str, other: str
) -> None:
    """Lock, FairLock and FencedLock share one hash and exclude one another (as held);
    a ReadWriteLock's hash is another family: each refuses the other's with LockKindError,
    changing nothing (also for the very owner that holds the other kind)."""
    held = side(async_client, holder, "kind")
    assert await held.acquire(lease_time=30)
    before = r.hgetall("kind")
    same_family = FAMILY[holder] == FAMILY[other]
    if same_family:
        if holder == "read" and other == "read":
            pytest.skip("readers share")
        contender = side(async_make_client(), other, "kind")
        assert await contender.acquire(blocking=False) is False
        if "read" not in (holder, other):
            assert await contender.acquire(timeout=0.2) is False
    else:
        mine, theirs = side(async_client, other, "kind"), side(async_make_client(), other, "kind")
        for contender in (mine, theirs):
            with pytest.raises(tenure.LockKindError, match="kind"):
                await contender.acquire(timeout=5)
            with pytest.raises(tenure.LockKindError):
                await contender.release()
            if other in ("read", "write"):  # per side, as in Redisson: not in its mode
                assert await contender.force_release() is False
            else:
                with pytest.raises(tenure.LockKindError):
                    await contender.force_release()
    assert r.hgetall("kind") == before
    await held.release()
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
async def test_keys_of_a_wrong_type_are_refused(
    async_client: tenure.AsyncClient, r: redis.Redis, kind: str, junk: str
) -> None:
    r.set(junk, "junk")
    uses = {
        "kind": KINDS,
        "redisson_lock_queue:{kind}": ["fair"],
        "redisson_lock_timeout:{kind}": ["fair"],
        "redisson_lock_token:{kind}": ["fenced"],
    }
    lock = side(async_client, kind, "kind")
    if kind not in uses[junk]:
        assert await lock.acquire(lease_time=5)  # a key this kind does not use
        await lock.release()
        return
    with pytest.raises(tenure.LockKindError, match=junk.replace("{", r"\{")):
        await lock.acquire(timeout=5)
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


async def test_fenced_acquire_warns_once_per_client_without_persistence(
    async_make_client, caplog: pytest.LogCaptureFixture
) -> None:
    # the session servers run with --save '' --appendonly no
    caplog.set_level(logging.WARNING, logger="tenure")
    first = async_make_client()
    assert await first.fenced_lock("f18").acquire_token() is not None
    await first.fenced_lock("f18").release()
    assert await first.fenced_lock("f18-other").acquire(lease_time=5)
    warnings = persistence_warnings(caplog)
    assert len(warnings) == 1
    assert "go backwards" in warnings[0]
    second = async_make_client()
    assert await second.fenced_lock("f18").acquire(lease_time=5)
    assert len(persistence_warnings(caplog)) == 2  # once per client
    assert await second.lock("plain18").acquire(lease_time=5)  # plain locks never check
    assert len(persistence_warnings(caplog)) == 2


async def test_no_warning_with_aof(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tenure")
    srv = Server(valkey_binary(), "--appendonly", "yes").start()
    try:
        client = tenure.AsyncClient(srv.url)
        assert await client.fenced_lock("f18").acquire(lease_time=5)
        await client.close()
    finally:
        srv.stop()
    assert persistence_warnings(caplog) == []
