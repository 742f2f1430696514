"""The watchdog's renewal pass (``core/watchdog.renew``) and the hold table it works on."""

from __future__ import annotations

import threading

import pytest

from tenure.core.context import Context
from tenure.core.fair import FairLockCore
from tenure.core.holds import Hold
from tenure.core.lock import LockCore
from tenure.core.rwlock import ReadLockCore, WriteLockCore
from tenure.core.watchdog import BATCH, renew
from tenure.errors import BackendError

from .conftest import new_context
from .scripted import Clock, Do, drive

RENEW = "lock_renew"


def take(lock: LockCore, owner: str, lease: float | None = None, script: str | None = None) -> Hold:
    name = script or lock.acquire_script.name
    assert drive(lock.acquire(owner, True, 0, lease), [(name, None)]).result is True
    hold = lock.ctx.holds.get(lock.key, lock.field(owner))
    assert hold is not None
    return hold


def all_present(call: object) -> list[int]:
    return [1] * len(call.keys)  # type: ignore[attr-defined]


def test_nothing_to_renew_sends_nothing(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "leased"), owner, lease=5)
    run = drive(renew(ctx), [])
    assert run.result == []


def test_renews_watchdog_holds_with_the_watchdog_lease(owner: str) -> None:
    ctx = new_context(watchdog_timeout=9)
    a, b = LockCore(ctx, "a"), LockCore(ctx, "b")
    take(a, owner)
    take(b, owner)
    take(LockCore(ctx, "c"), owner, lease=3)  # has its own lease: not renewed
    run = drive(renew(ctx), [(RENEW, [1, 1])])
    assert run.result == []
    (call,) = run.effects
    assert sorted(call.keys) == ["a", "b"]
    assert call.args == [9000, owner, owner]
    assert not call.changes


def test_hold_with_a_leased_and_a_watchdog_hold_is_renewed(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner, lease=5)
    take(lock, owner)
    assert drive(renew(ctx), [(RENEW, [1])]).effects[0].keys == ["l"]


@pytest.mark.parametrize(
    ("holds", "batches"), [(100, [100]), (101, [100, 1]), (250, [100, 100, 50])]
)
def test_batches_of_one_hundred(ctx: Context, holds: int, batches: list[int]) -> None:
    owner = ctx.identity.thread_owner()
    for i in range(holds):
        take(LockCore(ctx, f"l{i}"), owner)
    assert BATCH == 100
    run = drive(renew(ctx), [(RENEW, Do(all_present))] * len(batches))
    assert [len(c.keys) for c in run.effects] == batches
    for call in run.effects:
        assert call.args == [30000, *[owner] * len(call.keys)]
    assert sorted(k for c in run.effects for k in c.keys) == sorted(f"l{i}" for i in range(holds))


def test_one_call_per_renewal_script(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "plain"), owner)
    take(FairLockCore(ctx, "fair"), owner)
    take(ReadLockCore(ctx, "rw"), owner)
    take(WriteLockCore(ctx, "rw"), owner)  # the write side renews like a plain lock
    any_renewal = (lambda c: c.script.name.endswith("renew"), Do(all_present))
    run = drive(renew(ctx), [any_renewal] * 3)
    by_script = {c.script.name: c for c in run.effects}
    assert set(by_script) == {"lock_renew", "fair_renew", "rw_read_renew"}
    assert sorted(by_script["lock_renew"].keys) == ["plain", "rw"]
    assert by_script["lock_renew"].args[1:] == [
        dict(zip(["plain", "rw"], [owner, f"{owner}:write"], strict=True))[k]
        for k in by_script["lock_renew"].keys
    ]
    assert by_script["fair_renew"].keys == ["fair"]
    assert by_script["rw_read_renew"].args == [30000, owner]


def test_a_hold_reported_gone_is_lost_and_removed(ctx: Context, owner: str) -> None:
    a, b = LockCore(ctx, "a"), LockCore(ctx, "b")
    take(a, owner)
    take(b, owner)
    run = drive(renew(ctx), [(RENEW, Do(lambda c: [int(k == "a") for k in c.keys]))])
    (lost,) = run.result
    assert lost.key == "b" and lost.lock is b and lost.owner == owner
    assert ctx.holds.get("b", owner) is None
    assert ctx.holds.get("a", owner) is not None
    # the driver then reports it: LockLostError at release
    lost.lock.hold_lost(lost.owner)
    assert b.is_lost(owner) and not a.is_lost(owner)


def test_renewal_confirms_at_send_time(ctx: Context, owner: str, clock: Clock) -> None:
    hold = take(LockCore(ctx, "l"), owner)
    assert hold.confirmed == clock.now
    clock.advance(10)
    sent = clock.now

    def slow_reply(call: object) -> list[int]:
        clock.advance(4)  # the reply takes 4 s: the lease was renewed when the call was sent
        return [1]

    drive(renew(ctx), [(RENEW, Do(slow_reply))])
    assert hold.confirmed == sent


def test_backend_error_keeps_holds_until_their_lease_surely_ran_out(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    hold = take(lock, owner)  # confirmed at t0, lease 30 s
    clock.advance(10)
    assert drive(renew(ctx), [(RENEW, BackendError("down"))]).result == []
    clock.advance(19.999)
    assert drive(renew(ctx), [(RENEW, BackendError("down"))]).result == []
    assert ctx.holds.get("l", owner) is hold
    clock.advance(0.001)  # 30 s since the last confirmation
    run = drive(renew(ctx), [(RENEW, BackendError("down"))])
    assert run.result == [hold]
    assert ctx.holds.get("l", owner) is None
    assert drive(renew(ctx), []).result == []


def test_backend_error_counts_from_the_last_successful_renewal(
    ctx: Context, owner: str, clock: Clock
) -> None:
    hold = take(LockCore(ctx, "l"), owner)
    clock.advance(20)
    drive(renew(ctx), [(RENEW, [1])])
    clock.advance(29)  # 49 s after the grant, 29 s after the renewal
    assert drive(renew(ctx), [(RENEW, BackendError)]).result == []
    clock.advance(1)
    assert drive(renew(ctx), [(RENEW, BackendError)]).result == [hold]


def test_backend_error_in_one_batch_does_not_stop_the_others(
    ctx: Context, owner: str, clock: Clock
) -> None:
    for i in range(150):
        take(LockCore(ctx, f"l{i}"), owner)
    clock.advance(31)
    run = drive(renew(ctx), [(RENEW, BackendError("first batch failed")), (RENEW, Do(all_present))])
    assert len(run.result) == 100
    assert len(ctx.holds.watchdog_holds()) == 50


def test_hold_released_while_the_renewal_was_in_flight_is_not_lost(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)

    def released_meanwhile(call: object) -> list[int]:
        ctx.holds.pop("l", owner)  # release() forgets the hold before its script
        return [0]

    assert drive(renew(ctx), [(RENEW, Do(released_meanwhile))]).result == []


def test_hold_reacquired_while_the_renewal_was_in_flight_is_left_alone(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)

    def released_and_taken_again(call: object) -> list[int]:
        ctx.holds.pop("l", owner)
        take(lock, owner)
        return [0]

    assert drive(renew(ctx), [(RENEW, Do(released_and_taken_again))]).result == []
    assert ctx.holds.get("l", owner) is not None

    def released_and_taken_again_then_error(call: object) -> None:
        ctx.holds.pop("l", owner)
        take(lock, owner)
        raise BackendError("down")

    clock.advance(100)
    run = drive(renew(ctx), [(RENEW, Do(released_and_taken_again_then_error))])
    assert run.result == []


def test_renewal_replies_as_bytes_or_str(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "a"), owner)
    take(LockCore(ctx, "b"), owner)
    run = drive(renew(ctx), [(RENEW, Do(lambda c: [b"1", "0"]))])
    assert [h.key for h in run.result] == [run.effects[0].keys[1]]


# ------------------------------------------------------------------------ hold table


def test_hold_table_pop_takes_the_newest_then_the_entry(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner, lease=1)
    take(lock, owner, lease=2)
    hold = ctx.holds.pop("l", owner)
    assert hold is not None and hold.leases == [1]
    ctx.holds.pop("l", owner)
    assert ctx.holds.get("l", owner) is None
    assert ctx.holds.pop("l", owner) is None


def test_context_after_fork_owns_nothing(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "l"), owner)
    assert ctx.forked() is False
    before = ctx.identity.client_id
    ctx.identity.pid = -1  # as seen from a forked child
    assert ctx.forked() is True
    assert ctx.identity.client_id != before
    assert ctx.holds.watchdog_holds() == []
    assert ctx.identity.thread_owner() != owner


def test_owner_numbers_are_per_thread_and_never_reused(ctx: Context, owner: str) -> None:
    assert ctx.identity.thread_owner() == owner
    assert owner.startswith(ctx.identity.client_id + ":")
    seen: list[str] = []
    for _ in range(3):
        t = threading.Thread(target=lambda: seen.append(ctx.identity.thread_owner()))
        t.start()
        t.join()
    assert len({owner, *seen}) == 4


def test_hold_table_clear(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "l"), owner)
    ctx.holds.clear()
    assert ctx.holds.get("l", owner) is None
    assert drive(renew(ctx), []).result == []
