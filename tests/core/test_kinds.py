"""FairLock, ReadWriteLock and FencedLock: the hooks they change in the Lock flows."""

from __future__ import annotations

import math

import pytest

from tenure import keys
from tenure.core.context import Context
from tenure.core.effects import (
    Background,
    Call,
    Command,
    Sleep,
    Subscribe,
    Unsubscribe,
    Wait,
    WatchHolds,
)
from tenure.core.fair import FIRST_LOOK, FREE, HELD, NOTHING, TURN_SLACK, FairLockCore
from tenure.core.fenced import FencedLockCore
from tenure.core.rwlock import ReadLockCore, WriteLockCore
from tenure.errors import BackendError, LockUpgradeError, NotOwnedError, ReplicationError

from .scripted import Clock, Do, Step, drive, fails

FAIR, GIVE_UP = "fair_acquire", "fair_give_up"

# ------------------------------------------------------------------------- FairLock


def fair_keys(name: str) -> list[str]:
    return [
        name,
        f"redisson_lock_queue:{{{name}}}",
        f"redisson_lock_timeout:{{{name}}}",
        f"tenure_lock_waiters:{{{name}}}",  # tenure's addition: alive-until times of its waiters
    ]


@pytest.mark.parametrize(("blocking", "timeout"), [(False, None), (True, 0)])
def test_fair_one_attempt_never_joins_the_queue(
    ctx: Context, owner: str, blocking: bool, timeout: float | None
) -> None:
    lock = FairLockCore(ctx, "f")
    run = drive(lock.acquire(owner, blocking, timeout, None), [(FAIR, 700)])
    assert run.result is False
    (call,) = run.effects  # refused, and no fair_give_up: it was never queued
    assert call.keys == fair_keys("f")
    assert call.args == [30000, owner, 0, 10000, "redisson_lock__channel:{f}:", "0", 0]
    assert call.changes


@pytest.mark.parametrize("timeout", [None, -1, 2.5, 1e9])
def test_fair_waiter_joins_with_an_entry_its_client_refreshes(
    ctx: Context, owner: str, timeout: float | None
) -> None:
    # whatever its wait, a waiter's entry lasts watchdog_timeout (three renewal passes); the
    # head's grace once the lock is free is one renewal period
    lock = FairLockCore(ctx, "f")
    steps: list[Step] = [(FAIR, 500), (Subscribe, None), (FAIR, None), (Unsubscribe, None)]
    run = drive(lock.acquire(owner, True, timeout, 4), steps)
    assert run.result is True
    assert run.effects[0].args[:4] == [4000, owner, 30000, 10000]
    assert any(isinstance(e, WatchHolds) for e in run.extra)  # the keeper refreshes it
    assert len(ctx.holds.waiters) == 0  # granted: no longer refreshed
    hold = ctx.holds.get("f", owner)
    assert hold is not None
    assert hold.renewal.name == "lock_renew"


def test_fair_queued_waiter_is_refreshed_until_it_leaves(ctx: Context, owner: str) -> None:
    lock = FairLockCore(ctx, "f")
    flow = lock.acquire(owner, True, 10, None)
    assert isinstance(flow.send(None), WatchHolds)
    call = flow.send(None)
    assert isinstance(call, Call)
    assert call.script.name == FAIR
    assert ctx.holds.waiters.snapshot(lambda _: True) == [(lock, owner)]
    flow.close()
    run = drive(lock.give_up(owner), [(GIVE_UP, 1)])
    assert run.names == [GIVE_UP]
    assert len(ctx.holds.waiters) == 0


def test_fair_waits_on_its_own_channel_and_leaves_no_queue_entry_when_granted(
    ctx: Context, owner: str
) -> None:
    lock = FairLockCore(ctx, "f")
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            (FAIR, 900),
            (Subscribe, None),
            (FAIR, 900),
            (Wait, True),
            (FAIR, None),
            (Unsubscribe, None),
        ],
    )
    assert run.result is True
    channel = f"redisson_lock__channel:{{f}}:{owner}"
    assert run.of(Subscribe)[0].channel == channel
    assert run.of(Wait)[0].channel == channel
    assert run.of(Unsubscribe)[0].channel == channel
    assert run.calls(GIVE_UP) == []
    # a later failed one-shot attempt has nothing to give up either
    assert drive(lock.acquire(owner, False, None, None), [(FAIR, 5)]).names == [FAIR]


def test_fair_waiter_behind_the_head_reads_its_place_once_subscribed_then_its_turn(
    ctx: Context, owner: str
) -> None:
    # -2: queued behind the head. Only a wake-up is ever sent to it, but it may have become
    # the head before it listened (its wake-up then lost: a Java client's unlock has no turn
    # watcher behind it), so once subscribed it reads its place again; still behind, it waits
    # for its wake-up with no time limit, and its later attempts tell the script it is
    # queued (-1).
    lock = FairLockCore(ctx, "f")
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            (FAIR, -2),
            (Subscribe, None),
            (FAIR, -2),
            (Wait, True),
            (FAIR, None),
            (Unsubscribe, None),
        ],
    )
    assert run.result is True
    assert [c.args[2] for c in run.calls(FAIR)] == [30000, -3, -1]
    assert run.of(Wait)[0].seconds == math.inf


def test_fair_waiter_that_became_the_head_before_it_listened_takes_the_lock(
    ctx: Context, owner: str
) -> None:
    lock = FairLockCore(ctx, "f")
    run = drive(
        lock.acquire(owner, True, None, None),
        [(FAIR, -2), (Subscribe, None), (FAIR, None), (Unsubscribe, None)],
    )
    assert run.result is True
    assert run.of(Wait) == []


def test_fair_waiter_whose_entry_was_dropped_joins_again(ctx: Context, owner: str) -> None:
    lock = FairLockCore(ctx, "f")

    def renewal_saw_it_gone(_: object) -> bool:
        lock.entry_gone(owner)
        return True

    run = drive(
        lock.acquire(owner, True, None, None),
        [
            (FAIR, -2),
            (Subscribe, None),
            (FAIR, -2),
            (Wait, Do(renewal_saw_it_gone)),
            (FAIR, None),
            (Unsubscribe, None),
        ],
    )
    assert [c.args[2] for c in run.calls(FAIR)] == [30000, -3, 30000]


def test_fair_timeout_leaves_the_queue(ctx: Context, owner: str, clock: Clock) -> None:
    lock = FairLockCore(ctx, "f")
    run = drive(
        lock.acquire(owner, True, 2, None),
        [
            (FAIR, 60000),
            (Subscribe, None),
            (FAIR, 60000),
            (Wait, False),
            (FAIR, 60000),
            (Unsubscribe, None),
            (GIVE_UP, None),
        ],
        clock=clock,
    )
    assert run.result is False
    assert run.of(Unsubscribe)[0].pass_on is False
    (give_up,) = run.calls(GIVE_UP)
    assert give_up.keys == fair_keys("f")
    assert give_up.args == [owner, 10000, "redisson_lock__channel:{f}:", "0"]
    assert give_up.changes
    assert ctx.holds.get("f", owner) is None


def test_fair_deadline_before_subscribing_still_leaves_the_queue(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = FairLockCore(ctx, "f")

    def past_the_deadline(_: object) -> int:
        clock.advance(1)
        return 500

    run = drive(
        lock.acquire(owner, True, 1, None),
        [(FAIR, Do(past_the_deadline)), (GIVE_UP, None)],
        clock=clock,
    )
    assert run.result is False
    assert run.names == [FAIR, GIVE_UP]


def test_fair_error_mid_wait_unsubscribes_and_leaves_the_queue(ctx: Context, owner: str) -> None:
    lock = FairLockCore(ctx, "f")
    error = BackendError("reset")
    run = fails(
        lock.acquire(owner, True, None, None),
        [
            (FAIR, 100),
            (Subscribe, None),
            (FAIR, 100),
            (Wait, error),
            (Unsubscribe, None),
            (GIVE_UP, None),
        ],
    )
    assert run.error is error
    assert run.of(Unsubscribe)[0].pass_on is True
    assert run.calls(GIVE_UP)[0].args[1] == 10000


def test_fair_error_on_the_first_queued_attempt_leaves_the_queue(ctx: Context, owner: str) -> None:
    # the script may have queued the caller before the reply was lost
    run = fails(
        FairLockCore(ctx, "f").acquire(owner, True, 5, None),
        [(FAIR, BackendError("timeout")), (GIVE_UP, None)],
    )
    assert isinstance(run.error, BackendError)


def test_fair_failing_give_up_does_not_hide_the_first_error(ctx: Context, owner: str) -> None:
    first = BackendError("first")
    run = fails(
        FairLockCore(ctx, "f").acquire(owner, True, None, None),
        [
            (FAIR, 100),
            (Subscribe, None),
            (FAIR, first),
            (Unsubscribe, None),
            (GIVE_UP, BackendError("second")),
        ],
    )
    assert run.error is first


def test_fair_give_up_failure_after_a_timeout_propagates(
    ctx: Context, owner: str, clock: Clock
) -> None:
    run = fails(
        FairLockCore(ctx, "f").acquire(owner, True, 0.01, None),
        [
            (FAIR, 100),
            (Subscribe, None),
            (FAIR, 100),
            (Wait, False),
            (FAIR, 100),
            (Unsubscribe, None),
            (GIVE_UP, BackendError("down")),
        ],
        clock=clock,
    )
    assert isinstance(run.error, BackendError)


def test_fair_release_and_force_release_calls(ctx: Context, owner: str) -> None:
    lock = FairLockCore(ctx, "f")
    alone = drive(lock.acquire(owner, True, None, 8), [(FAIR, None)])
    assert not any(isinstance(e, Background) for e in alone.extra)  # no waiter: no watcher
    granted = drive(lock.acquire(owner, True, None, 8), [(FAIR, "W")])  # re-entry, waiters
    # a grant with a lease is watched: its end may come with no release
    (watch,) = [e for e in granted.extra if isinstance(e, Background)]
    watch.flow.close()
    lock = FairLockCore(ctx, "f")  # another object of the same lock: no watcher yet
    assert not drive(lock.release(owner), [("fair_release", 0)]).extra  # holds remain
    run = drive(lock.release(owner), [("fair_release", 2)])  # freed, and a head woken
    assert run.effects[0].keys == fair_keys("f")
    assert run.effects[0].args == ["0", 30000, owner, "redisson_lock__channel:{f}:"]
    # the head's turn is watched from the background (a new watcher: the last one ended)
    (watch,) = [e for e in run.extra if isinstance(e, Background)]
    watch.flow.close()
    assert fails(lock.release(owner), [("fair_release", None)]).error is not None
    force = drive(lock.force_release(), [("fair_force_release", 1)])
    assert force.result is True
    assert force.effects[0].keys == fair_keys("f")
    assert force.effects[0].args == ["0", "redisson_lock__channel:{f}:", 10000]


def test_fair_unreplicated_grant_is_undone_with_the_fair_release(ctx: Context, owner: str) -> None:
    run = fails(
        FairLockCore(ctx, "f").acquire(owner, True, 0, None),
        [(FAIR, ReplicationError("x", reply=None)), ("fair_release", 1)],
    )
    assert isinstance(run.error, ReplicationError)


# ------------------------------------------------------------------- ReadWriteLock

RW_CHANNEL = "redisson_rwlock:{rw}"
RW_QUEUE = "tenure_lock_wake:{rw}"


class _Task:
    """Stands in for an asyncio task: a weakly referable key of ``Identity.owner_of``."""


def second_owner(ctx: Context) -> str:
    """Another owner (task) of the same client."""
    return ctx.identity.owner_of(_Task())


def timeout_key(owner: str, n: int, name: str = "rw") -> str:
    """Read hold ``n`` of ``owner`` on lock ``name`` (no hash tag in ``name``)."""
    return f"{{{name}}}:{owner}:rwlock_timeout:{n}"


def test_read_acquire_call_and_hold(ctx: Context, owner: str) -> None:
    lock = ReadLockCore(ctx, "rw")
    run = drive(lock.acquire(owner, True, None, 3), [("rw_read_acquire", None)])
    (call,) = run.effects
    # declares the new hold: the owner's field with count 1, and its timeout key 1
    assert call.keys == ["rw", timeout_key(owner, 1)]
    assert call.args == [3000, owner, f"{owner}:write", 1, owner, 1]
    hold = ctx.holds.get("rw", owner)
    assert hold is not None
    assert hold.renewal.name == "rw_read_renew"
    # re-entry declares the holds the table knows plus the new one, and that it expects a
    # re-entry ("" for not waiting, then 1): granted only on top of a hold the server has
    run = drive(lock.acquire(owner, True, None, None), [("rw_read_acquire", None)])
    (call,) = run.effects
    assert call.keys == ["rw", timeout_key(owner, 1), timeout_key(owner, 2)]
    assert call.args == [30000, owner, f"{owner}:write", 1, owner, 2, "", 1]
    assert hold.leases == [3, None]


def test_read_acquire_declares_only_its_own_field(ctx: Context, owner: str) -> None:
    other = second_owner(ctx)
    lock = ReadLockCore(ctx, "rw")
    drive(lock.acquire(other, True, None, None), [("rw_read_acquire", None)])
    run = drive(lock.acquire(owner, True, None, None), [("rw_read_acquire", None)])
    (call,) = run.effects
    assert call.keys == ["rw", timeout_key(owner, 1)]
    assert call.args == [30000, owner, f"{owner}:write", 1, owner, 1]


def test_write_acquire_call_and_hold(ctx: Context, owner: str) -> None:
    lock = WriteLockCore(ctx, "rw")
    run = drive(lock.acquire(owner, True, None, None), [("rw_write_acquire", None)])
    (call,) = run.effects
    assert call.keys == ["rw"]
    assert call.args == [30000, f"{owner}:write", owner]
    assert ctx.holds.get("rw", f"{owner}:write") is not None
    assert ctx.holds.get("rw", owner) is None


@pytest.mark.parametrize("side", [ReadLockCore, WriteLockCore])
def test_both_sides_wait_on_the_rw_channel_waking_all_on_a_write_release(
    ctx: Context, owner: str, side: type[ReadLockCore]
) -> None:
    lock = side(ctx, "rw")
    script = lock.acquire_script.name
    run = drive(
        lock.acquire(owner, True, None, None),
        [(script, 50), (Subscribe, None), (script, None), (Unsubscribe, None)],
    )
    (sub,) = run.of(Subscribe)
    assert sub.channel == RW_CHANNEL
    assert sub.wake_all == frozenset({"1"})
    assert keys.WRITE_UNLOCK_MESSAGE in sub.wake_all
    assert keys.READ_UNLOCK_MESSAGE not in sub.wake_all


@pytest.mark.parametrize("reply", [b"upgrade", "upgrade"])
@pytest.mark.parametrize(("blocking", "timeout"), [(True, None), (True, 5), (False, None)])
def test_reader_asking_for_write_gets_upgrade_error_at_once(
    ctx: Context, owner: str, reply: object, blocking: bool, timeout: float | None
) -> None:
    run = fails(
        WriteLockCore(ctx, "rw").acquire(owner, blocking, timeout, None),
        [("rw_write_acquire", reply)],
    )
    assert isinstance(run.error, LockUpgradeError)
    assert "'rw'" in str(run.error)
    assert ctx.holds.get("rw", f"{owner}:write") is None


def test_upgrade_error_on_a_retry_unsubscribes(ctx: Context, owner: str) -> None:
    run = fails(
        WriteLockCore(ctx, "rw").acquire(owner, True, None, None),
        [
            ("rw_write_acquire", 100),
            (Subscribe, None),
            ("rw_write_acquire", b"x"),
            (Unsubscribe, None),
        ],
    )
    assert isinstance(run.error, LockUpgradeError)
    assert run.of(Unsubscribe)[0].pass_on is True


@pytest.mark.parametrize(
    ("mode", "write"),
    [(None, False), (b"read", False), (b"write", True), ("write", True)],
)
def test_write_side_locked_is_write_mode(ctx: Context, mode: object, write: bool) -> None:
    run = drive(WriteLockCore(ctx, "rw").locked(), [(Command, mode)])
    assert run.result is write
    assert run.effects[0].args == ("HGET", "rw", "mode")


@pytest.mark.parametrize(
    ("fields", "read"),
    [
        ([], False),
        ([b"mode", b"read", b"u:1", b"1"], True),
        ([b"mode", b"write", b"u:1:write", b"1"], False),
        # Redisson: the writer's own read holds make the read side locked too
        ([b"mode", b"write", b"u:1:write", b"1", b"u:1", b"2"], True),
        ({"mode": "write", "u:1:write": "1", "u:1": "1"}, True),  # a RESP3 map
    ],
)
def test_read_side_locked_counts_the_writers_reads(
    ctx: Context, fields: object, read: bool
) -> None:
    run = drive(ReadLockCore(ctx, "rw").locked(), [(Command, fields)])
    assert run.result is read
    assert run.effects[0].args == ("HGETALL", "rw")


@pytest.mark.parametrize(("side", "mode"), [(ReadLockCore, "read"), (WriteLockCore, "write")])
def test_force_release_is_per_side(ctx: Context, side: type[ReadLockCore], mode: str) -> None:
    run = drive(side(ctx, "rw").force_release(), [("rw_force_release", 0)])
    assert run.result is False
    (call,) = run.effects
    # no reader in the hold table: an empty declaration (a stale reply names the readers)
    assert call.keys == ["rw", RW_CHANNEL]
    assert call.args == ["1", mode, 0]


@pytest.mark.parametrize(("side", "mode"), [(ReadLockCore, "read"), (WriteLockCore, "write")])
def test_force_release_declares_every_reader_of_the_table(
    ctx: Context, owner: str, side: type[ReadLockCore], mode: str
) -> None:
    other = second_owner(ctx)
    reader, writer = ReadLockCore(ctx, "rw"), WriteLockCore(ctx, "rw")
    drive(writer.acquire(owner, True, None, None), [("rw_write_acquire", None)])
    for who in (owner, owner, other):
        drive(reader.acquire(who, True, None, None), [("rw_read_acquire", None)])
    drive(
        ReadLockCore(ctx, "elsewhere").acquire(other, True, None, None), [("rw_read_acquire", None)]
    )
    run = drive(side(ctx, "rw").force_release(), [("rw_force_release", 1)])
    assert run.result is True
    (call,) = run.effects
    assert call.keys == [
        "rw",
        RW_CHANNEL,
        timeout_key(owner, 1),
        timeout_key(owner, 2),
        timeout_key(other, 1),
    ]
    # the writer's field is not a reader; the other lock's reader is not declared
    assert call.args == ["1", mode, 2, owner, 2, other, 1]


def test_read_release_call(ctx: Context, owner: str) -> None:
    lock = ReadLockCore(ctx, "rw")
    drive(lock.acquire(owner, True, None, None), [("rw_read_acquire", None)])
    run = drive(lock.release(owner), [("rw_read_release", 1)])
    (call,) = run.effects
    # the hold being released is out of the table already and still declared
    # the wake queue last, and the releaser's idle flag (scripts/_rw_wake.lua)
    assert call.keys == ["rw", RW_CHANNEL, timeout_key(owner, 1), RW_QUEUE]
    # then the lease of the newest hold the release leaves (the watchdog's: none is left)
    assert call.args == ["0", owner, 1, owner, 1, 0, 30_000]
    assert ctx.holds.get("rw", owner) is None


def test_read_release_declares_every_reader_of_the_table(ctx: Context, owner: str) -> None:
    other = second_owner(ctx)
    lock = ReadLockCore(ctx, "rw")
    for who, lease in ((owner, 4), (other, None), (owner, None)):
        drive(lock.acquire(who, True, None, lease), [("rw_read_acquire", None)])
    run = drive(lock.release(owner), [("rw_read_release", 0)])
    (call,) = run.effects
    assert call.keys == [
        "rw",
        RW_CHANNEL,
        timeout_key(owner, 1),
        timeout_key(owner, 2),
        timeout_key(other, 1),
        RW_QUEUE,
    ]
    # the release leaves the owner's first hold, whose lease (4 s) it re-applies
    assert call.args == ["0", owner, 2, owner, 2, other, 1, 0, 4_000]
    hold = ctx.holds.get("rw", owner)
    assert hold is not None
    assert hold.leases == [4]


def test_write_release_call_publishes_wake_all(ctx: Context, owner: str) -> None:
    lock = WriteLockCore(ctx, "rw")
    drive(lock.acquire(owner, True, None, 2), [("rw_write_acquire", None)])
    drive(lock.acquire(owner, True, None, None), [("rw_write_acquire", None)])
    run = drive(lock.release(owner), [("rw_write_release", 0)])
    (call,) = run.effects
    # the writer holds no read hold: its reader field is declared with 0 holds, no keys
    assert call.keys == ["rw", RW_CHANNEL, RW_QUEUE]
    assert call.args == ["1", 2000, f"{owner}:write", owner, 1, owner, 0, 0]
    hold = ctx.holds.get("rw", f"{owner}:write")
    assert hold is not None
    assert hold.leases == [2]
    assert isinstance(fails(lock.release(owner), [("rw_write_release", None)]).error, NotOwnedError)


def test_write_release_declares_the_writers_read_holds(ctx: Context, owner: str) -> None:
    other = second_owner(ctx)
    writer, reader = WriteLockCore(ctx, "rw"), ReadLockCore(ctx, "rw")
    drive(writer.acquire(owner, True, None, None), [("rw_write_acquire", None)])
    for who in (owner, owner, other):
        drive(reader.acquire(who, True, None, None), [("rw_read_acquire", None)])
    run = drive(writer.release(owner), [("rw_write_release", 1)])  # downgrade
    (call,) = run.effects
    assert call.keys == ["rw", RW_CHANNEL, timeout_key(owner, 1), timeout_key(owner, 2), RW_QUEUE]
    assert call.args == ["1", 30000, f"{owner}:write", owner, 1, owner, 2, 0]
    assert ctx.holds.get("rw", f"{owner}:write") is None
    hold = ctx.holds.get("rw", owner)
    assert hold is not None
    assert hold.leases == [None, None]


def test_rw_sides_with_a_hash_tagged_name(ctx: Context, owner: str) -> None:
    lock = ReadLockCore(ctx, "{cat}:rw")
    assert lock.channel == "redisson_rwlock:{cat}:rw"
    run = drive(lock.acquire(owner, True, None, None), [("rw_read_acquire", None)])
    assert run.effects[0].keys == ["{cat}:rw", f"{{cat}}:rw:{owner}:rwlock_timeout:1"]
    assert lock.renewal_keys(owner, 2) == [
        "{cat}:rw",
        f"{{cat}}:rw:{owner}:rwlock_timeout:1",
        f"{{cat}}:rw:{owner}:rwlock_timeout:2",
    ]
    run = drive(lock.release(owner), [("rw_read_release", 1)])
    assert run.effects[0].keys == [
        "{cat}:rw",
        "redisson_rwlock:{cat}:rw",
        f"{{cat}}:rw:{owner}:rwlock_timeout:1",
        "tenure_lock_wake:{cat}:rw",
    ]


# ----------------------------------------------------------------------- FencedLock


def test_fenced_token_from_the_script_reply(ctx: Context, owner: str) -> None:
    lock = FencedLockCore(ctx, "ledger")
    assert lock.token(owner) is None
    run = drive(lock.acquire(owner, True, None, None), [("fenced_acquire", [1, 7])])
    assert run.result is True
    (call,) = run.effects
    assert call.keys == ["ledger", "redisson_lock_token:{ledger}"]
    assert call.args == [30000, owner]
    assert lock.token(owner) == 7
    drive(lock.acquire(owner, True, None, None), [("fenced_acquire", [b"1", b"8"])])
    assert lock.token(owner) == 8
    hold = ctx.holds.get("ledger", owner)
    assert hold is not None
    assert len(hold.leases) == 2


def test_fenced_refusal_carries_the_pttl_and_keeps_the_token(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = FencedLockCore(ctx, "ledger")
    drive(lock.acquire(owner, True, None, None), [("fenced_acquire", [1, 3])])
    other = ctx.identity.owner_of(clock)  # any weak-referenceable key
    run = drive(
        lock.acquire(other, True, 1, None),
        [
            ("fenced_acquire", [0, 400]),
            (Subscribe, None),
            ("fenced_acquire", [0, 400]),
            (Wait, False),
            ("fenced_acquire", [0, 400]),
            (Wait, False),
            ("fenced_acquire", [0, 400]),
            (Wait, False),
            ("fenced_acquire", [0, 0]),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is False
    assert [w.seconds for w in run.of(Wait)] == pytest.approx([0.4, 0.4, 0.2])
    assert lock.token(other) is None
    assert lock.token(owner) == 3


@pytest.mark.parametrize(
    ("reply", "grant"),
    [(None, False), ([1, 5], True), ([0, 500], False), ([b"1", b"2"], True), ([b"0", b"9"], False)],
)
def test_fenced_is_grant(ctx: Context, reply: object, grant: bool) -> None:
    assert FencedLockCore(ctx, "f").is_grant(reply) is grant


def test_fenced_unreplicated_grant_is_undone(ctx: Context, owner: str) -> None:
    lock = FencedLockCore(ctx, "f")
    granted = ReplicationError("x", reply=[1, 9])
    run = fails(
        lock.acquire(owner, True, 0, None), [("fenced_acquire", granted), ("lock_release", 1)]
    )
    assert run.error is granted
    assert lock.token(owner) is None
    refused = ReplicationError("x", reply=[0, 100])
    assert fails(lock.acquire(owner, True, 0, None), [("fenced_acquire", refused)]).names == [
        "fenced_acquire"
    ]


def test_fair_turn_watcher_looks_soon_then_backs_off_then_follows_the_lease(
    ctx: Context, clock: Clock
) -> None:
    lock = FairLockCore(ctx, "f")
    (watch,) = drive(lock.watch_turn(FIRST_LOOK), []).extra
    run = drive(
        watch.flow,
        [
            ("fair_turn", [FREE, 10000]),  # the head was woken (again): it should come soon
            ("fair_turn", [FREE, 9900]),
            ("fair_turn", [HELD, 30000]),  # it came: look again when its lease ends
            ("fair_turn", [NOTHING, 0]),  # no one waits: the watcher ends
        ],
        clock=clock,
    )
    sleeps = [e.seconds for e in run.of(Sleep)]
    assert sleeps == pytest.approx(
        [FIRST_LOOK, 2 * FIRST_LOOK + TURN_SLACK, 4 * FIRST_LOOK + TURN_SLACK, 30 + TURN_SLACK]
    )
    assert run.calls("fair_turn")[0].args == [10000, "redisson_lock__channel:{f}:", "0"]
    # ended: the next release starts a watcher again
    assert len(drive(lock.watch_turn(FIRST_LOOK), []).extra) == 1


def test_fair_turn_watcher_superseded_by_an_earlier_plan(ctx: Context, clock: Clock) -> None:
    lock = FairLockCore(ctx, "f")
    (first,) = drive(lock.watch_turn(30.0), []).extra  # a grant with a 30 s lease
    flow = first.flow
    assert isinstance(flow.send(None), Sleep)  # the first watcher sleeps until then
    (second,) = drive(lock.watch_turn(FIRST_LOOK), []).extra  # a release: look sooner
    assert drive(lock.watch_turn(1.0), []).extra == []  # later than the new watcher's look
    clock.advance(30)
    with pytest.raises(StopIteration):
        flow.send(None)  # the first one ends when it wakes
    second.flow.close()
