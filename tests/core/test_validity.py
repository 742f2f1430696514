"""Decisions behind ``valid_for``/``checkpoint``, jeopardy, hold caps, loss scopes and
guarded writes, driven with scripted replies (no server)."""

from __future__ import annotations

import time

import pytest

from tenure.core.holds import Hold
from tenure.core.lock import LockCore
from tenure.core.watchdog import renew, report_doubts
from tenure.errors import BackendError, LockLostError, NotOwnedError

from .conftest import new_context
from .scripted import drive, fails


def take(lock: LockCore, owner: str, lease: float | None = None, max_hold: object = None) -> Hold:
    flow = lock.capped(owner, max_hold, lock.acquire(owner, True, 0, lease))
    assert drive(flow, [("lock_acquire", None)]).result is True
    hold = lock.ctx.holds.get(lock.key, lock.field(owner))
    assert hold is not None
    return hold


class Scope:
    def __init__(self) -> None:
        self.told = 0

    def lost(self) -> None:
        self.told += 1


def test_valid_for_is_lease_less_drift_from_the_send_and_zero_when_not_held():
    lock = LockCore(new_context(watchdog_timeout=9.0), "v")
    assert lock.valid_for("o") == 0.0
    with pytest.raises(NotOwnedError) as caught:
        lock.checkpoint("o")
    assert not isinstance(caught.value, LockLostError)
    hold = take(lock, "o", lease=2.0)
    assert hold.valid_until == pytest.approx(hold.confirmed + 2.0 - (0.02 + 0.002))
    assert 0 < lock.valid_for("o") <= 2.0 - 0.022
    lock.checkpoint("o")
    hold.confirmed -= 2.0  # as if the lease had run out on the local clock
    assert lock.valid_for("o") == 0.0
    with pytest.raises(LockLostError):
        lock.checkpoint("o")


def test_a_failed_renewal_puts_a_valid_hold_in_doubt_once_and_a_confirmed_one_clears_it():
    ctx = new_context(watchdog_timeout=3.0)
    lock = LockCore(ctx, "d")
    doubts: list[str] = []
    lock.on_doubt = lambda: doubts.append("doubt")
    take(lock, "o")
    assert not lock.in_doubt("o")
    for _ in range(2):  # two failed passes: one episode, one call
        drive(renew(ctx), [("lock_renew", BackendError("timeout"))])
    assert lock.in_doubt("o")
    assert doubts == ["doubt"]
    drive(renew(ctx), [("lock_renew", [1])])
    assert not lock.in_doubt("o")
    drive(renew(ctx), [("lock_renew", BackendError("timeout"))])
    assert lock.in_doubt("o")
    assert doubts == ["doubt", "doubt"]


def test_an_unconfirmed_renewal_past_one_period_and_a_half_is_doubt_on_the_clock():
    ctx = new_context(watchdog_timeout=3.0)
    lock = LockCore(ctx, "c")
    hold = take(lock, "o")
    now = time.monotonic()
    assert not hold.in_doubt(now, 1.0)
    hold.confirmed = now - 1.6  # a pass was due at +1 s; none confirmed by +1.5 s
    assert hold.in_doubt(now, 1.0)
    hold.confirmed = now - 3.0  # its lease ran out: lost, not in doubt
    assert not hold.in_doubt(now, 1.0)


def test_the_keeper_reports_doubt_on_its_clock_once_and_plans_a_look_for_it():
    ctx = new_context(watchdog_timeout=3.0)
    lock = LockCore(ctx, "k")
    doubts: list[str] = []
    lock.on_doubt = lambda: doubts.append("doubt")
    hold = take(lock, "o")
    report_doubts(ctx, hold.confirmed + 1.0)
    assert doubts == []
    # the next look: when it goes in doubt (1.5 periods), before the lease end
    assert ctx.holds.plan(hold.confirmed + 100) == pytest.approx(hold.confirmed + 1.5)
    report_doubts(ctx, hold.confirmed + 1.6)
    report_doubts(ctx, hold.confirmed + 1.7)
    assert doubts == ["doubt"]
    assert hold.doubted
    drive(renew(ctx), [("lock_renew", [1])])  # confirmed: the episode ends
    assert not hold.doubted
    assert not lock.in_doubt("o")


def test_a_leased_hold_is_never_in_doubt():
    lock = LockCore(new_context(watchdog_timeout=3.0), "l")
    hold = take(lock, "o", lease=5.0)
    hold.confirmed -= 2.0
    assert not hold.in_doubt(time.monotonic(), 1.0)


def test_max_hold_stops_renewal_after_the_cap():
    ctx = new_context(watchdog_timeout=3.0)
    lock = LockCore(ctx, "cap")
    hold = take(lock, "o", max_hold=1.0)
    assert hold.cap == pytest.approx(hold.confirmed + 1.0)
    assert ctx.holds.watchdog_holds() == [hold]
    assert ctx.holds.watchdog_holds(now=hold.cap + 0.001) == []
    other = take(LockCore(ctx, "free"), "o")
    assert other.cap == float("inf")
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="max_hold"):
            lock.capped("o", bad, lock.acquire("o", True, 0, None))


def test_a_loss_tells_the_scopes_of_that_hold_only():
    ctx = new_context()
    a, b = LockCore(ctx, "a"), LockCore(ctx, "b")
    take(a, "o")
    take(b, "o")
    sa, sb, never = Scope(), Scope(), Scope()
    assert a.watch("o", sa)
    assert b.watch("o", sb)
    assert not a.watch("other", never)  # holds nothing: not registered
    lost = drive(renew(ctx), [("lock_renew", [0, 1])]).result
    assert [h.key for h in lost] == ["a"]
    for hold in lost:
        a.hold_lost(hold.owner)
    assert (sa.told, sb.told) == (1, 0)
    b.unwatch("o", sb)
    b.hold_lost("o")
    assert sb.told == 0  # unwatched before the loss


def test_guarded_write_checks_before_any_io():
    lock = LockCore(new_context(), "g")
    with pytest.raises(NotOwnedError):
        drive(lock.execute_if_held("o", ("SET", "k", "v"), False), [])
    take(lock, "o")
    with pytest.raises(ValueError, match="needs a command"):
        lock.execute_if_held("o", (), False)
    with pytest.raises(TypeError):
        lock.execute_if_held("o", ("SET", "k", None), False)
    with pytest.raises(ValueError, match="slot"):
        lock.execute_if_held("o", ("SET", "elsewhere", "v"), True)
    lock.execute_if_held("o", ("SET", "{g}:state", "v"), True)  # same slot: accepted


def test_guarded_write_refused_by_the_server_reports_the_loss():
    lock = LockCore(new_context(), "g")
    take(lock, "o")
    run = drive(lock.execute_if_held("o", ("INCR", "{g}:n"), False), [("guarded_execute", [1, 7])])
    assert run.result == 7
    call = run.calls("guarded_execute")[0]
    assert call.args[:3] == ["o", "INCR", "{g}:n"]
    assert call.keys == ["g", "{g}:n"]
    run = fails(lock.execute_if_held("o", ("INCR", "{g}:n"), False), [("guarded_execute", [0])])
    assert isinstance(run.error, LockLostError)
    assert lock.is_lost("o")
    assert lock.valid_for("o") == 0.0
