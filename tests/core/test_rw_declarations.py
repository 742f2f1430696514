"""ReadWriteLock declarations of readers (``core/rwlock.py``, ``scripts/_rw_readers.lua``).

A call declares reader fields with hold counts and passes their read-hold timeout keys; a
script refuses a stale declaration with ``{'stale', field, count, ...}`` naming every reader
of the hash, and the flow declares again: the reader it needs (acquire, write release) or
every reader the reply named (read release, force release). After ``DECLARATIONS`` stale
replies it gives up with :class:`BackendError`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tenure.core.context import Context
from tenure.core.rwlock import DECLARATIONS, STALE, ReadLockCore, WriteLockCore
from tenure.errors import BackendError, LockLostError, ReplicationError

from .scripted import drive, fails
from .test_kinds import RW_CHANNEL, second_owner, timeout_key

OTHER = "other-client:3"
"""A reader of another client: in the hash, never in this client's hold table."""
QUEUE = "tenure_lock_wake:{rw}"
"""The wake queue, a release's last KEYS (scripts/_rw_wake.lua)."""


def stale(*readers: tuple[str, int], raw: bool = False) -> list[Any]:
    """A stale-declaration reply naming ``readers`` (as bytes with ``raw``, as a client
    without ``decode_responses`` gets it)."""
    reply: list[Any] = [STALE]
    for field, count in readers:
        reply += [field, count]
    if raw:
        return [str(item).encode() for item in reply]
    return reply


def test_constants() -> None:
    assert STALE == "stale"
    assert DECLARATIONS == 20


# ----------------------------------------------------------------------- read acquire


@pytest.mark.parametrize("raw", [False, True])
def test_read_acquire_declares_again_what_the_stale_reply_counts(
    ctx: Context, owner: str, raw: bool
) -> None:
    lock = ReadLockCore(ctx, "rw")
    # the server counts 2 holds for the owner (the table none): hold 3 is the new one
    reply = stale((OTHER, 1), (owner, 2), raw=raw)
    run = drive(
        lock.acquire(owner, True, None, None),
        [("rw_read_acquire", reply), ("rw_read_acquire", None)],
    )
    assert run.result is True
    first, second = run.effects
    assert first.keys == ["rw", timeout_key(owner, 1)]
    assert first.args == [30000, owner, f"{owner}:write", 1, owner, 1]
    # only its own field, with the reply's count plus the hold it adds; other readers no
    assert second.keys == ["rw", *(timeout_key(owner, n) for n in (1, 2, 3))]
    assert second.args == [30000, owner, f"{owner}:write", 1, owner, 3]
    hold = ctx.holds.get("rw", owner)
    assert hold is not None
    assert hold.leases == [None]


def test_read_acquire_stale_reply_without_its_field_declares_the_new_hold(
    ctx: Context, owner: str
) -> None:
    lock = ReadLockCore(ctx, "rw")
    drive(lock.acquire(owner, True, None, 5), [("rw_read_acquire", None)])
    run = drive(
        lock.acquire(owner, True, None, 5),
        [("rw_read_acquire", stale((OTHER, 4))), ("rw_read_acquire", None)],
    )
    first, second = run.effects
    # A re-entry ("", then 1): the script grants only on top of a hold the server has.
    assert first.args[3:] == [1, owner, 2, "", 1]
    assert first.keys == ["rw", timeout_key(owner, 1), timeout_key(owner, 2)]
    assert second.args[3:] == [1, owner, 1, "", 1]  # the owner's field is gone on the server
    assert second.keys == ["rw", timeout_key(owner, 1)]


def test_read_acquire_stale_reply_then_refused_waits_as_usual(ctx: Context, owner: str) -> None:
    run = drive(
        ReadLockCore(ctx, "rw").acquire(owner, False, None, None),
        [("rw_read_acquire", stale((owner, 1))), ("rw_read_acquire", 700)],
    )
    assert run.result is False
    assert [c.args[3:] for c in run.effects] == [[1, owner, 1], [1, owner, 2]]
    assert ctx.holds.get("rw", owner) is None


def test_read_acquire_stale_reply_in_a_replication_error_is_declared_again(
    ctx: Context, owner: str
) -> None:
    # a stale reply changed nothing: no undo, just a second declaration
    lock = ReadLockCore(ctx, "rw")
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            ("rw_read_acquire", ReplicationError("x", reply=stale((owner, 1)))),
            ("rw_read_acquire", None),
        ],
    )
    assert run.result is True
    assert run.names == ["rw_read_acquire", "rw_read_acquire"]
    assert run.effects[1].args[3:] == [1, owner, 2]


def test_read_acquire_unreplicated_grant_is_undone_with_a_declared_release(
    ctx: Context, owner: str
) -> None:
    lock = ReadLockCore(ctx, "rw")
    drive(lock.acquire(owner, True, None, None), [("rw_read_acquire", None)])
    run = fails(
        lock.acquire(owner, True, None, None),
        [("rw_read_acquire", ReplicationError("x", reply=None)), ("rw_read_release", 0)],
    )
    assert isinstance(run.error, ReplicationError)
    undo = run.effects[1]
    # the granted hold 2 is not in the table yet and is declared
    assert undo.keys == ["rw", RW_CHANNEL, timeout_key(owner, 1), timeout_key(owner, 2), QUEUE]
    # ... and the lease re-applied to the hold it leaves (the watchdog's: hold 1's)
    assert undo.args == ["0", owner, 1, owner, 2, 0, 30000]
    hold = ctx.holds.get("rw", owner)
    assert hold is not None
    assert hold.leases == [None]


def test_read_acquire_undo_declares_again_on_a_stale_reply(ctx: Context, owner: str) -> None:
    lock = ReadLockCore(ctx, "rw")
    run = fails(
        lock.acquire(owner, True, None, None),
        [
            ("rw_read_acquire", ReplicationError("x", reply=None)),
            ("rw_read_release", stale((owner, 1), (OTHER, 2))),
            ("rw_read_release", 1),
        ],
    )
    assert isinstance(run.error, ReplicationError)
    first, second = run.effects[1:]
    assert first.args == ["0", owner, 1, owner, 1, 0, 30000]
    assert second.keys == [
        "rw",
        RW_CHANNEL,
        timeout_key(owner, 1),
        f"{{rw}}:{OTHER}:rwlock_timeout:1",
        f"{{rw}}:{OTHER}:rwlock_timeout:2",
        QUEUE,
    ]
    assert second.args == ["0", owner, 2, owner, 1, OTHER, 2, 0, 30000]
    assert ctx.holds.get("rw", owner) is None


# ----------------------------------------------------------------------- read release


def test_read_release_declares_every_reader_the_stale_reply_named(ctx: Context, owner: str) -> None:
    mate = second_owner(ctx)
    lock = ReadLockCore(ctx, "rw")
    for who in (owner, mate):
        drive(lock.acquire(who, True, None, None), [("rw_read_acquire", None)])
    reply = stale((owner, 1), (OTHER, 2), (mate, 1), raw=True)
    run = drive(lock.release(owner), [("rw_read_release", reply), ("rw_read_release", 1)])
    first, second = run.effects
    # the table's readers, then the released hold's field (out of the table already)
    assert first.keys == ["rw", RW_CHANNEL, timeout_key(mate, 1), timeout_key(owner, 1), QUEUE]
    assert first.args == ["0", owner, 2, mate, 1, owner, 1, 0, 30000]
    # exactly the reply's readers, in its order, with its counts
    assert second.keys == [
        "rw",
        RW_CHANNEL,
        timeout_key(owner, 1),
        f"{{rw}}:{OTHER}:rwlock_timeout:1",
        f"{{rw}}:{OTHER}:rwlock_timeout:2",
        timeout_key(mate, 1),
        QUEUE,
    ]
    assert second.args == ["0", owner, 3, owner, 1, OTHER, 2, mate, 1, 0, 30000]
    assert ctx.holds.get("rw", owner) is None
    assert ctx.holds.get("rw", mate) is not None


def test_read_release_of_a_lost_hold_after_a_stale_reply(ctx: Context, owner: str) -> None:
    lock = ReadLockCore(ctx, "rw")
    drive(lock.acquire(owner, True, None, None), [("rw_read_acquire", None)])
    run = fails(
        lock.release(owner), [("rw_read_release", stale((OTHER, 1))), ("rw_read_release", None)]
    )
    assert run.effects[1].args == ["0", owner, 1, OTHER, 1, 0, 30000]
    assert type(run.error) is LockLostError


# ---------------------------------------------------------------------- write release


def test_write_release_declares_its_own_field_again(ctx: Context, owner: str) -> None:
    writer = WriteLockCore(ctx, "rw")
    drive(writer.acquire(owner, True, None, 2), [("rw_write_acquire", None)])
    reply = stale((OTHER, 5), (owner, 2))
    run = drive(writer.release(owner), [("rw_write_release", reply), ("rw_write_release", 1)])
    first, second = run.effects
    assert first.keys == ["rw", RW_CHANNEL, QUEUE]
    assert first.args == ["1", 30000, f"{owner}:write", owner, 1, owner, 0, 0]
    # its own field only, with the reply's count (a write release adds no read hold)
    assert second.keys == ["rw", RW_CHANNEL, timeout_key(owner, 1), timeout_key(owner, 2), QUEUE]
    assert second.args == ["1", 30000, f"{owner}:write", owner, 1, owner, 2, 0]
    assert ctx.holds.get("rw", f"{owner}:write") is None


# ---------------------------------------------------------------------- force release


@pytest.mark.parametrize(("side", "mode"), [(ReadLockCore, "read"), (WriteLockCore, "write")])
def test_force_release_declares_every_reader_the_stale_reply_named(
    ctx: Context, side: type[ReadLockCore], mode: str
) -> None:
    run = drive(
        side(ctx, "rw").force_release(),
        [("rw_force_release", stale((OTHER, 2), ("b:1", 1))), ("rw_force_release", 1)],
    )
    assert run.result is True
    first, second = run.effects
    assert first.keys == ["rw", RW_CHANNEL]
    assert first.args == ["1", mode, 0]
    assert second.keys == [
        "rw",
        RW_CHANNEL,
        f"{{rw}}:{OTHER}:rwlock_timeout:1",
        f"{{rw}}:{OTHER}:rwlock_timeout:2",
        "{rw}:b:1:rwlock_timeout:1",
    ]
    assert second.args == ["1", mode, 2, OTHER, 2, "b:1", 1]


# -------------------------------------------------------------------------- giving up


def test_read_acquire_gives_up_after_declarations(ctx: Context, owner: str) -> None:
    # each reply counts more holds of the owner than the call declared
    replies = [stale((owner, n)) for n in range(1, DECLARATIONS + 1)]
    run = fails(
        ReadLockCore(ctx, "rw").acquire(owner, True, None, None),
        [("rw_read_acquire", reply) for reply in replies],
    )
    assert type(run.error) is BackendError
    assert "'rw'" in str(run.error)
    assert f"{DECLARATIONS} declarations" in str(run.error)
    assert [c.args[3:] for c in run.effects] == [[1, owner, n] for n in range(1, DECLARATIONS + 1)]
    assert ctx.holds.get("rw", owner) is None


def test_read_release_gives_up_after_declarations(ctx: Context, owner: str) -> None:
    lock = ReadLockCore(ctx, "rw")
    drive(lock.acquire(owner, True, None, None), [("rw_read_acquire", None)])
    replies = [stale((owner, 1), (OTHER, n)) for n in range(1, DECLARATIONS + 1)]
    run = fails(lock.release(owner), [("rw_read_release", reply) for reply in replies])
    assert type(run.error) is BackendError
    assert len(run.effects) == DECLARATIONS
    # every call after the first declares the readers of the reply before it
    for n, call in enumerate(run.effects[1:], start=1):
        assert call.args == ["0", owner, 2, owner, 1, OTHER, n, 0, 30000]
    assert ctx.holds.get("rw", owner) is None  # forgotten before the script, as any release


def test_write_release_gives_up_after_declarations(ctx: Context, owner: str) -> None:
    writer = WriteLockCore(ctx, "rw")
    drive(writer.acquire(owner, True, None, None), [("rw_write_acquire", None)])
    replies = [stale((owner, n)) for n in range(1, DECLARATIONS + 1)]
    run = fails(writer.release(owner), [("rw_write_release", reply) for reply in replies])
    assert type(run.error) is BackendError
    assert [c.args[3:] for c in run.effects] == [
        [owner, 1, owner, n, 0] for n in range(DECLARATIONS)
    ]


@pytest.mark.parametrize("side", [ReadLockCore, WriteLockCore])
def test_force_release_gives_up_after_declarations(ctx: Context, side: type[ReadLockCore]) -> None:
    run = fails(
        side(ctx, "rw").force_release(),
        [("rw_force_release", stale((OTHER, n))) for n in range(1, DECLARATIONS + 1)],
    )
    assert type(run.error) is BackendError
    assert len(run.effects) == DECLARATIONS


def test_the_last_try_may_still_succeed(ctx: Context, owner: str) -> None:
    replies: list[Any] = [stale((owner, n)) for n in range(1, DECLARATIONS)]
    run = drive(
        ReadLockCore(ctx, "rw").acquire(owner, True, None, None),
        [("rw_read_acquire", reply) for reply in [*replies, None]],
    )
    assert run.result is True
    assert len(run.effects) == DECLARATIONS
