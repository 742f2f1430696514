"""A releaser's yield adapts to the lock's turn (tenure.core.yielding, docs/internals.md,
"Release"): an attempt refused after a yield that ended on its timer doubles the next one (up
to YIELD_LONGEST); one granted halves it (down to YIELD_GRACE). Only an acquire that comes
within YIELD_GRACE of the release yields; a later one tries at once, as before."""

from __future__ import annotations

import pytest

from tenure.core.context import Context
from tenure.core.effects import Subscribe, Unsubscribe, Wait
from tenure.core.lock import LockCore
from tenure.core.yielding import SKIPS_MOST, YIELD_GRACE, YIELD_LONGEST, YIELDS_KEPT, Yields

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
        shorter.append(round(next_yield(yields), 6))
    assert shorter == [4 * YIELD_GRACE, 2 * YIELD_GRACE, YIELD_GRACE, YIELD_GRACE, YIELD_GRACE]


def next_yield(yields: Yields) -> float:
    """The length of the next waking release's yield (skipped releases passed over)."""
    for i in range(SKIPS_MOST + 1):
        yields.start("l", 50.0 + i)
        if (left := yields.left("l", 50.0 + i)) > 0:
            return left
    raise AssertionError("no release yielded")


def yields_in(yields: Yields, releases: int) -> list[bool]:
    """Which of ``releases`` waking releases in a row start a yield (none ends)."""
    out = []
    for i in range(releases):
        yields.start("l", 100.0 + i)
        out.append(yields.left("l", 100.0 + i) > 0)
    return out


def test_yields_that_find_the_lock_free_are_skipped_for_more_releases_each_time() -> None:
    """The client woken is not taking the lock (paused, or a listener that never acquires):
    after 1, 2, 3 such yields in a row the next 1, 3, 7 waking releases do not yield, up to
    SKIPS_MOST; then one yields again (a probe)."""
    yields = Yields()
    skipped = []
    for _ in range(8):
        yields.ended("l", held=False)
        pattern = yields_in(yields, SKIPS_MOST + 2)
        skipped.append(pattern.index(True))
        assert all(pattern[skipped[-1] :])  # without an end, every later release yields
    assert skipped == [1, 3, 7, 15, 31, 63, 63, 63]
    assert SKIPS_MOST == 63


@pytest.mark.parametrize(("held", "woken"), [(True, False), (False, True), (True, True)])
def test_a_yield_that_meets_the_client_woken_ends_the_skips(held: bool, woken: bool) -> None:
    yields = Yields()
    for _ in range(3):
        yields.ended("l", held=False)
    yields.ended("l", held=held, woken=woken)  # refused, or ended by an unlock
    assert yields_in(yields, 2) == [True, True]
    yields.ended("l", held=False)  # and the streak starts again from one
    assert yields_in(yields, 3) == [False, True, True]


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


def test_the_next_look_for_old_names_waits_until_the_names_have_doubled() -> None:
    # Reviewer R6: a look at every release once 256 names were kept cost 250 µs per release
    # at 5,000 names woken within a second. Now a look that forgets nothing moves the next
    # to twice the names left.
    yields = Yields()
    for i in range(YIELDS_KEPT):
        yields.start(f"n{i}", 0.5)
    yields.start("old", 0.5)  # the look at 256 names: none is old yet; the next at 512
    yields.ended("old", held=True)  # its next yield is twice the first
    for i in range(YIELDS_KEPT - 2):
        yields.start(f"m{i}", 5.0)  # 511 names: no look, though "old" is over 1 s old
    yields.start("old", 5.0)
    assert yields.left("old", 5.0) == pytest.approx(2 * YIELD_GRACE)  # kept, length too
    yields.start("x", 10.0)  # 512 names: the look forgets all but "x"
    yields.start("old", 10.0)
    assert yields.left("old", 10.0) == pytest.approx(YIELD_GRACE)


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
    if held:
        assert ctx.yields.left("l", clock.now) == pytest.approx(2 * YIELD_GRACE)
    else:  # the lock was free at the yield's end: the next waking release does not yield
        assert ctx.yields.left("l", clock.now) <= 0
        run = drive(lock.acquire(owner, True, None, None), [(ACQ, None)], clock=clock)
        assert run.result is True
        drive(lock.release(owner), [("lock_release", WOKE_OTHER)], clock=clock)
        assert ctx.yields.left("l", clock.now) == pytest.approx(YIELD_GRACE)  # a probe
    if held:  # and a grant after the longer one's timer brings it back
        run = drive(
            lock.acquire(owner, True, None, None),
            [(Subscribe, False), (Wait, False), (ACQ, None), (Unsubscribe, None)],
            clock=clock,
        )
        assert yielded(run, 2 * YIELD_GRACE)
        drive(lock.release(owner), [("lock_release", WOKE_OTHER)], clock=clock)
        assert ctx.yields.left("l", clock.now) <= 0  # a release that does not yield, once
        assert drive(lock.acquire(owner, True, None, None), [(ACQ, None)], clock=clock).result
        drive(lock.release(owner), [("lock_release", WOKE_OTHER)], clock=clock)
        assert ctx.yields.left("l", clock.now) == pytest.approx(YIELD_GRACE)  # halved


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
