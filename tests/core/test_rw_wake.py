"""What a ReadWriteLock's waiters send for one wake-up per unlock (scripts/_rw_wake.lua): a
writer listens on its client channel too and its retries register its client (the PTTL
alone while held); a reader listens on the lock's channel alone, always tries again once
subscribed, and its attempts while subscribed mark the wake queue."""

from __future__ import annotations

from tenure.core.context import Context
from tenure.core.effects import Background, Subscribe, Unsubscribe, Wait
from tenure.core.rwlock import ReadLockCore, WriteLockCore

from .scripted import drive
from .test_kinds import RW_CHANNEL, timeout_key

QUEUE = "tenure_lock_wake:{rw}"


def test_a_waiting_writer_listens_on_its_client_channel_and_registers(
    ctx: Context, owner: str
) -> None:
    client_id = ctx.identity.client_id
    run = drive(
        WriteLockCore(ctx, "rw").acquire(owner, True, None, None),
        [
            ("rw_write_acquire", 50),
            (Subscribe, None),
            ("rw_write_acquire", 40),
            (Wait, True),
            ("rw_write_acquire", None),
            (Unsubscribe, None),
        ],
    )
    assert run.result is True
    first, retry, last = (e for e in run.effects if getattr(e, "script", None) is not None)
    field = f"{owner}:write"
    assert first.keys == ["rw"]
    assert first.args == [30000, field, owner]  # a first attempt: kind and re-entry checks
    assert retry.keys == ["rw", QUEUE]
    assert retry.args == [30000, field, owner, client_id, 1]  # registers; PTTL alone
    assert last.args == retry.args
    (sub,) = run.of(Subscribe)
    assert sub.channel == RW_CHANNEL
    assert sub.alias == f"{RW_CHANNEL}:tenure:{client_id}"
    assert sub.relay is not None
    assert sub.relay.script.name == "lock_wake"
    assert sub.relay.keys == ["rw", RW_CHANNEL, QUEUE]
    assert sub.relay.args == ["1", client_id]


def test_a_writer_holding_read_holds_retries_with_every_check(ctx: Context, owner: str) -> None:
    drive(ReadLockCore(ctx, "rw").acquire(owner, True, None, None), [("rw_read_acquire", None)])
    run = drive(
        WriteLockCore(ctx, "rw").acquire(owner, True, None, None),
        [
            ("rw_write_acquire", 50),
            (Subscribe, None),
            ("rw_write_acquire", None),
            (Unsubscribe, None),
        ],
    )
    assert run.result is True
    retry = [e for e in run.effects if getattr(e, "script", None) is not None][1]
    # No retry 1 (ARGV[5] ''); its read holds expected (ARGV[7]): 'upgrade' while the
    # server has them, 'lost' once they are gone.
    assert retry.args == [30000, f"{owner}:write", owner, ctx.identity.client_id, "", "", 1]


def test_a_waiting_reader_retries_once_subscribed_and_marks_the_queue(
    ctx: Context, owner: str
) -> None:
    run = drive(
        ReadLockCore(ctx, "rw").acquire(owner, True, None, None),
        [
            ("rw_read_acquire", 50),
            (Subscribe, False),  # no `since` sent: never fresh, so it tries again
            ("rw_read_acquire", 40),
            (Wait, True),
            ("rw_read_acquire", None),
            (Unsubscribe, None),
        ],
    )
    assert run.result is True
    first, retry, last = (e for e in run.effects if getattr(e, "script", None) is not None)
    assert first.keys == ["rw", timeout_key(owner, 1)]
    assert first.args == [30000, owner, f"{owner}:write", 1, owner, 1]
    assert retry.keys == ["rw", timeout_key(owner, 1), QUEUE]
    assert retry.args == [30000, owner, f"{owner}:write", 1, owner, 1, 1]
    assert last.keys == retry.keys
    (sub,) = run.of(Subscribe)
    assert sub.channel == RW_CHANNEL
    assert sub.alias is None
    assert sub.since is None
    (leave,) = run.of(Unsubscribe)
    assert leave.pass_on is True  # a reader passes its wake-up on


def test_a_release_wakes_through_the_queue_and_looks_again(ctx: Context, owner: str) -> None:
    # -2: the unlock woke one other client alone; the back-up look follows (lock_wake_check).
    lock = WriteLockCore(ctx, "rw")
    drive(lock.acquire(owner, True, None, None), [("rw_write_acquire", None)])
    run = drive(lock.release(owner), [("rw_write_release", -2)])
    assert ctx.holds.get("rw", f"{owner}:write") is None
    (background,) = run.extra
    assert isinstance(background, Background)
