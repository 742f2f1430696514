"""Semaphore, PermitExpirableSemaphore and CountDownLatch flows, driven by scripted replies."""

from __future__ import annotations

import asyncio

import pytest

from tenure import keys
from tenure.core.context import Context
from tenure.core.effects import (
    WATCH_HOLDS,
    Background,
    Call,
    Command,
    Subscribe,
    Unsubscribe,
    Wait,
    WatchHolds,
)
from tenure.core.latch import LatchCore
from tenure.core.parking import FENCE, WAKE_ANY, WAKE_COUNT, Parking
from tenure.core.semaphore import PermitCore, SemaphoreCore
from tenure.errors import BackendError, LockLostError, NotOwnedError, ReplicationError

from .scripted import Clock, drive, fails

ACQ, PACQ, PREL = "semaphore_acquire", "permit_acquire", "permit_release"
REL = "semaphore_release"


def test_semaphore_one_attempt_never_subscribes(ctx: Context) -> None:
    sem = SemaphoreCore(ctx, "s")
    run = drive(sem.acquire(2, False, None), [(ACQ, 0)])
    assert run.result is False
    (call,) = run.effects
    assert call.keys == ["s"]
    assert call.args == [2]
    assert call.changes


def test_semaphore_waiter_subscribes_retries_and_sleeps_until_a_message(
    ctx: Context, clock: Clock
) -> None:
    sem = SemaphoreCore(ctx, "s")
    run = drive(
        sem.acquire(1, True, None),
        [(ACQ, 0), (Subscribe, None), (ACQ, 0), (Wait, True), (ACQ, 1), (Unsubscribe, None)],
    )
    assert run.result is True
    subscribe, wait = run.of(Subscribe)[0], run.of(Wait)[0]
    assert subscribe.channel == "redisson_sc:{s}"
    assert subscribe.wake_all == {WAKE_COUNT}
    assert wait.seconds == float("inf")  # only a message (no expiry) can help
    assert not run.extra  # no WatchHolds: semaphore permits have no owner to renew


def test_semaphore_wait_runs_out(ctx: Context, clock: Clock) -> None:
    sem = SemaphoreCore(ctx, "s")
    run = drive(
        sem.acquire(1, True, 2.0),
        [(ACQ, 0), (Subscribe, None), (ACQ, 0), (Wait, False), (ACQ, 0), (Unsubscribe, None)],
        clock=clock,
    )
    assert run.result is False
    assert run.of(Wait)[0].seconds == pytest.approx(2.0)


def test_semaphore_error_while_waiting_passes_the_wake_up_on(ctx: Context) -> None:
    sem = SemaphoreCore(ctx, "s")
    run = fails(
        sem.acquire(1, True, None),
        [(ACQ, 0), (Subscribe, None), (ACQ, BackendError("down")), (Unsubscribe, None)],
    )
    assert isinstance(run.error, BackendError)
    assert run.of(Unsubscribe)[0].pass_on


@pytest.mark.parametrize(
    ("steps", "failure"),
    [
        # taken, then cancelled while leaving the channel (which it leaves again: the
        # cancellation may have come before the first Unsubscribe ran)
        (
            [
                (ACQ, 0),
                (Subscribe, None),
                (ACQ, 1),
                (Unsubscribe, asyncio.CancelledError()),
                (Unsubscribe, None),
            ],
            asyncio.CancelledError,
        ),
        # taken, then interrupted (a raising signal handler) while leaving the channel
        (
            [
                (ACQ, 0),
                (Subscribe, None),
                (ACQ, 1),
                (Unsubscribe, KeyboardInterrupt()),
                (Unsubscribe, None),
            ],
            KeyboardInterrupt,
        ),
        # taken on the primary, too few replicas acknowledged
        ([(ACQ, ReplicationError("0 of 1", reply=1, acknowledged=0))], ReplicationError),
    ],
)
def test_semaphore_permits_taken_for_a_caller_who_left_are_given_back(
    ctx: Context, steps, failure
) -> None:
    """A plain Semaphore has no owner: permits the reply said were taken, for a caller
    that then stopped waiting, are released again (in the background), never left taken."""
    sem = SemaphoreCore(ctx, "s")
    run = fails(sem.acquire(3, True, None), steps)
    assert isinstance(run.error, failure)
    (background,) = [e for e in run.extra if isinstance(e, Background)]
    give_back = drive(background.flow, [(REL, 3)])
    (call,) = give_back.calls(REL)
    assert call.keys == ["s", "redisson_sc:{s}"]
    assert call.args == [3]
    assert call.changes


@pytest.mark.parametrize(
    "steps",
    [
        # the reply never came (cancelled or timed out in flight): outcome unknown
        [(ACQ, asyncio.CancelledError())],
        [(ACQ, 0), (Subscribe, None), (ACQ, BackendError("timed out")), (Unsubscribe, None)],
        # not taken, then cancelled while waiting
        [
            (ACQ, 0),
            (Subscribe, None),
            (ACQ, 0),
            (Wait, asyncio.CancelledError()),
            (Unsubscribe, None),
        ],
        # too few replicas for a refusal (nothing taken)
        [(ACQ, ReplicationError("0 of 1", reply=0, acknowledged=0))],
    ],
)
def test_semaphore_gives_nothing_back_unless_the_reply_said_taken(ctx: Context, steps) -> None:
    """Giving back permits that were not taken would add permits (a Semaphore has no
    owner to check): only a reply that said taken is undone."""
    run = fails(SemaphoreCore(ctx, "s").acquire(1, True, None), steps)
    assert not [e for e in run.extra if isinstance(e, Background)]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.acquire(0, True, None), ValueError),
        (lambda s: s.acquire(2**53, True, None), ValueError),
        (lambda s: s.acquire(1, "yes", None), TypeError),
        (lambda s: s.release(-1), ValueError),
        (lambda s: s.set_permits(True), TypeError),
        (lambda s: s.try_set_permits(-1), ValueError),
    ],
)
def test_semaphore_bad_arguments_raise_at_the_call(ctx: Context, call, error) -> None:
    with pytest.raises(error):
        call(SemaphoreCore(ctx, "s"))


def test_permit_count_scripts_get_the_permit_zset(ctx: Context) -> None:
    sem = PermitCore(ctx, "p")
    run = drive(sem.add_permits(-2), [("semaphore_add", -2)])
    assert run.effects[0].keys == ["p", "redisson_sc:{p}", "{p}:timeout"]


def test_permit_waiter_sleeps_until_the_earliest_expiry(ctx: Context, clock: Clock) -> None:
    sem = PermitCore(ctx, "p")
    run = drive(
        sem.acquire_permit(True, None, 5),
        [
            (PACQ, 700),
            (Subscribe, None),
            (PACQ, 650),
            (Wait, False),
            (PACQ, None),
            (Unsubscribe, None),
        ],
        clock=clock,
    )
    permit = run.result
    assert isinstance(permit, str)
    assert len(permit) == 32
    assert run.of(Wait)[0].seconds == pytest.approx(0.65)
    first = run.calls(PACQ)[0]
    assert first.args == [permit, 5000]
    assert first.keys == ["p", "redisson_sc:{p}", "{p}:timeout"]
    assert all(c.args[0] == permit for c in run.calls(PACQ))  # one id for every attempt
    hold = ctx.holds.get("{p}:timeout", permit)
    assert hold is not None
    assert not hold.watchdog  # leased: recorded, never renewed
    assert run.extra == [WATCH_HOLDS]  # but watched: its loss is reported on the clock


def test_permit_without_lease_is_renewed_by_the_watchdog(ctx: Context) -> None:
    sem = PermitCore(ctx, "p")
    run = drive(sem.acquire_permit(True, None, None), [(PACQ, None)])
    assert run.effects[0].args[1] == 30000
    assert any(isinstance(e, WatchHolds) for e in run.extra)
    (hold,) = ctx.holds.watchdog_holds()
    assert hold.renewal.name == "permit_renew"
    assert hold.renewal_keys() == ["{p}:timeout"]


@pytest.mark.parametrize("failure", [BackendError("timed out"), asyncio.CancelledError()])
def test_failed_or_cancelled_permit_acquire_gives_its_id_back(
    ctx: Context, failure: BaseException
) -> None:
    sem = PermitCore(ctx, "p")
    run = fails(sem.acquire_permit(True, None, None), [(PACQ, failure)])
    assert run.error is failure
    # given back in the background: a second cancellation or interrupt cannot stop it
    (background,) = run.extra
    assert isinstance(background, Background)
    release = next(background.flow)
    assert isinstance(release, Call)
    assert release.script.name == PREL
    assert release.args == run.calls(PACQ)[0].args[:1]
    assert ctx.holds.watchdog_holds() == []


def test_release_of_a_lost_permit_reports_it(ctx: Context) -> None:
    seen: list[str] = []
    sem = PermitCore(ctx, "p", on_lost=seen.append)
    permit = drive(sem.acquire_permit(True, None, None), [(PACQ, None)]).result
    run = fails(sem.release_permit(permit), [(PREL, 0)])
    assert isinstance(run.error, LockLostError)
    assert seen == [permit]
    assert sem.is_lost(permit)
    other = "ab" * 16
    run = fails(sem.release_permit(other), [(PREL, 0)])
    assert type(run.error) is NotOwnedError
    assert not sem.is_lost(other)
    assert drive(sem.try_release_permit(other), [(PREL, 0)]).result is False


def test_update_lease_time_takes_the_permit_off_the_watchdog(ctx: Context) -> None:
    sem = PermitCore(ctx, "p")
    permit = drive(sem.acquire_permit(True, None, None), [(PACQ, None)]).result
    run = drive(sem.update_lease_time(permit, 2.5), [("permit_update", 1)])
    assert run.result is True
    assert run.effects[0].args == [permit, 2500]
    assert ctx.holds.watchdog_holds() == []
    assert ctx.holds.get("{p}:timeout", permit) is not None


def test_remaining_lease_of_permits(ctx: Context) -> None:
    sem = PermitCore(ctx, "p")
    assert drive(sem.remaining_lease("0" * 32), [("permit_lease", 1500)]).result == 1.5
    assert drive(sem.remaining_lease("0" * 32), [("permit_lease", -2)]).result is None
    assert drive(sem.remaining_lease("0" * 32), [("permit_lease", -1)]).result == float("inf")
    with pytest.raises(ValueError, match="permit_id must be 32 lower-case hex digits"):
        sem.remaining_lease("0" * 32 + "0")


def test_latch_wait_subscribes_rereads_and_wakes_on_zero(ctx: Context) -> None:
    latch = LatchCore(ctx, "{t}x")
    assert latch.channel == "redisson_countdownlatch__channel__{{t}x}"
    run = drive(
        latch.wait(None),
        [
            (Command, b"2"),
            (Subscribe, None),
            (Command, b"1"),
            (Wait, True),
            (Command, None),
            (Unsubscribe, None),
        ],
    )
    assert run.result is True
    # "0" (reached zero) and "1" (count set, or deleted: Redisson's delete publishes "1")
    # both wake every waiter of the client, which reads the count again; FENCE: a "0"
    # after the waiter's fence is taken at its word (tenure.core.parking).
    assert run.of(Subscribe)[0].wake_all == frozenset(
        {keys.LATCH_ZERO_MESSAGE, keys.LATCH_SET_MESSAGE, FENCE}
    )


def test_latch_waiter_woken_by_zero_returns_without_a_read(ctx: Context) -> None:
    latch = LatchCore(ctx, "z")
    steps = [(Command, b"2"), (Subscribe, None), (Command, b"1")]
    run = drive(latch.wait(None), [*steps, (Wait, "0"), (Unsubscribe, None)])
    assert run.result is True
    assert len(run.of(Command)) == 2
    # "1" (count set, or deleted) and a wake-up no message gave read the count again
    for woken in ("1", True):
        run = drive(
            latch.wait(None),
            [*steps, (Wait, woken), (Command, b"1"), (Wait, "0"), (Unsubscribe, None)],
        )
        assert run.result is True
        assert len(run.of(Command)) == 3


def test_a_wake_up_carries_the_payload_of_the_message_that_gave_it() -> None:
    parking = Parking()
    wake = frozenset({keys.LATCH_ZERO_MESSAGE, keys.LATCH_SET_MESSAGE})
    _, first, _ = parking.join("c", wake, 0, object)
    _, second, _ = parking.join("c", wake, 1, object)
    parking.received("message", "c", "1")  # gives the wake-up
    parking.received("message", "c", "0")  # finds it given: the first word is kept (fa34cbc)
    assert parking.take_word(first) == "1"
    assert parking.take_word(first) is False  # used
    assert parking.take_word(second) == "1"
    parking.disconnected()
    parking.received("subscribe", "c", "1")  # subscribed again: a re-check, no message
    assert parking.take_word(first) is True


def test_latch_delete_publishes_count_set(ctx: Context) -> None:
    run = drive(LatchCore(ctx, "l").delete(), [("latch_delete", 1)])
    assert run.result is True
    assert run.effects[0].args == ["redisson_countdownlatch__channel__{l}", "1"]


def test_latch_wait_at_zero_sends_one_read(ctx: Context) -> None:
    assert drive(LatchCore(ctx, "l").wait(None), [(Command, None)]).result is True
    assert drive(LatchCore(ctx, "l").wait(0), [(Command, b"1")]).result is False


def test_latch_channel_is_an_argument_not_a_key(ctx: Context) -> None:
    latch = LatchCore(ctx, "l")
    run = drive(latch.count_down(), [("latch_count_down", 0)])
    assert run.effects[0].keys == ["l"]
    assert run.effects[0].args == ["redisson_countdownlatch__channel__{l}", "0"]


def test_wake_any_wakes_every_waiter_on_any_message() -> None:
    parking = Parking()
    entry, _, first = parking.join("c", frozenset({WAKE_ANY}), 0, object)
    parking.join("c", frozenset({WAKE_ANY}), 1, object)
    parking.join("c", frozenset({WAKE_ANY}), 2, object)
    assert first
    assert parking.received("message", "c", "1") == list(entry.tickets.values())
    assert entry.permits == 3


def test_a_waiter_for_more_than_one_permit_is_woken_by_every_message(ctx: Context) -> None:
    sem = SemaphoreCore(ctx, "s")
    run = drive(
        sem.acquire(2, True, None), [(ACQ, 0), (Subscribe, None), (ACQ, 1), (Unsubscribe, None)]
    )
    assert run.of(Subscribe)[0].wake_all == {WAKE_ANY}
    permit = PermitCore(ctx, "p")
    run = drive(
        permit.acquire_permit(True, None, None),
        [(PACQ, -1), (Subscribe, None), (PACQ, None), (Unsubscribe, None)],
    )
    assert run.of(Subscribe)[0].wake_all == {WAKE_COUNT}


def test_a_count_wakes_that_many_waiters_the_oldest_first() -> None:
    parking = Parking()
    one = frozenset({WAKE_COUNT})
    entry = None
    for key in range(5):
        entry, _, _ = parking.join("c", one, key, object)
    assert entry is not None
    tickets = list(entry.tickets.values())
    assert parking.received("message", "c", "2") == tickets[:2]
    assert parking.received("message", "c", "2") == tickets[2:4]  # the next without one
    assert parking.received("message", "c", "0") == tickets[4:]  # a count <= 0: one looks
    for key in range(5):
        parking.take(entry.tickets[key])
    assert parking.received("message", "c", "no count") == tickets  # every one
    for key in range(5):
        parking.take(entry.tickets[key])
    parking.join("c", frozenset({WAKE_ANY}), 9, object)  # a waiter for n > 1 permits
    assert len(parking.received("message", "c", "1")) == 6  # now every message wakes all
    for key in [*range(5), 9]:
        parking.leave("c", key, pass_on=False)
    parking.join("c", one, 0, object)  # waited on afresh: counts again
    parking.join("c", one, 1, object)
    assert len(parking.received("message", "c", "1")) == 1


@pytest.mark.parametrize(
    ("channel", "wake"),
    [
        (keys.semaphore_channel("s"), frozenset({WAKE_ANY})),
        (keys.semaphore_channel("s"), frozenset({WAKE_COUNT})),
        (keys.latch_channel("l"), frozenset({keys.LATCH_ZERO_MESSAGE, keys.LATCH_SET_MESSAGE})),
    ],
)
def test_a_negative_count_is_a_count_not_a_lock_renewal(
    channel: str, wake: frozenset[str]
) -> None:
    """A Redisson client may publish a count <= 0 on a semaphore's channel: it wakes the
    semaphore's waiters like any count, and moves no lease end (``-<ms>`` is a renewal on a
    Lock-family channel only)."""
    parking = Parking(clock=lambda: 100.0)
    entry, _, _ = parking.join(channel, wake, 0, object)
    parking.join(channel, wake, 1, object)
    expiry = entry.expiry
    woken = parking.received("message", channel, "-5")
    assert woken
    assert woken == list(entry.tickets.values())[: len(woken)]
    if WAKE_ANY in wake:
        assert len(woken) == 2
    assert entry.expiry == expiry


def test_renewal_message_on_lock_channels_moves_the_lease_end() -> None:
    parking = Parking(clock=lambda: 100.0)
    for channel in (keys.lock_channel("x"), keys.rw_channel("x"), keys.lock_channel("x") + ":o"):
        entry, _, _ = parking.join(channel, frozenset(), 0, object)
        assert parking.received("message", channel, "-900") == []
        assert entry.expiry == 100.9


def test_a_permit_acquire_interrupted_as_the_renewal_starts_gives_its_permit_back(
    ctx: Context,
) -> None:
    """An interrupt thrown in at ``WATCH_HOLDS`` (the permit granted and recorded; a signal
    handler's exception, or a cancellation while the renewal loop starts): the permit
    leaves the hold table (never renewed for nobody) and its id is given back."""
    sem = PermitCore(ctx, "p")
    flow = sem.acquire_permit(True, None, None)
    call = next(flow)
    assert isinstance(call, Call)
    assert call.script.name == PACQ
    assert flow.send(None) is WATCH_HOLDS
    assert len(ctx.holds.watchdog_holds()) == 1
    background = flow.throw(asyncio.CancelledError())
    assert isinstance(background, Background)
    give_back = next(background.flow)
    assert isinstance(give_back, Call)
    assert give_back.script.name == PREL
    assert give_back.args == call.args[:1]
    assert ctx.holds.watchdog_holds() == []
    with pytest.raises(asyncio.CancelledError):
        flow.send(None)


def test_abandon_undoes_a_permit_its_caller_never_got(ctx: Context) -> None:
    """The front's undo for an interrupt after the flow returned the permit: out of the
    hold table at once, given back in the background; nothing for a permit not held."""
    sem = PermitCore(ctx, "p")
    permit = drive(sem.acquire_permit(True, None, None), [(PACQ, None)]).result
    undo = sem.abandon(permit)
    assert undo is not None
    assert ctx.holds.watchdog_holds() == []
    background = next(undo)
    assert isinstance(background, Background)
    release = next(background.flow)
    assert isinstance(release, Call)
    assert release.args == [permit]
    assert sem.abandon(permit) is None
