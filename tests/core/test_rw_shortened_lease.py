"""A read release that leaves other readers sets the lock's expiry to the longest remaining
read hold, which may shorten it (scripts/rw_read_release.lua). Waiters refused earlier saw
the longer PTTL: they must hear of the shorter one, or the lock sits free once the remaining
holds end by expiry while they sleep to the old end (found by the simulator's ReadWriteLock
model, seeds 38, 60 and 73 in tests/test_sim.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

import tenure
from support.twins import wait_until
from tenure import keys

from .test_rw_uncontended_calls import counted

SHORT = 0.5
"""The remaining reader's lease (seconds): taken with lease_time, never renewed."""
LONG = 6.0
"""The released hold's lease (seconds): what the waiting writer saw."""


@contextmanager
def a_writer_asleep(r: redis.Redis, name: str, client: tenure.Client) -> Iterator[list[float]]:
    """A thread's writer of ``client`` waiting on ``name``, refused and asleep: its client
    registered in the wake queue (rw_write_acquire.lua) after an attempt that saw the
    ``LONG`` hold's PTTL. Yields the list its grant's ``time.monotonic()`` goes into; the
    exit waits for the thread."""
    write = client.read_write_lock(name).write_lock()
    got: list[float] = []

    def wait() -> None:
        if write.acquire(timeout=LONG + 2):
            got.append(time.monotonic())
            write.release()

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        queue = keys.lock_wake_queue(name)
        assert wait_until(lambda: r.zscore(queue, client.client_id) is not None, 5)
        assert r.pttl(name) > (LONG - 1) * 1000
        yield got
    finally:
        waiter.join(LONG + 5)


def assert_got_in_soon(got: list[float], free_at: float, what: str) -> None:
    """The writer got the lock within 0.5 s of ``free_at`` (the shortened lease's end)."""
    assert got, "the writer never got the lock"
    free_for = got[0] - free_at  # how long the lock sat free with the writer asleep
    print(f"the writer got in {free_for:.3f} s after {what}")
    assert free_for < 0.5, f"the writer got in {free_for:.3f} s after the lock was free"


def listening(r: redis.Redis, name: str) -> redis.client.PubSub:
    """A listener on the ReadWriteLock ``name``'s channel, its subscription confirmed."""
    listener = r.pubsub()
    listener.subscribe(keys.rw_channel(name))
    assert listener.get_message(timeout=5) is not None  # the subscribe confirmation
    return listener


def test_a_writer_waiting_on_readers_gets_in_when_the_shortened_lease_ends(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    name = "rw-shortened"
    short = make_client().read_write_lock(name).read_lock()
    long = make_client().read_write_lock(name).read_lock()
    assert long.acquire(lease_time=LONG)
    assert short.acquire(lease_time=SHORT)
    short_end = time.monotonic() + SHORT  # the server lets it go by then at the latest
    with a_writer_asleep(r, name, make_client()) as got:
        long.release()  # the hash now lives as long as the short hold alone
        assert 0 < r.pttl(name) <= SHORT * 1000
    # Before the fix the writer slept to the long lease's end: about 5.5 s here.
    assert_got_in_soon(got, short_end, "the short hold ended")


def test_a_reentrant_read_release_runs_one_pttl_more_and_publishes_only_when_it_shortens(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    """The cost on the common path: a re-entrant read release that leaves the expiry where
    it was (or later) runs one PTTL more than before this check and publishes nothing; one
    that shortens it beyond the drift allowance publishes once."""
    listener = listening(r, "calls-reentrant")
    read = make_client().read_write_lock("calls-reentrant").read_lock()
    assert read.acquire(lease_time=30)
    assert read.acquire(lease_time=30)
    read.release()  # scripts loaded
    assert read.acquire(lease_time=30)
    calls = counted(r, read.release)  # the newest hold goes, the same lease re-applied
    assert calls == REENTRANT
    assert listener.get_message(timeout=0.2) is None
    assert read.acquire(lease_time=LONG)  # hold 2, taking the expiry to LONG
    assert read.acquire(lease_time=SHORT)  # hold 3, taking no expiry
    read.release()  # hold 3 goes: re-applies SHORT, hold 2 keeps the expiry
    assert listener.get_message(timeout=0.2) is None
    calls = counted(r, read.release)  # hold 2 goes: the expiry moves to hold 1's 30 s...
    assert "publish" not in calls  # ...later than LONG: nothing to tell
    assert read.acquire(lease_time=60)  # hold 2 again, the expiry at 60 s
    calls = counted(r, read.release)  # back to hold 1's 30 s: 30 s sooner
    assert calls["publish"] == 1
    message = listener.get_message(timeout=5)
    assert message is not None
    assert message["data"] == b"1"
    read.release()
    listener.close()


REENTRANT = {
    "hmget": 1,  # the mode and the owner's count
    "hget": 1,  # the declaration's count (_rw_readers.lua)
    "hgetall": 1,  # every reader declared?
    "pttl": 2,  # the remaining hold's timeout key, and the hash's expiry before (the check)
    "hincrby": 1,
    "del": 1,  # the released hold's timeout key
    "set": 1,  # the remaining hold's lease re-applied
    "pexpire": 1,
}
"""A re-entrant read release leaving one hold: 10 commands (9 before the check: one PTTL)."""


def test_a_writer_waiting_on_a_reentrant_writer_gets_in_when_the_shortened_lease_ends(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    # A write re-entry adds its lease to the time left (Redisson's rule); the release of
    # that hold sets the expiry back to the remaining hold's lease: shorter.
    name = "rw-write-shortened"
    holder = make_client().read_write_lock(name).write_lock()
    assert holder.acquire(lease_time=SHORT)
    assert holder.acquire(lease_time=LONG)
    with a_writer_asleep(r, name, make_client()) as got:
        holder.release()  # the newest hold goes: SHORT re-applied to the one left
        short_end = time.monotonic() + SHORT  # the server lets it go by then at the latest
        assert 0 < r.pttl(name) <= SHORT * 1000
    assert_got_in_soon(got, short_end, "the re-entrant writer's lease ended")


def test_a_reentrant_write_release_runs_one_pttl_more_and_publishes_only_when_it_shortens(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    listener = listening(r, "calls-write")
    write = make_client().read_write_lock("calls-write").write_lock()
    assert write.acquire(lease_time=30)
    assert write.acquire(lease_time=30)
    write.release()  # scripts loaded (and 60 s cut to 30 s: published)
    assert listener.get_message(timeout=5) is not None
    assert write.acquire(lease_time=0.01)  # the expiry: 30 s left + 10 ms
    # Back to 30 s, 10 ms sooner: within the drift allowance, nothing published. 4
    # commands (3 before the check: HMGET, HINCRBY, PEXPIRE).
    assert counted(r, write.release) == {"hmget": 1, "pttl": 1, "hincrby": 1, "pexpire": 1}
    assert listener.get_message(timeout=0.2) is None
    write.release()
    listener.close()
