# GENERATED from tests/_async/test_argument_errors.py by tools/unasync.py: edit that file, not this one.
"""What the public objects raise for a bad argument or a misuse, before any I/O, and the
few success paths beside them that no other test takes: a semaphore's ``sem(timeout=...)``
block, the permit checks without I/O, the names of what a client makes."""

from __future__ import annotations

import pytest

from support.twins import sleep
from tenure import LockLostError, LockTimeout, NotOwnedError


def test_callbacks_and_decorated_objects_must_be_callable(client):
    lock = client.lock("checked")
    with pytest.raises(TypeError, match="a lock decorates a function, not int"):
        lock(timeout=5)(42)  # ``@lock(timeout=5)`` over something not callable
    with pytest.raises(TypeError, match="on_doubt must be callable, not str"):
        client.multi_lock(lock, on_doubt="call me")
    with pytest.raises(TypeError, match="on_lost must be callable"):
        client.permit_expirable_semaphore("checked-psem", on_lost=42)


def test_a_block_or_decorator_checks_its_times_where_it_is_written(client):
    """``lock(lease_time=-5)`` (``@lock(...)`` too) raises at once, as ``acquire()`` would,
    not at the first ``with`` or call."""
    kinds = [
        client.lock("early"),
        client.fair_lock("early-fair"),
        client.read_write_lock("early-rw").write_lock(),
        client.multi_lock(client.lock("early-m")),
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
        assert not lock.owned()  # nothing sent, nothing taken
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        client.semaphore("early-sem")(timeout=-2)
    psem = client.permit_expirable_semaphore("early-psem")
    with pytest.raises(ValueError, match="lease_time must be a number of seconds > 0"):
        psem(lease_time=0)


def test_a_semaphore_block_takes_one_permit_and_gives_it_back(client):
    sem = client.semaphore("block")
    assert sem.try_set_permits(1)
    with sem(timeout=1) as taken:
        assert taken is sem
        assert sem.available_permits() == 0
        with pytest.raises(LockTimeout, match=r"no permit within 0\.1 s"):
            with sem(timeout=0.1):
                pass
    assert sem.available_permits() == 1


def test_a_permit_semaphore_block_needs_its_call(client):
    psem = client.permit_expirable_semaphore("psem-block")
    assert psem.try_set_permits(1)
    with pytest.raises(TypeError, match=r"use 'with semaphore\(timeout=\.\.\."):
        with psem:
            pass
    assert psem.available_permits() == 1  # nothing taken


def test_permit_checks_tell_a_foreign_permit_from_one_that_ran_out(client):
    psem = client.permit_expirable_semaphore("psem-checks")
    assert psem.try_set_permits(1)
    unknown = "0123456789abcdef0123456789abcdef"
    with pytest.raises(NotOwnedError, match=f"permit {unknown} is not out here"):
        psem.checkpoint(unknown)
    assert psem.valid_for(unknown) == 0.0
    permit = psem.acquire(lease_time=0.2)
    assert permit is not None
    psem.checkpoint(permit)  # out and valid: no error
    assert 0 < psem.valid_for(permit) <= 0.2
    valid_for = psem.valid_for(permit)
    # Ran out on the local clock (no I/O here, the renewal loop may not have looked yet).
    sleep(valid_for + 0.05)
    with pytest.raises(LockLostError, match=f"permit {permit} (ran out|was lost)"):
        psem.checkpoint(permit)


def test_what_a_client_makes_names_itself(client):
    latch = client.count_down_latch("named-latch")
    assert latch.name == "named-latch"
    assert repr(latch) == f"<{type(latch).__name__} 'named-latch'>"
    rw = client.read_write_lock("named-rw")
    assert repr(rw) == f"<{type(rw).__name__} 'named-rw'>"
    first, second = client.lock("named-a"), client.lock("named-b")
    multi = client.multi_lock(first, second)
    assert multi.members == (first, second)
    red = client.red_lock(first, second, node_timeout=0.25)
    assert red.node_timeout == 0.25
