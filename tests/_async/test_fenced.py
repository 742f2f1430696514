# FencedLock (asyncio source of tests/_sync/test_fenced.py).
"""FencedLock: tokens and the fenced-write helper. A paused holder: tests/process."""

from __future__ import annotations

from functools import partial

import pytest

import tenure
from support.twins import async_gather, async_sleep
from tenure import keys


async def test_token_increments_on_every_acquisition_including_reentry(async_client, r):
    lock = async_client.fenced_lock("ledger")
    assert lock.token is None
    t1 = await lock.acquire_token()
    t2 = await lock.acquire_token()  # re-entry draws a new token too
    assert t1 is not None
    assert t2 == t1 + 1
    assert lock.token == t2
    assert await lock.hold_count() == 2
    assert int(r.get(keys.token_key("ledger"))) == t2
    assert r.ttl(keys.token_key("ledger")) == -1  # the counter never expires
    await lock.release()
    await lock.release()
    assert not await lock.locked()
    assert lock.token == t2  # still the latest acquisition's token


async def test_refused_acquire_returns_none_and_keeps_no_token(async_make_client):
    a, b = async_make_client(), async_make_client()
    la, lb = a.fenced_lock("x"), b.fenced_lock("x")
    assert await la.acquire_token(lease_time=5) is not None
    assert await lb.acquire_token(blocking=False) is None
    assert await lb.acquire_token(timeout=0.05) is None
    assert lb.token is None
    await la.release()


@pytest.mark.parametrize(("clients", "per_client", "rounds"), [(3, 2, 10), (2, 2, 5)])
async def test_tokens_strictly_increase_across_clients_and_callers(
    async_make_client, clients, per_client, rounds
):
    made = [async_make_client() for _ in range(clients)]
    seen: list[int] = []

    async def worker(c: tenure.AsyncClient) -> None:
        lock = c.fenced_lock("shared")
        for _ in range(rounds):
            token = await lock.acquire_token(timeout=10)
            assert token is not None
            assert lock.token == token
            seen.append(token)  # appended in acquisition order: we hold the lock
            await async_sleep(0)
            await lock.release()

    await async_gather(*(partial(worker, c) for c in made for _ in range(per_client)))
    total = clients * per_client * rounds
    assert len(seen) == total
    assert seen == sorted(seen)
    assert len(set(seen)) == total
    lock = made[0].fenced_lock("shared")
    t1 = await lock.acquire_token()
    t2 = await lock.acquire_token()
    assert t2 == t1 + 1
    assert await lock.hold_count() == 2
    await lock.release()
    await lock.release()


async def test_fenced_write_refuses_lower_tokens_and_accepts_equal(r):
    assert tenure.fenced_read(r, "res") is None
    assert tenure.fenced_write(r, "res", 5, b"a")
    assert tenure.fenced_write(r, "res", 5, b"b")  # same holder writing twice
    assert tenure.fenced_write(r, "res", 7, "c")
    assert not tenure.fenced_write(r, "res", 6, b"stale")
    assert tenure.fenced_read(r, "res") == (7, b"c")
    with pytest.raises(TypeError):
        tenure.fenced_write(r, "res", "7", b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token must be >= 0"):
        tenure.fenced_write(r, "res", -1, b"x")


async def test_fenced_write_compares_tokens_exactly_above_2_to_the_53(r):
    """Tokens come from INCR (up to 2^63 - 1); a Lua number is a double, equal for 2^53 and
    2^53 + 1 (before: the stale write was accepted and the stored token went back)."""
    for high, stale in [(2**53 + 1, 2**53), (10**18 + 7, 10**18 + 5), (2**63 - 1, 2**63 - 2)]:
        key = f"res-{high}"
        assert tenure.fenced_write(r, key, high, b"new")
        assert not tenure.fenced_write(r, key, stale, b"stale")
        assert not tenure.fenced_write(r, key, 9, b"short")  # fewer digits
        assert tenure.fenced_read(r, key) == (high, b"new")
        assert tenure.fenced_write(r, key, high, b"again")  # equal: the same holder
        assert tenure.fenced_write(r, key, high + 1, b"next")
        assert tenure.fenced_read(r, key) == (high + 1, b"next")
