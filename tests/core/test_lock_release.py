"""Lock release, force_release, the read-only queries and replication (wait_for_replicas)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Generator
from types import SimpleNamespace
from typing import Any

import pytest
import redis.asyncio.connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from tenure._redis import backend_error, resolve_redis
from tenure.core.args import bind_callback
from tenure.core.context import Context
from tenure.core.effects import Call, Command, Drain, Sleep, Subscribe, Unsubscribe
from tenure.core.lock import LockCore, lease_from_pttl
from tenure.core.options import check_replicas, check_timeouts, make_context, replica_wait
from tenure.errors import (
    BackendError,
    LockLostError,
    NotOwnedError,
    ReplicationError,
    ServerError,
)

from .conftest import new_context
from .scripted import drive, fails

ACQ, REL = "lock_acquire", "lock_release"


def take(lock: LockCore, owner: str, lease: float | None = None) -> None:
    assert drive(lock.acquire(owner, True, None, lease), [(ACQ, None)]).result is True


class Losses:
    """An on_lost callback that records its calls.

    The core calls ``on_lost()`` with no argument; a front passes ``bind_callback(user, self)``
    so the user's callback gets the public object. Called bare, a call records None.
    """

    def __init__(self) -> None:
        self.fronts: list[object] = []

    def __call__(self, front: object = None) -> None:
        self.fronts.append(front)


# ------------------------------------------------------------------------- release


def test_release_of_the_last_hold_sends_the_script_and_forgets_the_hold(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)
    run = drive(lock.release(owner), [(REL, 1)])
    (call,) = run.effects
    assert call.keys == ["l", "tenure_lock_wake:{l}"]
    assert call.args == ["0", 30000, owner]  # no lingering subscription: no 4th ARGV
    assert call.changes
    assert ctx.holds.get("l", owner) is None


@pytest.mark.parametrize(
    ("reached", "hears", "drained"),
    [(2, True, True), (3, True, True), (2, False, False), (1, True, False), (1, False, False)],
)
def test_a_release_whose_unlock_reached_our_own_subscription_reads_it_at_once(
    ctx: Context, owner: str, reached: int, hears: bool, drained: bool
) -> None:
    """The reply is 1 + the subscribers the unlock reached. When this client's own
    subscription is one of them (it hears the channel), the release asks the driver to read
    what came (Drain), so the unlock is applied now and not by the releaser's next wait."""
    ctx.hears = lambda channel: hears and channel == "redisson_lock__channel:{l}"
    lock = LockCore(ctx, "l")
    take(lock, owner)
    run = drive(lock.release(owner), [(REL, reached)])
    expected = [Drain("redisson_lock__channel:{l}")] if drained else []
    assert [e for e in run.extra if isinstance(e, Drain)] == expected


def test_release_with_holds_remaining_keeps_the_rest(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner, lease=10)
    take(lock, owner)  # newest: watchdog
    run = drive(lock.release(owner), [(REL, 0)])
    # the lease re-applied is the newest hold left after this release: 10 s
    assert run.effects[0].args[:3] == ["0", 10000, owner]
    hold = ctx.holds.get("l", owner)
    assert hold is not None
    assert hold.leases == [10]
    assert not hold.watchdog  # the watchdog hold went first


def test_release_reply_one_drops_the_whole_entry_even_if_more_were_recorded(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)
    take(lock, owner)
    drive(lock.release(owner), [(REL, 1)])  # the server says: no hold left
    assert ctx.holds.get("l", owner) is None


def test_release_reply_as_bytes_or_str(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)
    take(lock, owner)
    drive(lock.release(owner), [(REL, b"0")])
    assert ctx.holds.get("l", owner) is not None
    drive(lock.release(owner), [(REL, "1")])
    assert ctx.holds.get("l", owner) is None


def test_release_without_a_hold_is_not_owned(ctx: Context, owner: str) -> None:
    losses = Losses()
    lock = LockCore(ctx, "l", on_lost=losses)
    run = fails(lock.release(owner), [(REL, None)])
    assert type(run.error) is NotOwnedError
    assert "'l'" in str(run.error)
    # lease of a release without a recorded hold: the watchdog's
    assert run.effects[0].args[:3] == ["0", 30000, owner]
    assert not lock.is_lost(owner)
    assert losses.fronts == []


def test_release_of_a_hold_the_server_no_longer_has_is_a_loss(ctx: Context, owner: str) -> None:
    losses = Losses()
    front = object()  # the public lock, as the sync/asyncio front binds itself
    lock = LockCore(ctx, "l", on_lost=bind_callback(losses, front))
    take(lock, owner)
    run = fails(lock.release(owner), [(REL, None)])
    assert isinstance(run.error, LockLostError)
    assert lock.is_lost(owner)
    assert losses.fronts == [front]
    assert ctx.holds.get("l", owner) is None
    # reported once: the next release is a plain NotOwnedError
    again = fails(lock.release(owner), [(REL, None)])
    assert type(again.error) is NotOwnedError


def test_release_after_a_loss_was_reported_raises_lock_lost(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)
    ctx.holds.discard("l", owner)  # as the watchdog does when it finds the hold gone
    lock.hold_lost(owner)
    run = fails(lock.release(owner), [])  # known lost: raised with no I/O
    assert type(run.error) is LockLostError
    assert isinstance(run.error, NotOwnedError)
    assert type(fails(lock.release(owner), [(REL, None)]).error) is NotOwnedError


def test_acquiring_again_clears_the_lost_state(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    lock.hold_lost(owner)
    assert lock.is_lost(owner)
    take(lock, owner)
    assert not lock.is_lost(owner)
    drive(lock.release(owner), [(REL, 1)])
    assert not lock.is_lost(owner)


def test_loss_is_per_owner(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    lock.hold_lost("someone-else:1")
    assert not lock.is_lost(owner)
    assert type(fails(lock.release(owner), [(REL, None)]).error) is NotOwnedError


def test_failing_on_lost_callback_does_not_hide_the_loss(ctx: Context, owner: str) -> None:
    calls: list[tuple[object, ...]] = []

    def broken(*args: object) -> None:
        calls.append(args)
        raise RuntimeError("callback bug")

    lock = LockCore(ctx, "l", on_lost=broken)
    take(lock, owner)
    run = fails(lock.release(owner), [(REL, None)])
    assert isinstance(run.error, LockLostError)
    assert calls == [()]  # called, with no argument
    assert lock.is_lost(owner)


def test_on_lost_is_called_with_no_argument(ctx: Context, owner: str) -> None:
    calls: list[tuple[object, ...]] = []
    lock = LockCore(ctx, "l", on_lost=lambda *args: calls.append(args))
    lock.hold_lost(owner)
    assert calls == [()]


def test_bind_callback_checks_and_binds_the_subject() -> None:
    assert bind_callback(None, object()) is None
    with pytest.raises(TypeError, match="on_lost must be callable, not int"):
        bind_callback(3, object())
    losses, front = Losses(), object()
    bound = bind_callback(losses, front)
    assert bound is not None
    bound()
    assert losses.fronts == [front]


def test_release_forgets_the_hold_before_the_script_runs(ctx: Context, owner: str) -> None:
    """The watchdog must not renew (or report lost) a hold being released."""
    lock = LockCore(ctx, "l")
    take(lock, owner)
    flow = lock.release(owner)
    assert isinstance(next(flow), Call)
    assert ctx.holds.get("l", owner) is None
    assert ctx.holds.watchdog_holds() == []
    flow.close()


def test_release_failing_with_a_backend_error_leaves_the_hold_forgotten(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)
    run = fails(lock.release(owner), [(REL, BackendError("timeout"))])
    assert type(run.error) is BackendError
    assert ctx.holds.get("l", owner) is None  # never renewed again
    assert not lock.is_lost(owner)


GUARDED = "lock_release+guard"


def failed_release(
    ctx: Context, owner: str, holds: int
) -> tuple[LockCore, Generator[Any, Any, Any]]:
    """Lock "l" taken ``holds`` times by ``owner``, then released with a BackendError (the
    reply lost): the lock and the flow of the one background finishing that release."""
    lock = LockCore(ctx, "l")
    for _ in range(holds):
        take(lock, owner)
    run = fails(lock.release(owner), [(REL, BackendError("timeout"))])
    (background,) = run.extra
    return lock, background.flow


def test_a_release_failing_with_a_backend_error_is_finished_in_the_background(
    ctx: Context, owner: str
) -> None:
    """The caller gets the BackendError; a background reconcile releases what the server
    still holds beyond the holds recorded (none), behind the guard, once it answers: the
    lock no longer stays held to its lease end (30 s)."""
    lock = LockCore(ctx, "l")
    take(lock, owner)
    error = BackendError("timeout")
    run = fails(lock.release(owner), [(REL, error)])
    assert run.error is error
    (background,) = run.extra
    assert ("l", owner) in ctx.reconciling  # the owner's next acquire waits for it
    finish = drive(
        background.flow,
        [
            (GUARDED, BackendError("still down")),  # retried after a pause
            (GUARDED, 1),  # the release had not run: the lock freed now
            (GUARDED, None),  # nothing beyond the 0 holds recorded
            (GUARDED, None),  # nor a moment later (a script queued on the old connection)
        ],
    )
    assert finish.effects[0].args[-2:] == [owner, 0]  # field, recorded count
    assert [s.seconds for s in finish.of(Sleep)] == [0.05, 0.1]
    assert ("l", owner) not in ctx.reconciling


def test_a_reentrant_release_failing_with_a_backend_error_takes_off_no_second_hold(
    ctx: Context, owner: str
) -> None:
    """Two holds, the release's reply lost (it ran): the guard finds the server at the one
    hold recorded, and the background takes off nothing more."""
    _, reconcile = failed_release(ctx, owner, 2)
    finish = drive(reconcile, [(GUARDED, None), (GUARDED, None)])
    assert finish.effects[0].args[-2:] == [owner, 1]
    hold = ctx.holds.get("l", owner)
    assert hold is not None
    assert len(hold.leases) == 1  # still held, still renewed


def test_a_release_the_server_refused_is_not_retried(ctx: Context, owner: str) -> None:
    """A ServerError (an ACL, a script error): the guarded release would be refused alike.
    The caller gets it and the hold expires with its lease."""
    lock = LockCore(ctx, "l")
    take(lock, owner)
    run = fails(lock.release(owner), [(REL, ServerError("NOPERM"))])
    assert type(run.error) is ServerError
    assert run.extra == []
    assert ctx.holds.get("l", owner) is None
    assert not ctx.reconciling


@pytest.mark.parametrize(("reply", "left"), [(0, [None]), (1, None)])
def test_release_replication_error_applies_the_reply_then_raises(
    ctx: Context, owner: str, reply: int, left: list[None] | None
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)
    take(lock, owner)
    error = ReplicationError("0 of 1", reply=reply, acknowledged=0)
    run = fails(lock.release(owner), [(REL, error)])
    assert run.error is error
    hold = ctx.holds.get("l", owner)
    assert (hold.leases if hold else None) == left


def test_release_replication_error_with_nil_reply_is_not_owned(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    run = fails(lock.release(owner), [(REL, ReplicationError("x", reply=None))])
    assert type(run.error) is NotOwnedError


# -------------------------------------------------------------------- force_release


@pytest.mark.parametrize(("reply", "held"), [(1, True), (0, False), (b"1", True)])
def test_force_release(ctx: Context, reply: object, held: bool) -> None:
    lock = LockCore(ctx, "l")
    run = drive(lock.force_release(), [("lock_force_release", reply)])
    assert run.result is held
    (call,) = run.effects
    assert call.keys == ["l", "redisson_lock__channel:{l}"]
    assert call.args == ["0"]
    assert call.changes


# -------------------------------------------------------------------------- queries


@pytest.mark.parametrize(("reply", "expected"), [(1, True), (0, False)])
def test_locked(ctx: Context, reply: int, expected: bool) -> None:
    run = drive(LockCore(ctx, "l").locked(), [(Command, reply)])
    assert run.result is expected
    assert run.effects[0].args == ("EXISTS", "l")


@pytest.mark.parametrize(("reply", "expected"), [(1, True), (0, False)])
def test_owned(ctx: Context, owner: str, reply: int, expected: bool) -> None:
    run = drive(LockCore(ctx, "l").owned(owner), [(Command, reply)])
    assert run.result is expected
    assert run.effects[0].args == ("HEXISTS", "l", owner)


@pytest.mark.parametrize(("reply", "expected"), [(None, 0), (b"3", 3), ("1", 1), (2, 2)])
def test_hold_count(ctx: Context, owner: str, reply: object, expected: int) -> None:
    run = drive(LockCore(ctx, "l").hold_count(owner), [(Command, reply)])
    assert run.result == expected
    assert run.effects[0].args == ("HGET", "l", owner)


@pytest.mark.parametrize(
    ("pttl", "expected"), [(-2, None), (-1, math.inf), (1500, 1.5), (0, 0.0), (1, 0.001)]
)
def test_remaining_lease(ctx: Context, pttl: int, expected: float | None) -> None:
    run = drive(LockCore(ctx, "l").remaining_lease(), [(Command, pttl)])
    assert run.result == expected
    assert run.effects[0].args == ("PTTL", "l")
    assert lease_from_pttl(pttl) == expected


def test_queries_use_the_wire_name(owner: str) -> None:
    lock = LockCore(new_context(name_prefix="p/"), "l")
    assert drive(lock.owned(owner), [(Command, 1)]).effects[0].args == ("HEXISTS", "p/l", owner)


# ---------------------------------------------------------------------- replication


def test_unreplicated_grant_is_undone_by_a_release_call(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    error = ReplicationError("0 of 1 replicas", reply=None, acknowledged=0)
    run = fails(lock.acquire(owner, True, None, 5), [(ACQ, error), (REL, 1)])
    assert run.error is error
    undo = run.calls(REL)[0]
    assert undo.args[:3] == ["0", 30000, owner]  # no hold recorded: the default lease
    assert ctx.holds.get("l", owner) is None


def test_unreplicated_reentry_undoes_one_hold_with_the_lease_of_the_one_before(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner, lease=10)
    run = fails(lock.acquire(owner, True, None, None), [(ACQ, ReplicationError("x")), (REL, 0)])
    assert isinstance(run.error, ReplicationError)
    assert run.calls(REL)[0].args[:3] == ["0", 10000, owner]
    hold = ctx.holds.get("l", owner)
    assert hold is not None
    assert hold.leases == [10]


def test_replication_error_for_a_refusal_undoes_nothing(ctx: Context, owner: str) -> None:
    run = fails(
        LockCore(ctx, "l").acquire(owner, False, None, None),
        [(ACQ, ReplicationError("x", reply=1500))],
    )
    assert isinstance(run.error, ReplicationError)
    assert run.names == [ACQ]


@pytest.mark.parametrize("undo_error", [BackendError("down"), ReplicationError("again", reply=1)])
def test_failed_undo_still_raises_the_replication_error(
    ctx: Context, owner: str, undo_error: BackendError
) -> None:
    error = ReplicationError("x")
    run = fails(LockCore(ctx, "l").acquire(owner, True, 0, None), [(ACQ, error), (REL, undo_error)])
    assert run.error is error


def test_replication_error_while_waiting_undoes_and_unsubscribes(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    run = fails(
        lock.acquire(owner, True, None, None),
        [
            (ACQ, 100),
            (Subscribe, None),
            (ACQ, ReplicationError("x")),
            (REL, 1),
            (lambda e: isinstance(e, Unsubscribe) and e.pass_on, None),
        ],
    )
    assert isinstance(run.error, ReplicationError)


def test_replica_wait_only_for_changing_scripts_with_replicas_configured(owner: str) -> None:
    lock = LockCore(new_context(), "l")
    call = lock.release_call(owner, None)
    assert replica_wait(new_context(), call, 1) is None
    ctx = new_context(wait_for_replicas=2, replica_timeout=0.25)
    assert replica_wait(ctx, call, 1) == (2, 250)
    assert replica_wait(ctx, Call(call.script, call.keys, call.args, changes=False), 1) is None


def test_acquire_waits_for_replicas_only_after_a_grant(ctx: Context, owner: str) -> None:
    """An attempt that granted nothing changed nothing: no WAIT (issue 9 item 9)."""
    replicated = new_context(wait_for_replicas=1)
    run = drive(LockCore(replicated, "l").acquire(owner, False, None, None), [(ACQ, 5000)])
    (call,) = run.effects
    assert replica_wait(replicated, call, 5000) is None  # refused: the holder's PTTL
    assert replica_wait(replicated, call, None) == (1, 1000)  # granted


def test_check_replicas_raises_with_the_reply(owner: str) -> None:
    ctx = new_context(wait_for_replicas=2)
    call = LockCore(ctx, "l").release_call(owner, None)
    check_replicas(ctx, call, 1, acknowledged=2)
    check_replicas(ctx, call, 1, acknowledged=3)
    with pytest.raises(ReplicationError, match="lock_release: 1 of 2") as caught:
        check_replicas(ctx, call, [1, 7], acknowledged=1)
    assert caught.value.reply == [1, 7]
    assert caught.value.acknowledged == 1
    assert isinstance(caught.value, BackendError)


def test_backend_error_chains_the_cause() -> None:
    cause = ConnectionResetError("peer")
    error = backend_error(cause)
    assert isinstance(error, BackendError)
    assert error.__cause__ is cause
    assert "ConnectionResetError" in str(error)


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("watchdog_timeout", 0, ValueError),
        ("watchdog_timeout", math.inf, ValueError),
        ("watchdog_timeout", "30", TypeError),
        ("name_prefix", None, TypeError),
        ("wait_for_replicas", -1, ValueError),
        ("wait_for_replicas", True, TypeError),
        ("wait_for_replicas", 1.0, TypeError),
        ("replica_timeout", -1, ValueError),
    ],
)
def test_client_options_are_checked(option: str, value: object, error: type[Exception]) -> None:
    settings: dict[str, object] = {
        "watchdog_timeout": 30.0,
        "name_prefix": "",
        "wait_for_replicas": 0,
        "replica_timeout": 1.0,
        option: value,
    }
    with pytest.raises(error, match=option):
        make_context(**settings)


def test_socket_timeouts_are_checked() -> None:
    check_timeouts(None, None)
    check_timeouts(1, 0.5)
    with pytest.raises(ValueError, match="socket_connect_timeout"):
        check_timeouts(1, 0)


def test_failing_loss_listener_does_not_stop_on_lost(ctx: Context, owner: str) -> None:
    class Listener:
        def lost(self, core: LockCore, who: str) -> None:
            raise RuntimeError("listener bug")

    losses, front = Losses(), object()
    lock = LockCore(ctx, "l", on_lost=bind_callback(losses, front))
    listener = Listener()
    lock.add_loss_listener(listener.lost)
    lock.hold_lost(owner)
    assert lock.is_lost(owner)
    assert losses.fronts == [front]


# ------------------------------------------------------------- building redis clients


class FakePool:
    @classmethod
    def from_url(cls, url: str, **kwargs: object) -> FakePool:
        pool = cls()
        pool.url, pool.kwargs = url, kwargs  # type: ignore[attr-defined]
        return pool


class FakeRedis:
    def __init__(self, pool: object = None) -> None:
        self.connection_pool = pool

    @classmethod
    def from_pool(cls, pool: FakePool) -> FakeRedis:
        return cls(pool)


def test_resolve_redis_from_a_url_builds_a_blocking_pool_without_retries() -> None:
    client, owned, timeout = resolve_redis("redis://h/0", FakeRedis, FakePool, 5.0, 2.0)
    assert owned is True
    assert timeout == 5.0
    pool = client.connection_pool
    assert pool.url == "redis://h/0"
    retry = pool.kwargs.pop("retry")
    notifications = pool.kwargs.pop("maint_notifications_config", None)
    assert pool.kwargs == {
        "max_connections": 100,
        "timeout": None,
        "socket_timeout": 5.0,
        "socket_connect_timeout": 2.0,
    }
    # retries are off: redis-py must not resend a lock script after a timeout
    assert isinstance(retry, Retry)
    assert retry.get_retries() == 0
    assert isinstance(retry._backoff, NoBackoff)
    # maintenance notifications off where redis-py has them: a server refusing them made
    # each handshake take the logging module's lock (docs/internals.md)
    init = redis.asyncio.connection.AbstractConnection.__init__  # FakeRedis: the asyncio side
    if "maint_notifications_config" in inspect.signature(init).parameters:
        assert notifications is not None
        assert notifications.enabled is False
    else:
        assert notifications is None


def test_resolve_redis_keeps_a_passed_in_client() -> None:
    given = FakeRedis(SimpleNamespace(connection_kwargs={"socket_timeout": 1.5}))
    assert resolve_redis(given, FakeRedis, FakePool, 5.0, 5.0) == (given, False, 1.5)
    with pytest.raises(TypeError, match="url_or_redis"):
        resolve_redis(42, FakeRedis, FakePool, 5.0, 5.0)


def test_a_release_waits_for_the_background_finishing_an_earlier_one(
    ctx: Context, owner: str
) -> None:
    """Two holds; the first release fails and is finished in the background, behind the
    guard, at the one hold recorded. Had the owner's second release gone out meanwhile
    (the table at 0), the background's next guarded release would take off that hold
    too, and the second release, refused, would raise LockLostError and report a loss. It
    sends nothing until the background ends, then its own release."""
    lock, reconcile = failed_release(ctx, owner, 2)
    undo = next(reconcile)
    assert undo.args[-2:] == [owner, 1]
    second = lock.release(owner)
    assert isinstance(next(second), Command)  # a look: the server answers
    assert isinstance(second.send(0), Sleep)  # waits, sends nothing
    assert isinstance(reconcile.send(0), Call)  # the first release's hold taken off
    assert isinstance(second.send(None), Sleep)
    assert isinstance(reconcile.send(None), Sleep)  # nothing beyond 1: the recheck
    check = reconcile.send(None)
    assert check.args[-2:] == [owner, 1]
    with pytest.raises(StopIteration):
        reconcile.send(None)
    assert not ctx.reconciling
    release = second.send(None)
    assert isinstance(release, Call)
    assert release.args == ["0", 30000, owner]  # its own, unguarded
    with pytest.raises(StopIteration):
        second.send(1)
    assert ctx.holds.get("l", owner) is None
    assert not lock.is_lost(owner)


def test_a_release_whose_wait_for_the_background_runs_out_hands_its_hold_over(
    ctx: Context, owner: str
) -> None:
    """The server stays away: the second release raises BackendError after its wait, with
    its hold off the table, and the pending background takes it off too, even when the
    hand-over comes after the background's last guarded release was sent."""
    lock, reconcile = failed_release(ctx, owner, 2)
    assert next(reconcile).args[-2:] == [owner, 1]
    assert isinstance(reconcile.send(None), Sleep)  # the server at 1 already: recheck
    last = reconcile.send(None)
    assert last.args[-2:] == [owner, 1]  # its last look, on its way
    second = fails(lock.release(owner), [(Command, 0)])  # the server answers the look
    assert isinstance(second.error, BackendError)
    assert "reconciled" in str(second.error)
    assert second.calls() == []
    assert second.extra == []  # no second background: the pending one takes it
    assert ctx.holds.get("l", owner) is None
    more = reconcile.send(None)  # the last look's nil: but a hold was handed over
    assert more.args[-2:] == [owner, 0]
    assert reconcile.send(1).args[-2:] == [owner, 0]  # freed; then nothing beyond 0
    with pytest.raises(StopIteration):
        reconcile.send(None)
    assert not ctx.reconciling
