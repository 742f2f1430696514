# A loss reported once (asyncio source of tests/_sync/test_loss_reported_once.py).
"""A hold's loss is reported exactly once: one ``on_lost`` call, one WARNING.

A renewal pass finds a hold gone on the server (here a DEL) and takes it off the client's
hold table; it reports the loss once the pass ends. A pass of two batches reports after
its second batch's reply: held back here (a hook on the runner's ``perform``, real server
all the same), that opens a gap between the finding and the keeper's report. In that gap
the owner looks at the lock itself (a release, ``checkpoint()``, ``valid_for()``, a
re-entry): its look reports the loss first, and the keeper's report that follows must add
nothing, neither a second ``on_lost`` nor a second "hold lost" WARNING.

The watchdog lease is 30 s (a pass every 10 s): the test drives the one pass it needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

import tenure
from support.holding_back import async_hold_back_second_batch
from support.twins import async_spawn

LOST = "lost (expired or taken)"


async def released(lock: Any) -> None:
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def checked(lock: Any) -> None:
    with pytest.raises(tenure.LockLostError):
        lock.checkpoint()
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def looked(lock: Any) -> None:
    assert lock.valid_for() == 0.0
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def reentered(lock: Any) -> None:
    # The attempt's look reports the loss: the lock is then taken afresh, not re-entered.
    assert await lock.acquire(timeout=1)
    await lock.release()


LOOKS: dict[str, Callable[[Any], Any]] = {
    "release": released,
    "checkpoint": checked,
    "valid_for": looked,
    "reentry": reentered,
}


def counted(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``on_lost`` inline as it is delivered, so its calls are counted by the time the
    report returns (the client runs it in a task or thread of its own)."""
    monkeypatch.setattr(client._runner.ctx, "deliver", lambda callback, what: callback())


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The "hold lost" WARNINGs logged."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.WARNING and LOST in record.getMessage()
    ]


@pytest.mark.parametrize("look", sorted(LOOKS))
async def test_a_loss_the_owner_found_first_is_reported_once(
    async_make_client, r, monkeypatch, caplog, look
):
    reports: list[object] = []
    client = async_make_client(watchdog_timeout=30)
    lock = client.lock("once", on_lost=reports.append)
    reader = client.read_write_lock("once-rw").read_lock()  # the pass's second batch
    reached, go = async_hold_back_second_batch(client._runner, monkeypatch)
    counted(client, monkeypatch)
    caplog.set_level(logging.DEBUG, logger="tenure")
    try:
        assert await lock.acquire(timeout=1)
        assert await reader.acquire(timeout=1)
        assert r.delete("once") == 1  # the hold goes on the server
        renewal = async_spawn(client._runner._renewal_pass)
        assert await reached.wait(10)  # found gone and taken off; not reported yet
        await LOOKS[look](lock)  # the owner's look reports it first
        go.set()
        await renewal.result(10)
        assert reports == [lock]
        assert len(warnings(caplog)) == 1, warnings(caplog)
        with pytest.raises(tenure.NotOwnedError):  # and raised once
            await lock.release()
    finally:
        go.set()
        await reader.release()


async def test_a_loss_the_keeper_found_first_is_reported_once(
    async_make_client, r, monkeypatch, caplog
):
    reports: list[object] = []
    client = async_make_client(watchdog_timeout=30)
    lock = client.lock("once", on_lost=reports.append)
    counted(client, monkeypatch)
    caplog.set_level(logging.DEBUG, logger="tenure")
    assert await lock.acquire(timeout=1)
    assert r.delete("once") == 1
    await client._runner._renewal_pass()
    with pytest.raises(tenure.LockLostError):
        lock.checkpoint()
    with pytest.raises(tenure.LockLostError):
        await lock.release()
    assert reports == [lock]
    assert len(warnings(caplog)) == 1, warnings(caplog)
