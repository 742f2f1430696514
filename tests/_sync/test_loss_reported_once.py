# GENERATED from tests/_async/test_loss_reported_once.py by tools/unasync.py: edit that file, not this one.
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
from support.holding_back import hold_back_second_batch
from support.twins import spawn

LOST = "lost (expired or taken)"


def released(lock: Any) -> None:
    with pytest.raises(tenure.LockLostError):
        lock.release()


def checked(lock: Any) -> None:
    with pytest.raises(tenure.LockLostError):
        lock.checkpoint()
    with pytest.raises(tenure.LockLostError):
        lock.release()


def looked(lock: Any) -> None:
    assert lock.valid_for() == 0.0
    with pytest.raises(tenure.LockLostError):
        lock.release()


def reentered(lock: Any) -> None:
    # The attempt's look reports the loss: the lock is then taken afresh, not re-entered.
    assert lock.acquire(timeout=1)
    lock.release()


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
def test_a_loss_the_owner_found_first_is_reported_once(
    make_client, r, monkeypatch, caplog, look
):
    reports: list[object] = []
    client = make_client(watchdog_timeout=30)
    lock = client.lock("once", on_lost=reports.append)
    reader = client.read_write_lock("once-rw").read_lock()  # the pass's second batch
    reached, go = hold_back_second_batch(client._runner, monkeypatch)
    counted(client, monkeypatch)
    caplog.set_level(logging.DEBUG, logger="tenure")
    try:
        assert lock.acquire(timeout=1)
        assert reader.acquire(timeout=1)
        assert r.delete("once") == 1  # the hold goes on the server
        renewal = spawn(client._runner._renewal_pass)
        assert reached.wait(10)  # found gone and taken off; not reported yet
        LOOKS[look](lock)  # the owner's look reports it first
        go.set()
        renewal.result(10)
        assert reports == [lock]
        assert len(warnings(caplog)) == 1, warnings(caplog)
        with pytest.raises(tenure.NotOwnedError):  # and raised once
            lock.release()
    finally:
        go.set()
        reader.release()


def test_a_loss_the_keeper_found_first_is_reported_once(
    make_client, r, monkeypatch, caplog
):
    reports: list[object] = []
    client = make_client(watchdog_timeout=30)
    lock = client.lock("once", on_lost=reports.append)
    counted(client, monkeypatch)
    caplog.set_level(logging.DEBUG, logger="tenure")
    assert lock.acquire(timeout=1)
    assert r.delete("once") == 1
    client._runner._renewal_pass()
    with pytest.raises(tenure.LockLostError):
        lock.checkpoint()
    with pytest.raises(tenure.LockLostError):
        lock.release()
    assert reports == [lock]
    assert len(warnings(caplog)) == 1, warnings(caplog)
