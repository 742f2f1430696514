"""A read release that leaves the owner holds re-applies their lease on the server, as the
client counts them valid from the release's sending (found by the simulator's ReadWriteLock
model: a writer was granted while a reader's client still counted its hold valid)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

import tenure
from tenure.core.context import Context
from tenure.core.effects import Call
from tenure.core.lock import LockCore
from tenure.core.rwlock import ReadLockCore, WriteLockCore

from .scripted import Clock, drive


def test_a_read_release_leaving_an_older_hold_keeps_the_lock_while_it_counts_valid(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    reader, writer = make_client(), make_client()
    read = reader.read_write_lock("reentrant").read_lock()
    write = writer.read_write_lock("reentrant").write_lock()
    started = time.monotonic()
    assert read.acquire(lease_time=1.0)  # hold 1: on the server until started + 1.0
    time.sleep(0.5)
    assert read.acquire(lease_time=1.0)  # hold 2, newer
    read.release()  # hold 2 goes; hold 1 stays, counted valid for about 1 s from now
    valid = read.valid_for()
    assert valid > 0.9
    # The server keeps the lock at least as long as the client counts hold 1 valid.
    assert r.pttl("reentrant") >= (valid - 0.05) * 1000
    time.sleep(max(0.0, started + 1.2 - time.monotonic()))  # past hold 1's first lease
    assert read.valid_for() > 0  # still counted valid by the reader's client...
    assert not write.acquire(blocking=False)  # ...so no writer gets in
    read.release()
    assert write.acquire(blocking=False)
    write.release()


@pytest.mark.parametrize("kind", [LockCore, ReadLockCore, WriteLockCore])
def test_a_release_in_flight_counts_the_hold_left_valid_no_longer_than_its_lease(
    ctx: Context, owner: str, clock: Clock, kind: type[LockCore]
) -> None:
    # Hold 1 with a 1 s lease, hold 2 with 10 s a moment later; hold 2's release is sent
    # and its reply not yet in (a paused client): the server may already have set what is
    # left to hold 1's lease from the release on, so the client must not count on hold 2's.
    # (Found by the simulator's RW model, seed 74: a writer granted meanwhile.)
    core = kind(ctx, "reentrant")
    acquired = "rw_write_acquire" if kind is WriteLockCore else None
    script = acquired or ("rw_read_acquire" if kind is ReadLockCore else "lock_acquire")
    drive(core.acquire(owner, True, None, 1.0), [(script, None)])
    clock.advance(0.5)
    drive(core.acquire(owner, True, None, 10.0), [(script, None)])
    clock.advance(0.1)
    release = core.release(owner)
    call = release.send(None)  # the release script, sent at the clock's now
    assert isinstance(call, Call)
    hold = ctx.holds.get(core.key, core.field(owner))
    assert hold is not None
    assert hold.valid_until <= clock.now + 1.0  # not 0.6 + 10 s from hold 2's grant
    release.close()
