# GENERATED from tests/_async/test_lock_looks.py by tools/unasync.py: edit that file, not this one.
"""A client keeps one back-up look per lock (docs/wire.md, the wake queue), whichever lock
object released it: ``with client.lock(name):`` makes a new object each time, and
must cost the server what a reused object does. Reviewer R3 measured 1.0 look per
acquisition (twice the scripts, half the acquisitions) with new objects, 0 with one."""

from __future__ import annotations

import time

import pytest

from support.twins import spawn
from tenure.core.lock import LockCore

RUN = 0.8  # seconds of alternating holds: several look graces (0.1 s) long


def alternate(client, name: str, until: float, fresh: bool) -> int:
    """Take ``name`` and let it go until ``until`` (monotonic): a new lock object each
    time when ``fresh``, else one object. Returns the holds taken."""
    held, lock = 0, client.lock(name)
    while time.monotonic() < until:
        if fresh:
            lock = client.lock(name)
        assert lock.acquire(timeout=5)
        held += 1
        lock.release()
    return held


@pytest.mark.parametrize("fresh", [True, False], ids=["new-objects", "one-object"])
def test_new_lock_objects_make_no_more_looks_than_one(
    make_client, monkeypatch, fresh: bool
) -> None:
    looks: list[str] = []
    look = LockCore._wake_check

    def counted(self):
        looks.append(self.name)  # (another test's client may still make one of its own)
        return look(self)

    monkeypatch.setattr(LockCore, "_wake_check", counted)
    until = time.monotonic() + RUN
    jobs = [spawn(alternate, make_client(), "looks", until, fresh) for _ in range(2)]
    held = sum([job.result(30) for job in jobs])
    assert held >= 20, held  # the two clients took turns (each release woke the other)
    # Every release re-arms its client's look, so none is due while they alternate: at
    # most the last of each client's comes (0.1 s later, after the run).
    assert looks.count("looks") <= 2, (looks.count("looks"), held)
