# Argument checks and misuse (asyncio source of tests/_sync/test_argument_errors.py).
"""What the public objects raise for a bad argument or a misuse, before any I/O, and the
few success paths beside them that no other test takes: a semaphore's ``sem(timeout=...)``
block, the permit checks without I/O, the names of what a client makes."""

from __future__ import annotations

import pytest

from support.twins import async_sleep
from tenure import LockLostError, LockTimeout, NotOwnedError


async def test_callbacks_and_decorated_objects_must_be_callable(async_client):
    lock = async_client.lock("checked")
    with pytest.raises(TypeError, match="a lock decorates a function, not int"):
        lock(timeout=5)(42)  # ``@lock(timeout=5)`` over something not callable
    with pytest.raises(TypeError, match="on_doubt must be callable, not str"):
        async_client.multi_lock(lock, on_doubt="call me")
    with pytest.raises(TypeError, match="on_lost must be callable"):
        async_client.permit_expirable_semaphore("checked-psem", on_lost=42)


async def test_a_block_or_decorator_checks_its_times_where_it_is_written(async_client):
    """``lock(lease_time=-5)`` (``@lock(...)`` too) raises at once, as ``acquire()`` would,
    not at the first ``with`` or call."""
    kinds = [
        async_client.lock("early"),
        async_client.fair_lock("early-fair"),
        async_client.read_write_lock("early-rw").write_lock(),
        async_client.multi_lock(async_client.lock("early-m")),
    ]
    for lock in kinds:
        with pytest.raises(ValueError, match="timeout must not be NaN"):
            lock(timeout=float("nan"))
        with pytest.raises(ValueError, match="lease_time must be a number of seconds > 0"):
            lock(lease_time=-5)
        with pytest.raises(ValueError, match="max_hold must be a number of seconds > 0"):
            lock(max_hold=0)
        with pytest.raises(TypeError, match="timeout must be a number of seconds, not str"):
            lock("5")
        assert not await lock.owned()  # nothing sent, nothing taken
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        async_client.semaphore("early-sem")(timeout=-2)
    psem = async_client.permit_expirable_semaphore("early-psem")
    with pytest.raises(ValueError, match="lease_time must be a number of seconds > 0"):
        psem(lease_time=0)


async def test_a_semaphore_block_takes_one_permit_and_gives_it_back(async_client):
    sem = async_client.semaphore("block")
    assert await sem.try_set_permits(1)
    async with sem(timeout=1) as taken:
        assert taken is sem
        assert await sem.available_permits() == 0
        with pytest.raises(LockTimeout, match=r"no permit within 0\.1 s"):
            async with sem(timeout=0.1):
                pass
    assert await sem.available_permits() == 1


async def test_a_permit_semaphore_block_needs_its_call(async_client):
    psem = async_client.permit_expirable_semaphore("psem-block")
    assert await psem.try_set_permits(1)
    with pytest.raises(TypeError, match=r"use 'with semaphore\(timeout=\.\.\."):
        async with psem:
            pass
    assert await psem.available_permits() == 1  # nothing taken


async def test_permit_checks_tell_a_foreign_permit_from_one_that_ran_out(async_client):
    psem = async_client.permit_expirable_semaphore("psem-checks")
    assert await psem.try_set_permits(1)
    unknown = "0123456789abcdef0123456789abcdef"
    with pytest.raises(NotOwnedError, match=f"permit {unknown} is not out here"):
        psem.checkpoint(unknown)
    assert psem.valid_for(unknown) == 0.0
    permit = await psem.acquire(lease_time=0.2)
    assert permit is not None
    psem.checkpoint(permit)  # out and valid: no error
    assert 0 < psem.valid_for(permit) <= 0.2
    valid_for = psem.valid_for(permit)
    # Ran out on the local clock (no I/O here, the renewal loop may not have looked yet).
    await async_sleep(valid_for + 0.05)
    with pytest.raises(LockLostError, match=f"permit {permit} (ran out|was lost)"):
        psem.checkpoint(permit)


async def test_what_a_client_makes_names_itself(async_client):
    latch = async_client.count_down_latch("named-latch")
    assert latch.name == "named-latch"
    assert repr(latch) == f"<{type(latch).__name__} 'named-latch'>"
    rw = async_client.read_write_lock("named-rw")
    assert repr(rw) == f"<{type(rw).__name__} 'named-rw'>"
    first, second = async_client.lock("named-a"), async_client.lock("named-b")
    multi = async_client.multi_lock(first, second)
    assert multi.members == (first, second)
    red = async_client.red_lock(first, second, node_timeout=0.25)
    assert red.node_timeout == 0.25
