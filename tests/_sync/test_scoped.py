# GENERATED from tests/_async/test_scoped.py by tools/unasync.py: edit that file, not this one.
"""When the lease ends, the work ends: ``with lock:`` is a cancel scope.

A loss of the hold reported while the body runs cancels the body's task, and the block
raises LockLostError with the body's CancelledError chained (as ``asyncio.timeout()``). A
thread cannot be cancelled: in the sync twin the body runs on, and the block raises
LockLostError at exit (the old rule), which these tests check there instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

import tenure
from support.twins import sleep, spawn, wait_until

SCOPED = tenure.Client is not tenure.Client
"""True in asyncio code (the body is cancelled on a loss), False in the sync twin."""
WATCHDOG = 0.6
"""A short watchdog lease: renewal every 0.2 s, so a deleted key is found within that."""


def run_body_until_lost(
    scoped: Any,
    delete: Callable[[], Any],
    check: Callable[[], bool],
    ready: Callable[[], bool] = lambda: True,
) -> tuple[Any, bool, float]:
    """Enter ``scoped``, wait (at most 2 s) for ``ready()``, call ``delete()`` (raw redis: the
    hold's keys go) from inside the body, and wait (at most 5 s) for ``check()`` (the loss
    seen). Returns (the exception the block raised, whether the body ran to its end, seconds
    from the deletion to the block's end)."""
    reached_end = False
    error: BaseException | None = None
    deleted = 0.0
    try:
        with scoped:
            wait_until(ready, timeout=2)
            deleted = time.monotonic()
            delete()
            wait_until(check, timeout=5)
            sleep(0.05)
            reached_end = True
    except BaseException as failure:
        error = failure
    return error, reached_end, time.monotonic() - deleted


def assert_stopped(error: BaseException | None, reached_end: bool, took: float) -> None:
    assert isinstance(error, tenure.LockLostError), repr(error)
    if SCOPED:
        assert not reached_end, "the body ran on after its hold was lost"
        assert isinstance(error.__cause__, asyncio.CancelledError), repr(error.__cause__)
        # found by the next renewal (every 0.2 s), cancelled at once; a generous bound
        assert took < 2.0, took
    else:
        assert reached_end  # a thread runs on; the loss is raised at exit


KINDS = ["lock", "fair", "fenced", "read", "write"]


def make_lock(client: Any, kind: str, name: str) -> Any:
    if kind == "lock":
        return client.lock(name)
    if kind == "fair":
        return client.fair_lock(name)
    if kind == "fenced":
        return client.fenced_lock(name)
    rw = client.read_write_lock(name)
    return rw.read_lock() if kind == "read" else rw.write_lock()


@pytest.mark.parametrize("kind", KINDS)
def test_a_lost_hold_stops_the_body(make_client, r, kind):
    lock = make_lock(make_client(watchdog_timeout=WATCHDOG), kind, f"scoped-{kind}")
    error, reached_end, took = run_body_until_lost(lock, r.flushall, lambda: lock.lost)
    assert_stopped(error, reached_end, took)
    assert lock.lost
    assert lock.valid_for() == 0.0
    with pytest.raises(tenure.LockLostError):
        lock.checkpoint()
    with lock(timeout=5):  # the lock object works again afterwards
        assert lock.owned()


def test_the_acquiring_context_and_the_decorator_are_scopes(make_client, r):
    lock = make_client(watchdog_timeout=WATCHDOG).lock("scoped-forms")
    error, reached_end, took = run_body_until_lost(
        lock(timeout=5), r.flushall, lambda: lock.lost
    )
    assert_stopped(error, reached_end, took)

    ran: list[str] = []

    @lock
    def job() -> None:
        r.flushall()
        wait_until(lambda: lock.lost, timeout=5)
        sleep(0.05)
        ran.append("end")

    with pytest.raises(tenure.LockLostError) as caught:
        job()
    assert ran == ([] if SCOPED else ["end"])
    if SCOPED:
        assert isinstance(caught.value.__cause__, asyncio.CancelledError)

    @lock(timeout=5, lease_time=0.3)
    def leased() -> None:
        sleep(2 if SCOPED else 0.4)  # the lease runs out long before
        ran.append("leased end")

    start = time.monotonic()
    with pytest.raises(tenure.LockLostError):
        leased()
    if SCOPED:
        assert time.monotonic() - start < 1.5
        assert "leased end" not in ran


def test_a_lease_time_running_out_stops_the_body(make_client):
    lock = make_client().lock("scoped-lease")
    reached_end = False
    start = time.monotonic()
    with pytest.raises(tenure.LockLostError) as caught:
        with lock(lease_time=0.3):
            sleep(2 if SCOPED else 0.4)
            reached_end = True
    took = time.monotonic() - start
    if SCOPED:
        assert not reached_end
        assert isinstance(caught.value.__cause__, asyncio.CancelledError)
        assert 0.25 < took < 1.0, took  # at the lease end on the local clock, not later
    else:
        assert reached_end


def test_an_outside_cancellation_stays_a_cancellation(make_client, r):
    if not SCOPED:
        pytest.skip("a thread cannot be cancelled from outside")
    lock = make_client(watchdog_timeout=WATCHDOG).lock("scoped-outside")
    entered = asyncio.Event()

    def body() -> None:
        with lock:
            entered.set()
            asyncio.sleep(10)

    task = asyncio.ensure_future(body())
    asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        asyncio.wait_for(task, 5)
    assert not r.exists("scoped-outside")  # released on the way out
    assert not lock.lost


def test_cancel_on_loss_false_lets_the_body_run_on(make_client, r):
    lock = make_client(watchdog_timeout=WATCHDOG).lock("scoped-opt-out")
    error, reached_end, _ = run_body_until_lost(
        lock(cancel_on_loss=False), r.flushall, lambda: lock.lost
    )
    assert isinstance(error, tenure.LockLostError)
    assert reached_end
    assert error.__cause__ is None
    with pytest.raises(TypeError):
        lock(cancel_on_loss="no")


def test_the_body_s_own_error_wins_over_the_loss(make_client, r):
    lock = make_client(watchdog_timeout=WATCHDOG).lock("scoped-own-error")
    with pytest.raises(KeyError) as caught:
        with lock(cancel_on_loss=False):
            r.flushall()
            wait_until(lambda: lock.lost, timeout=5)
            raise KeyError("mine")
    assert any("LockLostError" in note for note in caught.value.__notes__)


def test_a_body_that_swallows_the_cancellation_still_raises_the_loss(
    make_client, r
):
    """A body that catches the cancellation and ends normally: the block still raises
    LockLostError, and no cancellation is left pending on the task."""
    lock = make_client(watchdog_timeout=WATCHDOG).lock("scoped-swallow")
    swallowed = []
    with pytest.raises(tenure.LockLostError):
        with lock:
            r.flushall()
            try:
                wait_until(lambda: lock.lost and not SCOPED, timeout=5)
            except asyncio.CancelledError:
                swallowed.append(True)
    assert swallowed == ([True] if SCOPED else [])
    sleep(0.01)  # no cancellation pending: this returns
    if SCOPED:
        task = asyncio.current_task()
        assert task is not None
        assert task.cancelling() == 0


def test_nested_reentry_both_blocks_end(make_client, r):
    lock = make_client(watchdog_timeout=WATCHDOG).lock("scoped-nested")
    reached = []
    with pytest.raises(tenure.LockLostError):
        with lock:
            try:
                with lock:
                    r.flushall()
                    wait_until(lambda: lock.lost, timeout=5)
                    sleep(0.05)
                    reached.append("inner end")
            finally:
                reached.append("inner exit")
            reached.append("outer end")
    # sync: the inner exit raises the loss (found at release), the outer block ends with it
    assert reached == (["inner exit"] if SCOPED else ["inner end", "inner exit"])


def test_multi_lock_stops_its_body(make_client, r):
    a, b = (make_client(watchdog_timeout=WATCHDOG) for _ in range(2))
    multi = a.multi_lock(a.lock("scoped-m1"), b.lock("scoped-m2"))
    error, reached_end, took = run_body_until_lost(
        multi, lambda: r.delete("scoped-m2"), lambda: multi.lost
    )
    assert_stopped(error, reached_end, took)
    assert multi.valid_for() == 0.0
    with pytest.raises(tenure.LockLostError):
        multi.checkpoint()


def test_red_lock_stops_its_body(nodes):
    clients = [tenure.Client(s.url, watchdog_timeout=WATCHDOG) for s in nodes[:3]]
    try:
        red = clients[0].red_lock(*(c.lock("scoped-red") for c in clients))

        def delete_on_two() -> None:  # one of three left: below the quorum
            for s in nodes[:2]:
                with s.client() as raw:
                    raw.delete("scoped-red")

        def held_on_all() -> bool:
            # The acquire returns at a quorum (two of three); the third member's grant may
            # land just after, and a deletion before it would leave two held.
            held = 0
            for s in nodes[:3]:
                with s.client() as raw:
                    held += raw.exists("scoped-red")
            return held == 3

        error, reached_end, took = run_body_until_lost(
            red, delete_on_two, lambda: red.lost, ready=held_on_all
        )
        if SCOPED:
            assert_stopped(error, reached_end, took)
        else:  # a RedLock release is best effort: it raises only when no member was held
            assert reached_end
            assert red.lost
    finally:
        for c in clients:
            c.close()


def test_a_lost_permit_stops_its_body(make_client, r):
    psem = make_client(watchdog_timeout=WATCHDOG).permit_expirable_semaphore("scoped-p")
    psem.try_set_permits(1)
    permits: list[str] = []
    reached_end = False
    error: BaseException | None = None
    try:
        with psem(timeout=5) as permit:
            permits.append(permit)
            assert psem.valid_for(permit) > 0
            psem.checkpoint(permit)
            r.flushall()
            wait_until(lambda: psem.lost(permit), timeout=5)
            sleep(0.05)
            reached_end = True
    except BaseException as failure:
        error = failure
    assert_stopped(error, reached_end, 0.0)
    assert psem.valid_for(permits[0]) == 0.0
    with pytest.raises(tenure.LockLostError):
        psem.checkpoint(permits[0])


def test_only_the_body_of_the_lost_hold_is_stopped(make_client, r):
    """A loss cancels the body guarded by that hold only: another task's body under
    another lock of the same client runs on."""
    client = make_client(watchdog_timeout=WATCHDOG)
    lost, kept = client.lock("scoped-a"), client.lock("scoped-b")
    finished: list[str] = []

    def keep() -> None:
        with kept:
            sleep(0.8)
            finished.append("kept")

    job = spawn(keep)
    sleep(0.05)
    error, reached_end, took = run_body_until_lost(
        lost, lambda: r.delete("scoped-a"), lambda: lost.lost
    )
    assert_stopped(error, reached_end, took)
    job.result()
    assert finished == ["kept"]
