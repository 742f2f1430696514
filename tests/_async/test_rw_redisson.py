# ReadWriteLock shared with Java Redisson (asyncio source of tests/_sync/test_rw_redisson.py).
"""ReadWriteLock read holds shared with Redisson readers, emulated on a real server.

There is no JVM here: :class:`RedissonReader` runs, as Lua on the server, what a Redisson
(3.3x, 4.x) reader does to the lock (written for these tests from those facts, not copied):
its read acquire (a hold count in the hash, a timeout key per hold, the hash's expiry raised
to its lease) and its watchdog's renewal, which SETS the hash's expiry to its
lockWatchdogTimeout (PEXPIRE, not an extension) while its holds exist. A reader whose JVM is
killed renews no more and never unlocks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import redis

import tenure
from support.twins import async_wait_until
from tenure import keys

WATCHDOG = 3.0
"""tenure's watchdog_timeout here: a renewal pass every 1 s."""

READ = """
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or mode == 'read' then
    redis.call('hset', KEYS[1], 'mode', 'read')
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
    return false
end
return redis.call('pttl', KEYS[1])
"""
"""Redisson's read acquire, for a lock in read mode or free (ARGV: lease ms, owner)."""

RENEW = """
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not n then
    return 0
end
for i = 1, n do
    redis.call('pexpire', KEYS[2] .. ':' .. i, ARGV[1])
end
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
"""
"""Redisson's read renewal (ARGV: lockWatchdogTimeout ms, owner): the hash's expiry is set."""


class RedissonReader:
    """One Java thread holding read holds on read-write lock ``name``, emulated."""

    def __init__(self, r: redis.Redis, name: str, watchdog_ms: int) -> None:
        self.r = r
        self.name = name
        self.watchdog_ms = watchdog_ms
        self.owner = f"{uuid.uuid4()}:1"
        self.prefix = keys.rw_read_timeout_prefix(name, self.owner)

    def acquire(self) -> int | None:
        """One read tryAcquire with the watchdog's lease: None when granted."""
        return self.r.eval(READ, 2, self.name, self.prefix, self.watchdog_ms, self.owner)

    def renew(self) -> int:
        """One watchdog renewal: 1 while the reader holds."""
        return int(self.r.eval(RENEW, 2, self.name, self.prefix, self.watchdog_ms, self.owner))


async def test_redisson_read_renewal_cut_is_repaired_before_the_lock_expires(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis
) -> None:
    """A Redisson reader's renewal cuts the lock's expiry to its 2 s watchdog lease, below a
    tenure reader's 10 s lease_time, and its JVM dies: tenure's next renewal pass (1 s
    period, shorter than Java's lease) restores the expiry to the tenure hold's lease, so no
    writer gets in while the tenure reader holds. On f9ee21f the lock expired 2 s after
    the cut and a tenure writer was granted while the reader's valid_for() said 7 s more."""
    reader_client = async_make_client(watchdog_timeout=WATCHDOG)
    writer_client = async_make_client(watchdog_timeout=WATCHDOG)
    read = reader_client.read_write_lock("mixed").read_lock()
    assert await read.acquire(lease_time=10)
    java = RedissonReader(r, "mixed", 2000)
    assert java.acquire() is None
    assert java.renew() == 1  # the cut: the hash's expiry is now 2 s
    assert r.pttl("mixed") <= 2000
    # the JVM is killed: no renewal, no unlock
    write = writer_client.read_write_lock("mixed").write_lock()
    started = time.monotonic()
    granted = await write.acquire(timeout=3.5)
    waited = time.monotonic() - started
    assert not granted, (
        f"a writer was granted after {waited:.2f} s while the reader counts its hold valid "
        f"for {read.valid_for():.2f} s (lost: {read.lost})"
    )
    assert 2000 < r.pttl("mixed") <= 10_000  # the tenure hold's own lease, never lengthened
    assert not read.lost
    assert read.valid_for() > 3
    await read.release()


async def test_read_hold_lost_under_a_redisson_cut_is_reported_within_a_renewal_period(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis
) -> None:
    """Java's watchdog lease (0.3 s) shorter than tenure's renewal period (1 s): the lock
    expires under the tenure reader before any pass can repair it (the bound docs/wire.md
    states). The loss is then reported by the next pass, not at the lease end: on f9ee21f
    the reader counted its hold valid (lost False) until its 10 s lease ran out."""
    client = async_make_client(watchdog_timeout=WATCHDOG)
    read = client.read_write_lock("cut").read_lock()
    assert await read.acquire(lease_time=10)
    java = RedissonReader(r, "cut", 300)
    assert java.acquire() is None
    assert java.renew() == 1
    assert await async_wait_until(lambda: r.exists("cut") == 0, timeout=2)
    expired = time.monotonic()
    assert await async_wait_until(lambda: read.lost, timeout=2.5), (
        f"no loss reported {time.monotonic() - expired:.2f} s after the lock expired; "
        f"valid_for() says {read.valid_for():.2f} s"
    )
    assert read.valid_for() == 0.0
