# FairLock queues shared with Java Redisson (asyncio source of tests/_sync/test_fair_redisson.py).
"""FairLock queues shared with Redisson clients, emulated on a real server.

There is no JVM here: :class:`Redisson` runs, as Lua on the server, the three rules that
RedissonFairLock 4.x's scripts apply to a queue (written for these tests from those facts,
not copied): an acquire first drops the heads whose score has passed; a new waiter's score is
the last waiter's score (or now + the lock's PTTL) plus threadWaitTime (5 minutes); a grant
takes threadWaitTime off every score. Its unlock drops the dead heads too and wakes the head
on its own channel, as Redisson's does.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Callable

import redis

import tenure
from support.servers import Server
from support.twins import async_sleep, async_spawn, async_wait_until
from support.wire import deadlines, queue_of, server_ms
from support.workers import fair_wait
from tenure import keys

WAIT = 300_000
"""Redisson's threadWaitTime (ms)."""


def alive_key(name: str) -> str:
    """tenure's HASH of a fair lock's queued tenure waiters (owner -> alive-until ms)."""
    return keys.prefix_name("tenure_lock_waiters", name)

WATCHDOG = 3.0
"""A short watchdog_timeout for the liveness test: renewal period (and a head's grace) 1 s."""
SPAWN = multiprocessing.get_context("spawn")

NOW = """
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Redisson's first step: drop the heads whose score has passed (a head with no score is an
-- error in Redisson's script, and here: tonumber(false) is nil)
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then
        break
    end
    if tonumber(redis.call('zscore', KEYS[3], head)) > now then
        break
    end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
end
"""

ACQUIRE = (
    NOW
    + """
-- KEYS lock, queue, zset; ARGV lease ms, owner, threadWaitTime ms
local lock, queue, zset, owner, wait = KEYS[1], KEYS[2], KEYS[3], ARGV[2], tonumber(ARGV[3])
if redis.call('exists', lock) == 0
        and (redis.call('exists', queue) == 0 or redis.call('lindex', queue, 0) == owner) then
    redis.call('lpop', queue)
    redis.call('zrem', zset, owner)
    for _, waiter in ipairs(redis.call('zrange', zset, 0, -1)) do
        redis.call('zincrby', zset, -wait, waiter)  -- a grant: threadWaitTime off every score
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, ARGV[1])
    return nil
end
if redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, ARGV[1])
    return nil
end
local mine = redis.call('zscore', zset, owner)
if mine then
    return tonumber(mine) - wait - now
end
local last = redis.call('lindex', queue, -1)
local ttl
if last and last ~= owner then
    ttl = tonumber(redis.call('zscore', zset, last)) - now
else
    ttl = redis.call('pttl', lock)
end
redis.call('zadd', zset, ttl + wait + now, owner)  -- chained on the last waiter's score
redis.call('rpush', queue, owner)
return ttl
"""
)

UNLOCK = (
    NOW
    + """
-- KEYS lock, queue, zset; ARGV owner, lease ms, channel (the lock's; the head's adds :owner)
local lock, queue, owner = KEYS[1], KEYS[2], ARGV[1]
local function wake()
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call('publish', ARGV[3] .. ':' .. head, 0)
    end
end
if redis.call('exists', lock) == 0 then
    wake()
    return 1
end
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, ARGV[2])
    return 0
end
redis.call('del', lock)
wake()
return 1
"""
)


async def take_and_release(lock: tenure.AsyncFairLock) -> float:
    """Wait for ``lock``, release it; the monotonic time it was granted at."""
    assert await lock.acquire(timeout=30)
    at = time.monotonic()
    await lock.release()
    return at


class Redisson:
    """A Java Redisson client on fair lock ``name``, emulated: each owner is a Java thread."""

    def __init__(self, r: redis.Redis, name: str) -> None:
        self.r = r
        self.name = name
        self.keys = [name, keys.fair_queue_key(name), keys.fair_timeout_key(name)]
        self.client_id = str(uuid.uuid4())

    def owner(self, thread: int) -> str:
        return f"{self.client_id}:{thread}"

    def acquire(self, thread: int, lease_ms: int = 30_000) -> int | None:
        """One tryAcquire: None when granted, else the ms to wait (queued on the first)."""
        return self.r.eval(ACQUIRE, 3, *self.keys, lease_ms, self.owner(thread), WAIT)

    def unlock(self, thread: int, lease_ms: int = 30_000) -> int | None:
        channel = keys.lock_channel(self.name)
        return self.r.eval(UNLOCK, 3, *self.keys, self.owner(thread), lease_ms, channel)

    def die(self, thread: int) -> None:
        """That waiter's process died long ago: its Redisson deadline has passed."""
        self.r.zadd(keys.fair_timeout_key(self.name), {self.owner(thread): server_ms(self.r) - 1})


async def test_tenure_waiter_among_redisson_waiters_keeps_its_place_and_turn(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    """Issue 23 item 10: a Redisson grant takes 5 minutes off every score; on 14107aa that
    put the tenure waiter's entry (now + 30 s) in the past, the next Redisson acquire
    dropped it and the Java waiter behind it went first (the tenure waiter joined again at
    the tail, woken by its next renewal pass: 9.7 s late)."""
    java = Redisson(r, "shared")
    assert java.acquire(0, lease_ms=60_000) is None
    assert java.acquire(1) is not None  # queued
    lock = async_client.fair_lock("shared")
    job = async_spawn(take_and_release, lock)
    assert await async_wait_until(lambda: len(queue_of(r, "shared")) == 2)
    me = queue_of(r, "shared")[1]
    assert java.acquire(2) is not None
    assert queue_of(r, "shared") == [java.owner(1), me, java.owner(2)]
    scores = deadlines(r, "shared")
    assert scores[java.owner(2)] == scores[me] + WAIT  # Redisson chains on tenure's score
    assert java.unlock(0) == 1  # wakes thread 1, the head
    assert java.acquire(1) is None  # a Redisson grant: 5 minutes off every score
    assert java.acquire(2) is not None  # drops the heads whose score has passed
    assert queue_of(r, "shared") == [me, java.owner(2)]  # the tenure waiter is not one
    unlocked = time.monotonic()
    assert java.unlock(1) == 1  # wakes the tenure waiter, now the head
    at = await job.result(15)  # and released: that wakes thread 2
    assert at - unlocked < 1.0, f"woken {at - unlocked:.3f} s after the unlock"
    assert queue_of(r, "shared") == [java.owner(2)]
    assert r.hlen(alive_key("shared")) == 0
    assert java.acquire(2) is None  # in order: Java, Java, tenure, Java
    assert queue_of(r, "shared") == []
    assert deadlines(r, "shared") == {}
    assert java.unlock(2) == 1


async def test_dead_redisson_waiter_is_dropped_by_tenure_and_the_next_woken(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis
) -> None:
    """A Java holder's lease runs out (its process died) with a dead Java waiter at the head
    and a tenure waiter behind it: the tenure client that released before (its turn
    watcher, at the lease end) drops the dead Java waiter and wakes the tenure one. On
    14107aa the Java grant had put the tenure waiter's entry in the past: it was dropped
    with the dead one, and not woken until its next renewal pass (10 s)."""
    java = Redisson(r, "dead-java")
    holder = async_make_client().fair_lock("dead-java")
    assert await holder.acquire()  # under the watchdog
    assert java.acquire(1) is not None
    assert java.acquire(2) is not None
    lock = async_make_client().fair_lock("dead-java")
    job = async_spawn(take_and_release, lock)
    assert await async_wait_until(lambda: len(queue_of(r, "dead-java")) == 3)
    me = queue_of(r, "dead-java")[2]
    await holder.release()  # wakes thread 1
    assert java.acquire(1, lease_ms=1000) is None  # a grant, whose holder then dies
    granted = time.monotonic()
    java.die(2)
    assert queue_of(r, "dead-java") == [java.owner(2), me]
    at = await job.result(15)
    assert at - granted < 1.0 + 0.5, f"took {at - granted:.3f} s after the grant"
    assert queue_of(r, "dead-java") == []
    assert deadlines(r, "dead-java") == {}


async def test_dead_tenure_waiter_in_a_shared_queue_is_dropped_within_one_renewal_period(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis, server: Server
) -> None:
    """A tenure waiter killed with kill -9 in a queue of Java and tenure waiters. Its score
    still has 5 minutes in hand (a Java waiter ahead of it died and was dropped, which takes
    nothing off the scores behind), so Redisson's rules keep it: tenure's own alive-until
    time, no longer refreshed, drops it within one renewal period of its turn (the live
    tenure waiter's client does, in its next pass). On 14107aa the Java grant had put both
    tenure waiters' entries in the past: Redisson's unlock dropped them and woke the Java
    waiter behind them."""
    java = Redisson(r, "dead-tenure")
    assert java.acquire(0, lease_ms=60_000) is None
    assert java.acquire(1) is not None
    assert java.acquire(2) is not None
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=fair_wait, args=(server.url, "dead-tenure", None, ready, WATCHDOG))
    proc.start()
    try:
        assert ready.wait(30)
        assert await async_wait_until(lambda: len(queue_of(r, "dead-tenure")) == 3, 30)
        dead = queue_of(r, "dead-tenure")[2]
        lock = async_make_client(watchdog_timeout=WATCHDOG).fair_lock("dead-tenure")
        job = async_spawn(take_and_release, lock)
        assert await async_wait_until(lambda: len(queue_of(r, "dead-tenure")) == 4)
        me = queue_of(r, "dead-tenure")[3]
        assert java.acquire(3) is not None
        proc.kill()
        proc.join()
        await async_sleep(WATCHDOG + 0.5)  # the killed waiter's alive-until time has passed
        assert java.unlock(0) == 1
        assert java.acquire(1) is None  # a Redisson grant: 5 minutes off every score
        java.die(2)
        assert queue_of(r, "dead-tenure") == [java.owner(2), dead, me, java.owner(3)]
        unlocked = time.monotonic()
        assert java.unlock(1) == 1  # drops thread 2 (dead by its score), wakes the killed one
        delay = await job.result(15) - unlocked
        assert delay <= WATCHDOG / 3 + 0.5, f"took {delay:.3f} s after the unlock"
        assert queue_of(r, "dead-tenure") == [java.owner(3)]
        assert dead not in deadlines(r, "dead-tenure")
        assert r.hget(alive_key("dead-tenure"), dead) is None
        assert java.acquire(3) is None
    finally:
        proc.kill()
        proc.join()


def subscribed(r: redis.Redis, channel: str) -> redis.client.PubSub:
    """A raw subscriber of ``channel`` (its subscription confirmed)."""
    pubsub = r.pubsub()
    pubsub.subscribe(channel)
    assert pubsub.get_message(timeout=5) is not None  # the confirmation
    return pubsub


def woken_after(pubsub: redis.client.PubSub, start: float, bound: float) -> float:
    """Seconds from ``start`` to the first message ``pubsub`` gets (inf when none within
    ``bound`` seconds of ``start``)."""
    while (waited := time.monotonic() - start) < bound:
        message = pubsub.get_message(timeout=bound - waited)
        if message is not None and message["type"] == "message":
            return time.monotonic() - start
    return float("inf")


async def test_release_then_close_wakes_the_live_waiter_behind_a_dead_head(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis
) -> None:
    """A job releases a fair lock and exits at once, with a dead Java waiter at the head
    and a live one behind it. Redisson's unlock drops the dead head and wakes the live one;
    on f9ee21f the release woke the dead head only and left the rest to the releasing
    client's turn watcher (50 ms later), which the close stopped: the live Java waiter was
    never woken (it slept to its own timer, up to the 30 s lease) while the lock was free."""
    java = Redisson(r, "release-exit")
    client = async_make_client()
    holder = client.fair_lock("release-exit")
    assert await holder.acquire()
    assert java.acquire(1) is not None
    assert java.acquire(2) is not None
    java.die(1)
    pubsub = subscribed(r, keys.fair_waiter_channel("release-exit", java.owner(2)))
    try:
        start = time.monotonic()
        await holder.release()
        await client.close()  # the job exits
        woken = woken_after(pubsub, start, 3.0)
    finally:
        pubsub.close()
    assert woken < 1.0, f"the live waiter was woken after {woken:.3f} s"
    assert queue_of(r, "release-exit") == [java.owner(2)]
    assert java.owner(1) not in deadlines(r, "release-exit")
    assert java.acquire(2) is None


async def test_waiting_acquire_of_a_free_lock_drops_a_dead_head_and_is_granted(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    """The fair lock is free (its Java holder's lease ran out) and its queue's head is a
    dead Java waiter. Redisson's acquire drops it and is granted at once; on f9ee21f a
    waiting tenure acquire joined behind it and slept to its client's next renewal pass
    (10 s) or, as here, its deadline (3 s), granted only then."""
    java = Redisson(r, "free-dead-head")
    assert java.acquire(0) is None
    assert java.acquire(1) is not None
    java.die(1)
    r.delete("free-dead-head")  # the holder's lease ran out
    lock = async_client.fair_lock("free-dead-head")
    start = time.monotonic()
    assert await lock.acquire(timeout=3)
    took = time.monotonic() - start
    assert took < 1.0, f"granted after {took:.3f} s"
    assert queue_of(r, "free-dead-head") == []
    assert deadlines(r, "free-dead-head") == {}
    assert java.acquire(2) is not None  # queued behind the tenure holder
    await lock.release()
    assert java.acquire(2) is None


async def test_waiting_acquire_behind_a_dead_head_wakes_the_live_one_and_joins(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    """As above with a live Java waiter behind the dead head: the acquire drops the dead
    head, wakes the live one (its turn) and joins behind it, in order. On f9ee21f it joined
    behind the dead head and nobody woke the live Java waiter."""
    java = Redisson(r, "free-dead-live")
    assert java.acquire(0) is None
    assert java.acquire(1) is not None
    assert java.acquire(2) is not None
    java.die(1)
    r.delete("free-dead-live")
    lock = async_client.fair_lock("free-dead-live")
    pubsub = subscribed(r, keys.fair_waiter_channel("free-dead-live", java.owner(2)))
    try:
        start = time.monotonic()
        job = async_spawn(take_and_release, lock)
        joined = await async_wait_until(
            lambda: queue_of(r, "free-dead-live")[-1:] not in ([java.owner(2)], []), 5
        )
        woken = woken_after(pubsub, start, 3.0)
    finally:
        pubsub.close()
    assert woken < 1.0, f"the live waiter was woken after {woken:.3f} s"
    assert joined
    assert queue_of(r, "free-dead-live")[0] == java.owner(2)
    assert java.acquire(2) is None  # the live Java waiter first
    java.unlock(2)
    await job.result(15)
    assert queue_of(r, "free-dead-live") == []
