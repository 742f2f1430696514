# A waiter refused before its client's idle release (asyncio source of
# tests/_sync/test_wake_put_back.py).
"""A release that tells its script its client has no waiter (its subscription lingers
idle: docs/wire.md, "One client woken per unlock") puts that client back in the wake queue
with a half score, "not seen waiting". A waiter of the same client refused just before that
release, and joining the lingering subscription just after it, must try again: its
registration was undone, and a subscription quiet since its attempt no longer says an
unlock will reach it."""

from __future__ import annotations

import time

from support.twins import AsyncEvent, async_sleep, async_spawn, async_wait_until
from tenure import keys


def scripts_run(r) -> int:
    return int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def seen_waiting(r, queue: str, client) -> bool:
    """``client`` is in the wake queue with a whole score (a refused attempt's)."""
    score = r.zscore(queue, client.client_id)
    return score is not None and score % 1 == 0


async def test_a_waiter_refused_before_its_clients_idle_release_tries_again(
    async_make_client, r
) -> None:
    # C's owner A holds the lock, C's subscription lingering with no waiter; D and E take
    # it in a loop. C's owner B is refused; A's release (idle: B has not joined yet) goes
    # to D or E and puts C back with a half; B then joins the quiet subscription. Unless B
    # tries again (and so registers C again), every unlock goes to D or E, which each
    # register again within their yield: B waited until they stopped (3 s here).
    name = "putback"
    queue = keys.lock_wake_queue(name)
    c, d, e, x = (async_make_client() for _ in range(4))
    first = x.lock(name)
    assert await first.acquire()
    a = c.lock(name)
    a_took, a_may_go = AsyncEvent(), AsyncEvent()

    async def a_waits() -> None:
        assert await a.acquire(timeout=10)
        a_took.set()
        assert await a_may_go.wait(10)
        await a.release()

    job = async_spawn(a_waits)
    assert await async_wait_until(lambda: r.zscore(queue, c.client_id) is not None)
    stop = AsyncEvent()

    async def loop(client) -> int:
        lock, held = client.lock(name), 0
        while not stop.is_set():
            assert await lock.acquire(timeout=10)
            held += 1
            await async_sleep(0.02)
            await lock.release()
        return held

    await first.release()  # to C: A holds, C's subscription lingers (LINGER, 0.5 s)
    assert await a_took.wait(5)
    loopers = [async_spawn(loop, d), async_spawn(loop, e)]
    assert await async_wait_until(lambda: seen_waiting(r, queue, d) and seen_waiting(r, queue, e))
    await async_sleep(0.12)  # X's back-up look (0.1 s after its unlock) is over
    (listener,) = c._runner._listener._by_node.values()  # C's pub/sub connection
    mutex = listener._mutex
    b = c.lock(name)
    waited: list[float] = []

    async def b_waits() -> None:
        began = time.monotonic()
        assert await b.acquire(timeout=10)
        waited.append(time.monotonic() - began)
        await b.release()

    before = scripts_run(r)
    await mutex.acquire()  # B's join waits for it: B is refused, then A releases
    try:
        waiter = async_spawn(b_waits)
        assert await async_wait_until(lambda: scripts_run(r) > before, 5, 0.001)
        # B's attempt was refused (C registered); B waits for the mutex to join. A's
        # release sees no waiter of C: it tells its script so.
        assert not listener._parking.channels[keys.lock_channel(name)].tickets
        a_may_go.set()
        # Put back, not seen waiting (its release's script ran; what follows its reply
        # may need the mutex: a drain of its own unlock)
        assert await async_wait_until(lambda: r.zscore(queue, c.client_id) % 1 == 0.5, 5)
    finally:
        mutex.release()
    await job.result(5)
    try:
        await async_wait_until(lambda: waited, 3.0)  # D and E stop then, if not before
    finally:
        stop.set()
        held = [await job.result(15) for job in loopers]
        await waiter.result(15)
    assert min(held) >= 1, held  # D and E took turns meanwhile
    assert waited[0] < 1.0, f"B waited {waited[0]:.3f} s; D and E took it {held} times"


async def test_a_client_put_back_by_its_own_release_is_woken_beside_a_client_with_two_waiters(
    async_make_client, r
) -> None:
    # Reviewer R6 (F1). W's release (its subscription lingering, no waiter of W left) puts W
    # back with a half; W's next acquire is refused and finds its lingering subscription
    # fresh, so it made no second attempt, and its first did not register W: W stayed
    # "not seen waiting". R has two waiters, one always refused and registered, and an
    # unlock goes to a half only when nobody seen waiting is left: every unlock went to R,
    # and W slept to its timeout (4 of 18 acquires at 3 s) or its holder's lease end.
    name = "twowaiters"
    queue = keys.lock_wake_queue(name)
    rc, wc = async_make_client(), async_make_client()
    stop = AsyncEvent()

    async def loop() -> int:
        lock, held = rc.lock(name), 0
        while not stop.is_set():
            assert await lock.acquire(timeout=10)
            held += 1
            await async_sleep(0.001)
            await lock.release()
        return held

    loopers = [async_spawn(loop), async_spawn(loop)]
    assert await async_wait_until(lambda: seen_waiting(r, queue, rc))
    lock = wc.lock(name)
    waits: list[float] = []
    try:
        for _ in range(6):
            began = time.monotonic()
            assert await lock.acquire(timeout=5), f"W timed out after {waits}"
            waits.append(time.monotonic() - began)
            await lock.release()
            await async_sleep(0.02)  # W rests (its subscription lingers: 0.5 s)
    finally:
        stop.set()
        held = [await job.result(15) for job in loopers]
    assert min(held) >= 1, held
    assert max(waits) < 1.0, (waits, held)
