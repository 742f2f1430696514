# GENERATED from tests/_async/test_semaphore_release_cancel.py by tools/unasync.py: edit that file, not this one.
"""A semaphore release cancelled on its way (reviewer R5, S1): the caller gets the
cancellation, and the permit is back once, never twice.

Before the script is sent (the client's pooled connection was closed by the server, and
the cancellation lands while the release connects anew) the release is finished in the
background: before, a plain Semaphore's permit was gone for good and an expirable permit
stayed out, unrenewed, to its lease end. After it was sent (the server paused: its reply is
awaited) the reply is read in the background and the plain release is not sent again: the
count must never go above the permits set. asyncio only: a thread's call cannot be
cancelled from outside (the sync twin skips; tests/test_semaphore_release_interrupt.py
covers a signal handler's exception in a sync release)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from support.twins import sleep, spawn, wait_until

KINDS = ["semaphore", "permit"]


def taken(client, kind, name):
    """A semaphore of ``kind`` with one permit, taken: the release to run, as a callable."""
    if kind == "semaphore":
        sem = client.semaphore(name)
        assert sem.try_set_permits(1)
        assert sem.acquire()
        return lambda: sem.release()
    sem = client.permit_expirable_semaphore(name)
    assert sem.try_set_permits(1)
    permit = sem.acquire()
    assert permit is not None
    return lambda: sem.release(permit)


@pytest.mark.parametrize("kind", KINDS)
def test_a_release_cancelled_before_its_script_went_gives_the_permit_back(
    make_client, r, kind
):
    if not inspect.iscoroutinefunction(make_client().close):
        pytest.skip("a thread's call cannot be cancelled from outside (asyncio only)")
    kept = []
    for turns in (1, 2, 3):  # the cancellation lands while the release connects anew
        client = make_client()
        name = f"release-cancel-{kind}-{turns}"
        release = taken(client, kind, name)
        r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        # Time for the close to reach the client, which then sees its connection closed
        # and connects anew (a write on a socket whose close has not come yet goes out,
        # and then whether it ran is unknown: that release is not sent again).
        sleep(0.1)
        job = spawn(release)
        for _ in range(turns):
            sleep(0)
        assert hasattr(job, "task")  # an asyncio job (the skip above)
        job.task.cancel()
        assert isinstance(job.outcome(5), asyncio.CancelledError)
        if not wait_until(lambda key=name: r.get(key) == b"1", 2.0):
            kept.append(f"{turns} turns: count {r.get(name)!r}, pttl {r.pttl(name)}")
        sleep(0.2)  # a release sent twice would show by now
        assert r.get(name) in (b"0", b"1"), r.get(name)
    assert kept == [], kept


@pytest.mark.parametrize("kind", KINDS)
def test_a_release_cancelled_while_its_reply_is_awaited_runs_once(
    make_client, r, kind
):
    if not inspect.iscoroutinefunction(make_client().close):
        pytest.skip("a thread's call cannot be cancelled from outside (asyncio only)")
    client = make_client()
    name = f"release-cancel-sent-{kind}"
    release = taken(client, kind, name)
    r.execute_command("CLIENT", "PAUSE", 300, "ALL")  # the script waits on the server
    job = spawn(release)
    sleep(0.1)
    assert not job.done()  # sent, its reply awaited
    assert hasattr(job, "task")  # an asyncio job (the skip above)
    job.task.cancel()
    assert isinstance(job.outcome(5), asyncio.CancelledError)
    assert wait_until(lambda: r.get(name) == b"1", 3.0), r.get(name)
    sleep(0.3)  # a release sent again would show by now
    assert r.get(name) == b"1"
