"""A releaser's yield adapts to the lock's turn (tenure.core.yielding, docs/internals.md,
"Release"): an attempt refused after a yield that ended on its timer doubles the next one (up
to YIELD_LONGEST); one granted halves it (down to YIELD_GRACE). Only an acquire that comes
within YIELD_GRACE of the release yields; a later one tries at once, as before."""

from __future__ import annotations

import pytest

from tenure.core.context import Context
from tenure.core.effects import Subscribe, Unsubscribe, Wait
from tenure.core.lock import LockCore
from tenure.core.yielding import YIELD_GRACE, YIELD_LONGEST, YIELDS_KEPT, Yields

from .scripted import Clock, Run, Step, drive

ACQ = "lock_acquire"
UNSUBSCRIBE = (Unsubscribe, None)
WOKE_OTHER = -2  # lock_release.lua: freed, and the unlock went to one other client alone


def test_the_length_doubles_on_a_refusal_and_halves_on_a_grant_within_its_bounds() -> None:
    yields = Yields()
    lengths = []
    for _ in range(6):
        yields.start("l", 10.0)
        lengths.append(round(yields.left("l", 10.0), 6))
        yields.ended("l", held=True)
    assert (
        lengths
        == [YIELD_GRACE, 2 * YIELD_GRACE, 4 * YIELD_GRACE, 8 * YIELD_GRACE] + [YIELD_LONGEST] * 2
    )
    shorter = []
    for _ in range(5):
        yields.ended("l", held=False)
        yields.start("l", 20.0)
        shorter.append(round(yields.left("l", 20.0), 6))
    assert shorter == [4 * YIELD_GRACE, 2 * YIELD_GRACE, YIELD_GRACE, YIELD_GRACE, YIELD_GRACE]


def test_only_an_acquire_soon_after_the_release_yields_and_only_once() -> None:
    yields = Yields()
    for _ in range(3):
        yields.ended("l", held=True)  # a long turn: 24 ms
    yields.start("l", 10.0)
    assert yields.left("l", 10.0 + YIELD_GRACE / 2) == pytest.approx(
        YIELD_LONGEST - YIELD_GRACE / 2
    )
    # Back later than YIELD_GRACE (the client rested): it tries at once, as anyone would.
    assert yields.left("l", 10.0 + YIELD_GRACE) <= 0
    yields.start("l", 20.0)
    yields.take("l", 20.001)
    assert yields.left("l", 20.001) <= 0  # taken: another thread of the client does not
    assert yields.left("other", 20.001) <= 0


def test_names_whose_yield_ended_long_ago_are_forgotten_with_their_length() -> None:
    yields = Yields()
    yields.ended("old", held=True)
    yields.start("old", 0.0)
    for i in range(YIELDS_KEPT):
        yields.start(f"n{i}", 5.0)
    assert yields.left("old", 0.001) == 0.0  # forgotten at the release that found 256 names
    yields.start("old", 5.0)
    assert yields.left("old", 5.0) == pytest.approx(YIELD_GRACE)  # and its length with it


def yielded(run: Run, length: float) -> bool:
    """The first wait was a yield of ``length``, in whole ms (the flow truncates)."""
    seconds = run.of(Wait)[0].seconds
    return bool(length - 0.001 <= seconds <= length)


def released_waking_another(lock: LockCore, owner: str, clock: Clock) -> None:
    assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)]).result is True
    drive(lock.release(owner), [("lock_release", WOKE_OTHER)], clock=clock)


@pytest.mark.parametrize("held", [True, False])
def test_a_yield_that_ends_on_its_timer_sets_the_next_ones_length(
    ctx: Context, owner: str, clock: Clock, held: bool
) -> None:
    """The lock held by the client woken at the yield's end (its turn is longer): the next
    yield lasts twice as long. Free (the yield only kept it idle): it shortens again."""
    lock = LockCore(ctx, "l")
    released_waking_another(lock, owner, clock)
    steps: list[Step] = [(Subscribe, False), (Wait, False), (ACQ, 5000 if held else None)]
    if held:
        steps += [(Wait, True), (ACQ, None)]
    run = drive(lock.acquire(owner, True, None, None), [*steps, (Unsubscribe, None)], clock=clock)
    assert run.result is True
    assert yielded(run, YIELD_GRACE)
    drive(lock.release(owner), [("lock_release", WOKE_OTHER)], clock=clock)
    expected = 2 * YIELD_GRACE if held else YIELD_GRACE
    assert ctx.yields.left("l", clock.now) == pytest.approx(expected)
    if held:  # and a grant after the longer one's timer brings it back
        run = drive(
            lock.acquire(owner, True, None, None),
            [(Subscribe, False), (Wait, False), (ACQ, None), (Unsubscribe, None)],
            clock=clock,
        )
        assert yielded(run, 2 * YIELD_GRACE)
        drive(lock.release(owner), [("lock_release", WOKE_OTHER)], clock=clock)
        assert ctx.yields.left("l", clock.now) == pytest.approx(YIELD_GRACE)


def test_a_yield_ended_by_an_unlock_leaves_the_length_as_it_was(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    for _ in range(2):
        ctx.yields.ended("l", held=True)
    released_waking_another(lock, owner, clock)
    run = drive(
        lock.acquire(owner, True, None, None),
        [(Subscribe, False), (Wait, True), (ACQ, 5000), (Wait, True), (ACQ, None), UNSUBSCRIBE],
        clock=clock,
    )
    assert yielded(run, 4 * YIELD_GRACE)
    drive(lock.release(owner), [("lock_release", WOKE_OTHER)], clock=clock)
    assert ctx.yields.left("l", clock.now) == pytest.approx(4 * YIELD_GRACE)


def test_an_acquire_after_a_rest_does_not_yield(ctx: Context, owner: str, clock: Clock) -> None:
    lock = LockCore(ctx, "l")
    for _ in range(3):
        ctx.yields.ended("l", held=True)
    released_waking_another(lock, owner, clock)
    clock.advance(YIELD_GRACE)
    run = drive(lock.acquire(owner, True, None, None), [(ACQ, None)], clock=clock)
    assert run.result is True
    assert run.calls(ACQ)[0].args[2:3] == []  # a first attempt, at once
