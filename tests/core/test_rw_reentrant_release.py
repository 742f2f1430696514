"""A read release that leaves the owner holds re-applies their lease on the server, as the
client counts them valid from the release's sending (found by the simulator's ReadWriteLock
model: a writer was granted while a reader's client still counted its hold valid)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

import tenure


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
