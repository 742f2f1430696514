# ReadWriteLock: one side lost (asyncio source of tests/_sync/test_rwlock_loss.py).
"""One side of an owner's ReadWriteLock holds lost on the server, the other side intact.

The owner of the write side may take the read side too (Redisson's rule): its write hold and
its read holds live in one hash. A failover to a replica that missed one grant loses one side
alone: the read taken under the write hold (the hash in write mode, the owner's reader field
gone), or the write taken over the owner's read holds (the hash in read mode, the writer
field gone). Written here as the replica would have it (HDEL, HSET), on a real server.

The owner's next attempt on either side expects what its client records (docs/internals.md,
"Re-entry after a loss"): it finds the lost side gone, takes nothing and raises
LockLostError. Only the lost side is reported (``lost``, ``on_lost``); the intact side is
neither reported nor taken off the client's table: it is still renewed, its body runs on and
its release goes through.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

import tenure
from support.twins import async_wait_until
from tenure import keys

SIDES = ["read", "write"]
"""The side whose attempt finds the loss."""


def owner_of(side: Any) -> str:
    return side.runner.owner()


def lose_the_reads(r: redis.Redis, name: str, owner: str) -> None:
    """The owner's read hold (taken under its write hold) goes; the write hold stays."""
    assert r.hdel(name, owner) == 1
    r.delete(*keys.rw_read_timeout_keys(name, owner, 1))
    assert r.hget(name, "mode") == b"write"


def lose_the_write(r: redis.Redis, name: str, owner: str) -> None:
    """The owner's write hold goes; its read hold stays, the lock in read mode."""
    assert r.hdel(name, keys.rw_writer_field(owner)) == 1
    r.hset(name, "mode", "read")


@pytest.mark.parametrize("side", SIDES)
async def test_lost_reads_under_an_intact_write_hold_leave_the_write_alone(
    async_make_client, r, side
):
    a = async_make_client()
    told: list[Any] = []
    name = f"reads-lost-write-intact-{side}"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert await wl.acquire()
    assert await rl.acquire()
    lose_the_reads(r, name, owner_of(rl))
    if side == "read":  # a read re-entry: it expects both holds
        with pytest.raises(tenure.LockLostError):
            await rl.acquire(blocking=False)
    else:  # a write re-entry: it expects the write hold alone, granted on top of it
        assert await wl.acquire(blocking=False)
        await wl.release()
        with pytest.raises(tenure.LockLostError):  # the read release finds its loss
            await rl.release()
    await async_wait_until(lambda: len(told) == 1, timeout=5)
    assert told == [rl]
    assert rl.lost
    assert not wl.lost
    assert wl.valid_for() > 0
    wl.checkpoint()
    assert r.hget(name, keys.rw_writer_field(owner_of(wl))) == b"1"
    await wl.release()
    assert told == [rl]
    assert not r.exists(name)


@pytest.mark.parametrize("side", SIDES)
async def test_a_lost_write_hold_over_intact_reads_leaves_the_reads_alone(
    async_make_client, r, side
):
    a = async_make_client()
    told: list[Any] = []
    name = f"write-lost-reads-intact-{side}"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert await wl.acquire()
    assert await rl.acquire()
    lose_the_write(r, name, owner_of(wl))
    with pytest.raises(tenure.LockLostError):
        await (rl if side == "read" else wl).acquire(blocking=False)
    await async_wait_until(lambda: len(told) == 1, timeout=5)
    assert told == [wl]
    assert wl.lost
    assert not rl.lost
    assert rl.valid_for() > 0
    rl.checkpoint()
    assert r.hget(name, owner_of(rl)) == b"1"  # nothing was taken
    await rl.release()
    assert told == [wl]
    assert not r.exists(name)
