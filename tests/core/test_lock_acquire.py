"""Lock acquire: the waiting loop of every lock (docs/internals.md, "Acquire")."""

from __future__ import annotations

import math

import pytest

from tenure import keys
from tenure.core.context import Context
from tenure.core.effects import (
    MIN_WAIT,
    WATCH_HOLDS,
    Background,
    Call,
    Command,
    Sleep,
    Subscribe,
    Unsubscribe,
    Wait,
    WatchHolds,
)
from tenure.core.lock import RECONCILE_POLL, LockCore
from tenure.core.yielding import YIELD_GRACE
from tenure.errors import BackendError, ReplicationError

from .conftest import new_context
from .scripted import Clock, Do, Step, drive, fails

ACQ = "lock_acquire"


def after(clock: Clock, seconds: float, reply: object) -> object:
    """``reply``, given once ``seconds`` have passed on ``clock`` (a :class:`Do` body)."""
    clock.advance(seconds)
    return reply


class Key:
    """A weak-referenceable stand-in for an asyncio task."""


def test_granted_at_once_sends_one_script_and_records_a_watchdog_hold(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "orders:42")
    run = drive(lock.acquire(owner, True, None, None), [(ACQ, None)])

    assert run.result is True
    (call,) = run.effects
    assert call.keys == ["orders:42"]
    assert call.args == [30000, owner]  # the watchdog's lease
    assert call.changes
    hold = ctx.holds.get("orders:42", owner)
    assert hold is not None
    assert hold.leases == [None]
    assert hold.watchdog
    assert hold.renewal.name == "lock_renew"
    assert hold.sink is lock


def test_lease_time_goes_on_the_wire_in_ms_and_is_not_renewed(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    run = drive(lock.acquire(owner, True, None, 2.5), [(ACQ, None)])
    assert run.effects[0].args == [2500, owner]
    hold = ctx.holds.get("l", owner)
    assert hold is not None
    assert hold.leases == [2.5]
    assert not hold.watchdog
    assert ctx.holds.watchdog_holds() == []


@pytest.mark.parametrize("lease", [0.0001, 0.002, 0.0099])
def test_lease_too_short_to_stay_valid_refused_before_io(ctx: Context, lease: float) -> None:
    # A grant is valid for lease - elapsed - (0.01 x lease + 2 ms): a 2 ms lease never is.
    with pytest.raises(ValueError, match=r"lease_time must be at least 0\.01"):
        LockCore(ctx, "l").acquire("o:1", True, None, lease)


def test_shortest_lease_is_sent_in_whole_ms(ctx: Context, owner: str) -> None:
    run = drive(LockCore(ctx, "l").acquire(owner, True, None, 0.0104), [(ACQ, None)])
    assert run.effects[0].args[0] == 10


def test_name_prefix_is_on_the_key_and_channel_not_the_name(owner: str) -> None:
    ctx = new_context(name_prefix="app:")
    lock = LockCore(ctx, "x")
    assert lock.name == "x"
    assert lock.key == "app:x"
    assert lock.channel == "redisson_lock__channel:{app:x}"
    run = drive(lock.acquire(ctx.identity.thread_owner(), True, None, None), [(ACQ, None)])
    assert run.effects[0].keys == ["app:x"]


def test_refused_then_granted_on_the_retry_after_subscribing(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, None, None),
        [(ACQ, 5000), (Subscribe, None), (ACQ, None), (Unsubscribe, None)],
    )
    assert run.result is True
    sub, unsub = run.of(Subscribe)[0], run.of(Unsubscribe)[0]
    assert sub.channel == unsub.channel == keys.lock_channel("l")
    assert sub.wake_all == frozenset()
    assert unsub.pass_on is False
    assert ctx.holds.get("l", owner) is not None


def test_waits_for_a_message_then_takes_the_lock(ctx: Context, owner: str, clock: Clock) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            (ACQ, 5000),
            (Subscribe, None),
            (ACQ, 4000),
            (Wait, True),  # woken by an unlock message
            (ACQ, None),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is True
    (wait,) = run.of(Wait)
    assert wait.channel == lock.channel
    assert wait.seconds == 4.0  # no timeout: until the holder's lease ends


def test_waits_for_the_holders_pttl_when_it_ends_first(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, 10, None),
        [
            (ACQ, 250),
            (Subscribe, None),
            (ACQ, 250),
            (Wait, False),
            (ACQ, None),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is True
    assert run.of(Wait)[0].seconds == pytest.approx(0.25)


def test_waits_for_the_deadline_when_it_comes_first(ctx: Context, owner: str, clock: Clock) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, 0.1, None),
        [
            (ACQ, 5000),
            (Subscribe, None),
            (ACQ, 5000),
            (Wait, False),
            (ACQ, 5000),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is False
    assert run.of(Wait)[0].seconds == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("ttl", "timeout", "expected"),
    [
        (-1, None, math.inf),  # holder without expiry, no timeout: only a message ends it
        (-1, 3, 3.0),
        (0, None, MIN_WAIT),  # lease ending now: still sleep a moment
        (1, None, MIN_WAIT),
        (1500, None, 1.5),
    ],
)
def test_wait_length_from_pttl_and_timeout(
    ctx: Context, owner: str, clock: Clock, ttl: int, timeout: float | None, expected: float
) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, timeout, None),
        [(ACQ, ttl), (Subscribe, None), (ACQ, ttl), (Wait, True), (ACQ, None), (Unsubscribe, None)],
        clock=clock,
    )
    assert run.of(Wait)[0].seconds == pytest.approx(expected)


def test_keeps_looping_until_granted(ctx: Context, owner: str, clock: Clock) -> None:
    lock = LockCore(ctx, "l")
    refusals: list[Step] = [(ACQ, 100), (Wait, False)] * 5
    run = drive(
        lock.acquire(owner, True, None, None),
        [(ACQ, 100), (Subscribe, None), *refusals, (ACQ, None), (Unsubscribe, None)],
        clock=clock,
    )
    assert run.result is True
    assert len(run.of(Subscribe)) == 1
    assert len(run.of(Unsubscribe)) == 1
    assert len(run.calls(ACQ)) == 7


def test_retries_within_a_wait_tell_the_script_that_the_owner_holds_nothing(
    ctx: Context, owner: str, clock: Clock
) -> None:
    """Issue 14: a refused retry costs the server one PTTL, not PTTL + HMGET; only the
    first attempt checks the kind and re-entry."""
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, None, None),
        [(ACQ, 100), (Subscribe, None), (ACQ, 100), (Wait, True), (ACQ, None), (Unsubscribe, None)],
        clock=clock,
    )
    assert run.result is True
    client = ctx.identity.client_id
    # Once subscribed, a waiting attempt also registers its client in the wake queue.
    assert [c.args for c in run.calls(ACQ)] == [[30000, owner], *[[30000, owner, 1, client]] * 2]
    assert [c.keys for c in run.calls(ACQ)] == [["l"], *[["l", "tenure_lock_wake:{l}"]] * 2]


def test_a_late_reentry_retried_in_the_wait_keeps_the_reentry_check(
    ctx: Context, owner: str, clock: Clock
) -> None:
    """An owner that holds the lock and whose re-entry was granted too late (undone) retries:
    that retry must still be able to re-enter, so it is sent without the retry flag (1), as
    a re-entry (2) like the first attempt."""
    lock = LockCore(ctx, "l")
    assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).result is True
    late = Do(lambda call: clock.advance(40.0))  # None: granted, after the 30 s lease
    run = drive(
        lock.acquire(owner, True, None, None),
        [(ACQ, late), ("lock_release", 0), (Subscribe, None), (ACQ, None), (Unsubscribe, None)],
        clock=clock,
    )
    assert run.result is True
    client = ctx.identity.client_id
    assert [c.args for c in run.calls(ACQ)] == [[30000, owner, 2], [30000, owner, 2, client]]


def test_the_first_attempt_after_a_yield_checks_the_kind(
    ctx: Context, owner: str, clock: Clock
) -> None:
    """A releaser that yields to woken waiters makes its first attempt after the wait: that
    attempt is a first one (kind and re-entry checked), the next ones are retries."""
    lock = LockCore(ctx, "l")
    assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).result is True
    drive(lock.release(owner), [("lock_release", 3)])  # the unlock reached other clients
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            (Subscribe, None),
            (Wait, True),
            (ACQ, 50),
            (Wait, True),
            (ACQ, None),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is True
    client = ctx.identity.client_id
    first, retry = [30000, owner, "", client], [30000, owner, 1, client]
    assert [c.args for c in run.calls(ACQ)] == [first, retry]


@pytest.mark.parametrize("fresh", [True, False])
def test_a_yield_sleeps_its_grace_on_a_timer_of_its_own(
    ctx: Context, owner: str, clock: Clock, fresh: bool
) -> None:
    """A releaser whose unlock woke another client alone yields for what is left of
    YIELD_GRACE, then tries. That end is no lease end: it is not reported as the waiters'
    shared re-check (no patience), so a renewal message about an older hold, read late during
    the yield, cannot move it (it made the yield last until the next back-up look)."""
    lock = LockCore(ctx, "l")
    assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).result is True
    drive(lock.release(owner), [("lock_release", -2)], clock=clock)
    clock.advance(0.001)
    run = drive(
        lock.acquire(owner, True, None, None),
        [(Subscribe, fresh), (Wait, False), (ACQ, None), (Unsubscribe, None)],
        clock=clock,
    )
    assert run.result is True
    (wait,) = run.of(Wait)
    assert wait.seconds == pytest.approx(YIELD_GRACE - 0.001, abs=1e-3)
    assert wait.patience is None


def test_a_lock_object_made_anew_yields_as_a_reused_one(
    ctx: Context, owner: str, clock: Clock
) -> None:
    """``with client.lock(name):`` makes a new object each time: the yield is the client's,
    kept per lock name, not the object's (else every such releaser barged)."""
    assert drive(LockCore(ctx, "l").acquire(owner, True, None, None), [(ACQ, None)]).result
    drive(LockCore(ctx, "l").release(owner), [("lock_release", -2)], clock=clock)
    run = drive(
        LockCore(ctx, "l").acquire(owner, True, None, None),
        [(Subscribe, False), (Wait, True), (ACQ, None), (Unsubscribe, None)],
        clock=clock,
    )
    assert run.result is True
    assert run.calls(ACQ)[0].args[2] == ""  # its first attempt came after the yield's wait
    (wait,) = run.of(Wait)  # the grace left, in whole ms (the clock moved a little)
    assert YIELD_GRACE - 0.001 <= wait.seconds <= YIELD_GRACE


def test_deadline_reached_returns_false_unsubscribes_and_records_nothing(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, 1, None),
        [
            (ACQ, 30000),
            (Subscribe, None),
            (ACQ, 30000),
            (Wait, Do(lambda w: after(clock, 0.4, True))),  # a message, lock taken again
            (ACQ, 30000),
            (Wait, False),  # the rest of the second: the clock reaches the deadline
            (ACQ, 30000),  # the attempt after the wait still counts
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is False
    assert [w.seconds for w in run.of(Wait)] == pytest.approx([1.0, 0.6])
    assert run.of(Unsubscribe)[0].pass_on is False
    assert ctx.holds.get("l", owner) is None


def test_grant_on_the_last_attempt_after_the_deadline_counts(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, 1, None),
        [
            (ACQ, 3000),
            (Subscribe, None),
            (ACQ, 3000),
            (Wait, False),
            (ACQ, None),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is True


def test_deadline_passed_during_the_first_attempt_means_no_subscription(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, 0.5, None),
        [(ACQ, Do(lambda call: after(clock, 0.5, 100)))],
        clock=clock,
    )
    assert run.result is False
    assert run.names == [ACQ]


@pytest.mark.parametrize(
    ("blocking", "timeout"), [(True, 0), (True, 0.0), (False, None), (False, -1), (False, 0)]
)
def test_one_attempt_without_subscription(
    ctx: Context, owner: str, blocking: bool, timeout: float | None
) -> None:
    lock = LockCore(ctx, "l")
    refused = drive(lock.acquire(owner, blocking, timeout, None), [(ACQ, 1234)])
    assert refused.result is False
    assert refused.names == [ACQ]
    granted = drive(lock.acquire(owner, blocking, timeout, 7), [(ACQ, None)])
    assert granted.result is True
    assert granted.effects[0].args == [7000, owner]


def test_reentry_adds_a_hold(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    for _ in range(3):
        assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).result is True
    hold = ctx.holds.get("l", owner)
    assert hold is not None
    assert hold.leases == [None, None, None]


def test_owners_are_separate_holds(ctx: Context) -> None:
    lock = LockCore(ctx, "l")
    # owner_of holds its keys weakly: keep them alive (asyncio tasks in real use)
    keys_alive = [Key(), Key()]
    a, b = (ctx.identity.owner_of(k) for k in keys_alive)
    assert a != b
    drive(lock.acquire(a, True, None, None), [(ACQ, None)])
    drive(lock.acquire(b, True, None, 1), [(ACQ, None)])
    hold_a, hold_b = ctx.holds.get("l", a), ctx.holds.get("l", b)
    assert hold_a is not None
    assert hold_b is not None
    assert hold_a is not hold_b
    assert [h.owner for h in ctx.holds.watchdog_holds()] == [a]


# ------------------------------------------------------------------- errors mid-flow


def test_error_thrown_mid_wait_unsubscribes_then_raises(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    error = BackendError("connection reset")
    run = fails(
        lock.acquire(owner, True, None, None),
        [(ACQ, 100), (Subscribe, None), (ACQ, 100), (Wait, error), (Unsubscribe, None)],
    )
    assert run.error is error
    (unsub,) = run.of(Unsubscribe)
    assert unsub.channel == lock.channel
    assert unsub.pass_on is True
    assert ctx.holds.get("l", owner) is None


@pytest.mark.parametrize("error", [KeyboardInterrupt, TimeoutError, ValueError])
def test_any_exception_in_the_loop_unsubscribes(
    ctx: Context, owner: str, error: type[BaseException]
) -> None:
    lock = LockCore(ctx, "l")
    run = fails(
        lock.acquire(owner, True, None, None),
        [(ACQ, 100), (Subscribe, None), (ACQ, error), (Unsubscribe, None)],
    )
    assert isinstance(run.error, error)
    assert run.of(Unsubscribe)[0].pass_on is True


def test_error_on_the_first_attempt_needs_no_unsubscribe(ctx: Context, owner: str) -> None:
    run = fails(LockCore(ctx, "l").acquire(owner, True, None, None), [(ACQ, BackendError)])
    assert isinstance(run.error, BackendError)
    assert run.names == [ACQ]


def test_error_while_subscribing_leaves_the_channel(ctx: Context, owner: str) -> None:
    # The flow cannot tell a failed subscribe from an interrupt that came once it was
    # made (a signal handler run after the listener's answer): it leaves either way
    # (a no-op in the listener for a caller with no ticket).
    run = fails(
        LockCore(ctx, "l").acquire(owner, True, None, None),
        [(ACQ, 100), (Subscribe, BackendError("no pubsub")), (Unsubscribe, None)],
    )
    assert isinstance(run.error, BackendError)
    assert run.names == [ACQ, "Subscribe", "Unsubscribe"]
    assert run.of(Unsubscribe)[0].pass_on


def test_error_while_unsubscribing_after_success_propagates(ctx: Context, owner: str) -> None:
    # the hold was granted and recorded; the caller sees the error and never learns that
    # it holds, so the grant is given back (not left to the watchdog to renew)
    run = fails(
        LockCore(ctx, "l").acquire(owner, True, None, None),
        [
            (ACQ, 100),
            (Subscribe, None),
            (ACQ, None),
            (Unsubscribe, BackendError),
            (Unsubscribe, None),
        ],
    )
    assert isinstance(run.error, BackendError)
    assert ctx.holds.get("l", owner) is None
    assert ("l", owner) in ctx.reconciling


def test_closing_the_flow_mid_wait_sends_nothing_more(ctx: Context, owner: str) -> None:
    flow = LockCore(ctx, "l").acquire(owner, True, None, None)
    assert isinstance(next(flow), Call)
    assert isinstance(flow.send(100), Subscribe)
    assert isinstance(flow.send(None), Call)
    assert isinstance(flow.send(100), Wait)
    flow.close()  # GeneratorExit: no effect may be yielded (would raise RuntimeError)


# ------------------------------------------------------------- arguments, before any I/O


@pytest.mark.parametrize(
    ("blocking", "timeout", "lease", "error", "names"),
    [
        ("yes", None, None, TypeError, "blocking"),
        (1, None, None, TypeError, "blocking"),
        (False, 5, None, ValueError, "timeout"),
        (True, -2, None, ValueError, "timeout"),
        (True, -0.5, None, ValueError, "timeout"),
        (True, math.nan, None, ValueError, "timeout"),
        (True, "1", None, TypeError, "timeout"),
        (True, True, None, TypeError, "timeout"),
        (True, None, 0, ValueError, "lease_time"),
        (True, None, -1, ValueError, "lease_time"),
        (True, None, math.inf, ValueError, "lease_time"),
        (True, None, math.nan, ValueError, "lease_time"),
        (True, None, "10", TypeError, "lease_time"),
        (True, None, False, TypeError, "lease_time"),
    ],
)
def test_bad_arguments_raise_when_called_before_any_effect(
    ctx: Context,
    owner: str,
    blocking: object,
    timeout: object,
    lease: object,
    error: type[Exception],
    names: str,
) -> None:
    lock = LockCore(ctx, "l")
    with pytest.raises(error, match=names):
        lock.acquire(owner, blocking, timeout, lease)  # not even a generator yet


@pytest.mark.parametrize(
    ("name", "error"), [("", ValueError), (None, TypeError), (b"l", TypeError), (3, TypeError)]
)
def test_bad_name(ctx: Context, name: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="name"):
        LockCore(ctx, name)  # type: ignore[arg-type]


def test_on_lost_must_be_callable(ctx: Context) -> None:
    with pytest.raises(TypeError, match="on_lost"):
        LockCore(ctx, "l", on_lost=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [0.5, 1, 1e9, math.inf, -1, None])
def test_accepted_timeouts(ctx: Context, owner: str, timeout: float | None) -> None:
    run = drive(LockCore(ctx, "l").acquire(owner, True, timeout, None), [(ACQ, None)])
    assert run.result is True


def test_unknown_effects_are_answered_none_and_recorded(ctx: Context, owner: str) -> None:
    """The scripted driver itself: flows may yield effects it does not know yet."""

    class Unknown:
        pass

    unknown = Unknown()

    def flow():
        reply = yield unknown
        assert reply is None
        return (yield from LockCore(ctx, "l").acquire(owner, True, None, None))

    run = drive(flow(), [(ACQ, None)])
    assert run.result is True
    assert run.extra == [unknown, WATCH_HOLDS]
    assert run.trace == [unknown, run.effects[0], WATCH_HOLDS]


# --------------------------------------------------------------------- WatchHolds


def test_grant_without_a_lease_asks_for_renewal_after_the_hold_is_recorded(
    ctx: Context, owner: str
) -> None:
    """The runner starts its renewal loop on WatchHolds: the hold must be in the table."""
    flow = LockCore(ctx, "l").acquire(owner, True, None, None)
    assert isinstance(next(flow), Call)
    assert flow.send(None) is WATCH_HOLDS
    assert [h.owner for h in ctx.holds.watchdog_holds()] == [owner]
    with pytest.raises(StopIteration) as stop:
        flow.send(None)
    assert stop.value.value is True


def test_keep_renewed_is_one_shared_effect() -> None:
    assert isinstance(WATCH_HOLDS, WatchHolds)
    assert WatchHolds() == WATCH_HOLDS  # frozen dataclass without fields


def test_grant_with_a_lease_asks_for_the_keeper_but_no_renewal(ctx: Context, owner: str) -> None:
    run = drive(LockCore(ctx, "l").acquire(owner, True, None, 5), [(ACQ, None)])
    assert run.result is True
    assert run.extra == [WATCH_HOLDS]  # its loss is reported on the clock
    assert ctx.holds.watchdog_holds() == []  # but renewal leaves it alone


def test_refusal_asks_for_no_renewal(ctx: Context, owner: str) -> None:
    run = drive(LockCore(ctx, "l").acquire(owner, False, None, None), [(ACQ, 700)])
    assert run.result is False
    assert run.extra == []


def test_timeout_asks_for_no_renewal(ctx: Context, owner: str, clock: Clock) -> None:
    run = drive(
        LockCore(ctx, "l").acquire(owner, True, 0.5, None),
        [
            (ACQ, 60000),
            (Subscribe, None),
            (ACQ, 60000),
            (Wait, False),
            (ACQ, 60000),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is False
    assert run.extra == []


def test_grant_after_waiting_asks_for_renewal_once_unsubscribed(
    ctx: Context, owner: str, clock: Clock
) -> None:
    run = drive(
        LockCore(ctx, "l").acquire(owner, True, None, None),
        [
            (ACQ, 5000),
            (Subscribe, None),
            (ACQ, 5000),
            (Wait, True),
            (ACQ, None),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    assert run.result is True
    assert [type(e).__name__ for e in run.trace][-2:] == ["Unsubscribe", "WatchHolds"]
    assert run.extra == [WATCH_HOLDS]


def test_every_grant_asks_for_the_keeper(ctx: Context, owner: str) -> None:
    """Leased holds too (their loss is reported on the clock), and re-entry: the runner
    ignores it while its loop runs, but must not miss it."""
    lock = LockCore(ctx, "l")
    assert drive(lock.acquire(owner, True, None, 5), [(ACQ, None)]).extra == [WATCH_HOLDS]
    assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).extra == [WATCH_HOLDS]
    assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).extra == [WATCH_HOLDS]


def test_failed_acquire_asks_for_no_renewal(ctx: Context, owner: str) -> None:
    run = fails(
        LockCore(ctx, "l").acquire(owner, True, None, None),
        [(ACQ, 100), (Subscribe, None), (ACQ, BackendError("down")), (Unsubscribe, None)],
    )
    assert isinstance(run.error, BackendError)
    assert WATCH_HOLDS not in run.extra
    (background,) = run.extra  # the failed script may have granted: reconcile
    assert isinstance(background, Background)


def test_reconcile_undoes_a_grant_whose_reply_was_lost(ctx: Context, owner: str) -> None:
    """An acquire that failed after its script was sent may have been granted: a background
    flow releases what the server has beyond the caller's recorded holds (here 1: a
    re-entry failed), behind the guard, until the server says nothing is left to undo."""
    lock = LockCore(ctx, "l")
    assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).result is True
    run = fails(lock.acquire(owner, False, None, None), [(ACQ, BackendError("timeout"))])
    (background,) = run.extra
    guarded = "lock_release+guard"
    undo = drive(
        background.flow,
        [
            (guarded, BackendError("still down")),  # retried after a pause
            (guarded, 0),  # one hold undone: the caller's first hold remains
            (guarded, None),  # the server is back to 1 hold
            (guarded, None),  # and still is a moment later
        ],
    )
    assert [s.seconds for s in undo.of(Sleep)] == [0.05, 0.1]
    assert undo.effects[0].args[-2:] == [owner, 1]  # field, recorded count
    assert ctx.holds.get("l", owner) is not None  # the first hold is untouched


def test_only_one_reconcile_per_owner_at_a_time(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    first = fails(lock.acquire(owner, False, None, None), [(ACQ, BackendError("timeout"))])
    assert len(first.extra) == 1  # the reconcile, in the background
    # Another lock object of this client, same owner: its acquire waits for the reconcile
    # (a grant landing meanwhile would be undone by it) and sends nothing; nor does it
    # start a second reconcile. (A blocking one: a shorter wait ends first, refused.)
    second = fails(LockCore(ctx, "l").acquire(owner, True, None, None), [(Command, 0)])
    assert isinstance(second.error, BackendError)
    assert "reconciled" in str(second.error)
    assert second.extra == []
    assert second.calls(ACQ) == []
    assert sum(isinstance(e, Sleep) for e in second.effects) >= 100  # ~1.5 s of looks
    ctx.reconciling.clear()  # the reconcile ended: acquires go through again
    assert drive(LockCore(ctx, "l").acquire(owner, False, None, None), [(ACQ, None)]).result


def test_a_server_still_away_fails_the_wait_for_a_reconcile_at_once(
    ctx: Context, owner: str
) -> None:
    """An acquire behind a pending reconcile looks at the server first: a server still
    away fails that look within the socket timeout, and the caller gets its error at once
    instead of after RECONCILE_WAIT (1.5 s past a 1 s socket timeout: tests/process/
    test_faults.py)."""
    lock = LockCore(ctx, "l")
    fails(lock.acquire(owner, False, None, None), [(ACQ, BackendError("timeout"))])
    refused = BackendError("Connection refused")
    second = fails(LockCore(ctx, "l").acquire(owner, False, None, None), [(Command, refused)])
    assert second.error is refused
    assert second.of(Sleep) == []
    assert second.calls(ACQ) == []


@pytest.mark.parametrize("timeout", [0.0, 0.05])
def test_a_wait_for_a_reconcile_ends_with_the_acquires_wait(
    ctx: Context, owner: str, clock: Clock, timeout: float
) -> None:
    """An acquire behind a pending reconcile of the same owner waits for it no longer than
    its own wait, and is then refused: a non-blocking acquire right after a cancelled
    release took 104-118 ms (the reconcile's recheck), up to 1.5 s against a slow server
    (reviewer R6, F2)."""
    fails(LockCore(ctx, "l").acquire(owner, False, None, None), [(ACQ, BackendError("timeout"))])
    assert ctx.reconciling
    run = drive(LockCore(ctx, "l").acquire(owner, True, timeout, None), [(Command, 1)], clock=clock)
    assert run.result is False
    assert sum(sleep.seconds for sleep in run.of(Sleep)) <= timeout + RECONCILE_POLL
    assert run.calls(ACQ) == []  # not sent while the reconcile may still run
    assert ctx.reconciling  # still pending (the driver here runs no background flow)


def test_unreplicated_grant_asks_for_no_renewal(ctx: Context, owner: str) -> None:
    run = fails(
        LockCore(ctx, "l").acquire(owner, True, None, None),
        [(ACQ, ReplicationError("0 of 1")), ("lock_release", 1)],
    )
    assert isinstance(run.error, ReplicationError)
    assert run.extra == []
