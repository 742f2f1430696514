"""MultiLock and RedLock decisions (``core/composite.py``): arithmetic and loss roll-up."""

from __future__ import annotations

import gc
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.core import composite
from tenure.core.args import bind_callback
from tenure.core.clock import CLOCK_DRIFT_MIN, drift, validity
from tenure.core.composite import (
    Acquisition,
    CompositeCore,
    MultiLockCore,
    RedLockCore,
    multi_member_lease,
    multi_round,
    quorum,
    release_outcome,
    retry_delay,
)
from tenure.core.context import Context
from tenure.core.lock import LockCore
from tenure.core.watchdog import renew
from tenure.errors import BackendError, NotOwnedError

from .conftest import new_context
from .scripted import drive

FAST = settings(max_examples=200, deadline=None)
seconds = st.floats(min_value=0.001, max_value=1e6, allow_nan=False, allow_infinity=False)

# ----------------------------------------------------------------------- arithmetic


@pytest.mark.parametrize(("n", "q"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)])
def test_quorum_table(n: int, q: int) -> None:
    assert quorum(n) == q


@given(st.integers(min_value=1, max_value=10_000))
@FAST
def test_quorum_is_the_smallest_majority(n: int) -> None:
    q = quorum(n)
    assert 2 * q > n
    assert 2 * (q - 1) <= n
    # two quorums always share a member
    assert 2 * q - n >= 1


def test_drift_of_ten_seconds() -> None:
    assert drift(10) == pytest.approx(0.102)
    assert validity(10, 1) == pytest.approx(8.898)


@given(lease=seconds, elapsed=st.floats(min_value=0, max_value=1e6, allow_nan=False))
@FAST
def test_validity_is_lease_minus_elapsed_minus_drift(lease: float, elapsed: float) -> None:
    v = validity(lease, elapsed)
    assert v == pytest.approx(lease - elapsed - (0.01 * lease + 0.002), abs=1e-6)
    assert v < lease - elapsed  # drift always costs something
    assert validity(lease, elapsed + 1) < v  # slower acquisition, less validity
    if elapsed >= 0.99 * lease:
        assert v <= 0


@given(a=seconds, b=seconds)
@FAST
def test_drift_grows_with_the_lease(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert drift(low) <= drift(high)
    assert drift(low) >= CLOCK_DRIFT_MIN


@given(remaining=st.floats(min_value=-10, max_value=10, allow_nan=False))
@FAST
def test_retry_delay_bounds(remaining: float) -> None:
    low, high = composite.RETRY_DELAY
    d = retry_delay(remaining)
    assert 0 <= d <= max(0.0, remaining)
    assert d <= high
    assert d >= min(low, max(0.0, remaining))


def test_retry_delay_without_a_deadline() -> None:
    low, high = composite.RETRY_DELAY
    assert all(low <= retry_delay(math.inf) <= high for _ in range(100))


@given(wait=st.floats(min_value=0, max_value=1e6, allow_nan=False), n=st.integers(1, 50))
@FAST
def test_multi_round_with_a_timeout_is_the_whole_wait(wait: float, n: int) -> None:
    assert multi_round(wait, n) == wait


@given(n=st.integers(1, 50))
@FAST
def test_multi_round_without_a_timeout_is_a_random_slice(n: int) -> None:
    base = composite.MULTI_ROUND_PER_MEMBER * n
    assert base <= multi_round(math.inf, n) <= 2 * base


@given(lease=st.none() | seconds, round_wait=st.floats(min_value=0, max_value=1e6))
@FAST
def test_multi_member_lease(lease: float | None, round_wait: float) -> None:
    member = multi_member_lease(lease, round_wait)
    if lease is None:
        assert member is None  # the watchdog keeps each member
    else:
        assert member == max(lease, 2 * round_wait)
        assert member >= lease
        assert member >= 2 * round_wait


# -------------------------------------------------------------------- CompositeCore


class Losses:
    """An ``on_lost`` that records its calls: the core calls it with no argument; a front
    binds itself with ``bind_callback(user_callback, front)``."""

    def __init__(self) -> None:
        self.fronts: list[object] = []

    def __call__(self, *front: object) -> None:
        assert len(front) <= 1
        self.fronts.append(front[0] if front else None)


def members(n: int) -> tuple[list[Context], list[LockCore]]:
    """``n`` member locks, each on its own client (as RedLock's independent masters)."""
    contexts = [new_context() for _ in range(n)]
    return contexts, [LockCore(c, f"m{i}") for i, c in enumerate(contexts)]


def owners_of(contexts: list[Context]) -> tuple[str, ...]:
    return tuple(c.identity.thread_owner() for c in contexts)


def test_composite_arguments(ctx: Context) -> None:
    with pytest.raises(ValueError, match="a composite needs at least one member"):
        CompositeCore([], 0, None)
    with pytest.raises(ValueError, match="a MultiLock needs at least one member"):
        MultiLockCore([], None)
    with pytest.raises(ValueError, match="a RedLock needs at least one member"):
        RedLockCore([], 0.1, None)
    with pytest.raises(TypeError, match="on_lost"):
        CompositeCore([LockCore(ctx, "a")], 1, on_lost=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_lost"):
        MultiLockCore([LockCore(ctx, "a")], on_lost=1)  # type: ignore[arg-type]
    pair = [LockCore(ctx, "a"), LockCore(ctx, "b")]
    assert RedLockCore(pair, 0.1, None).name == "RedLock(a, b)"
    assert MultiLockCore(pair, None).name == "MultiLock(a, b)"


def test_kind_is_a_class_attribute_and_needed_follows_it() -> None:
    assert (CompositeCore.kind, MultiLockCore.kind, RedLockCore.kind) == (
        "composite",
        "MultiLock",
        "RedLock",
    )
    _, cores = members(5)
    assert MultiLockCore(cores, None).needed == 5  # every member
    assert RedLockCore(cores, 0.1, None).needed == quorum(5) == 3


def test_granted_then_concluded_is_held_until_forgotten() -> None:
    contexts, cores = members(3)
    multi = MultiLockCore(cores, None)
    owners = owners_of(contexts)
    acq = multi.start(owners)
    assert multi.current(owners) is None
    for i in range(3):
        assert multi.granted(acq, i) is True
    assert multi.held_count(acq) == 3
    assert acq.members == dict(enumerate(owners))
    assert multi.conclude(acq, None) is None
    assert acq.validity is None
    assert not acq.settled
    assert multi.current(owners) is acq
    assert multi.forget(owners) is acq
    assert acq.settled
    assert multi.forget(owners) is None
    assert multi.current(owners) is None


def test_reentrant_acquisitions_are_forgotten_newest_first() -> None:
    contexts, cores = members(2)
    multi = MultiLockCore(cores, None)
    owners = owners_of(contexts)
    first, second = multi.start(owners), multi.start(owners)
    for acq in (first, second):
        multi.granted(acq, 0)
        multi.granted(acq, 1)
        assert multi.conclude(acq, None) is None
    assert multi.forget(owners) is second
    assert multi.current(owners) is first
    assert multi.forget(owners) is first


def test_abandon_returns_the_members_to_release_and_refuses_late_grants() -> None:
    contexts, cores = members(3)
    multi = MultiLockCore(cores, None)
    owners = owners_of(contexts)
    acq = multi.start(owners)
    multi.granted(acq, 0)
    multi.granted(acq, 2)
    assert multi.abandon(acq) == {0: owners[0], 2: owners[2]}
    # a reply that comes back after the attempt failed: the caller releases that member
    assert multi.granted(acq, 1) is False
    assert 1 not in acq.members
    assert multi.current(owners) is None


def test_granted_after_forget_is_refused() -> None:
    """A late grant landing while the composite is released must be released too."""
    contexts, cores = members(3)
    red = RedLockCore(cores, 0.1, None)
    owners = owners_of(contexts)
    acq = red.start(owners)
    red.granted(acq, 0)
    red.granted(acq, 1)
    assert red.conclude(acq, 1.0) is None
    assert red.forget(owners) is acq
    assert red.granted(acq, 2) is False
    assert 2 not in acq.members


@pytest.mark.parametrize(
    ("held", "valid", "success"),
    [(2, 0.5, True), (3, 0.5, True), (1, 0.5, False), (2, 0.0, False), (3, -1.0, False)],
)
def test_conclude_needs_a_quorum_and_positive_validity(
    held: int, valid: float, success: bool
) -> None:
    contexts, cores = members(3)
    red = RedLockCore(cores, 0.1, None)
    owners = owners_of(contexts)
    acq = red.start(owners)
    for i in range(held):
        red.granted(acq, i)
    outcome = red.conclude(acq, valid)
    if success:
        assert outcome is None
        assert red.current(owners) is acq
        assert acq.validity == valid
        assert not acq.settled
    else:
        assert outcome == {i: owners[i] for i in range(held)}
        assert acq.settled
        assert red.current(owners) is None
        assert red.granted(acq, held) is False


@pytest.mark.parametrize("held", [0, 1, 2])
def test_multilock_conclude_needs_every_member(held: int) -> None:
    contexts, cores = members(3)
    multi = MultiLockCore(cores, None)
    owners = owners_of(contexts)
    acq = multi.start(owners)
    for i in range(held):
        multi.granted(acq, i)
    assert multi.conclude(acq, None) == {i: owners[i] for i in range(held)}
    assert acq.settled
    assert multi.current(owners) is None


def test_conclude_without_validity_skips_the_validity_check() -> None:
    contexts, cores = members(3)
    red = RedLockCore(cores, 0.1, None)
    owners = owners_of(contexts)
    acq = red.start(owners)
    red.granted(acq, 0)
    red.granted(acq, 1)
    assert red.conclude(acq, None) is None
    assert acq.validity is None
    assert red.current(owners) is acq


def test_conclude_records_validity_and_clears_an_old_loss() -> None:
    contexts, cores = members(1)
    multi = MultiLockCore(cores, None)
    owners = owners_of(contexts)
    acq = multi.start(owners)
    multi.granted(acq, 0)
    assert multi.conclude(acq, 1.5) is None
    assert acq.validity == 1.5
    cores[0].hold_lost(owners[0])
    assert multi.is_lost(owners)
    again = multi.start(owners)
    multi.granted(again, 0)
    assert multi.conclude(again, 2.0) is None
    assert not multi.is_lost(owners)
    assert again.validity == 2.0


def held(
    core: CompositeCore, owners: tuple[str, ...], indexes: list[int], valid: float | None = None
) -> Acquisition:
    acq = core.start(owners)
    for i in indexes:
        core.granted(acq, i)
    assert core.conclude(acq, valid) is None
    return acq


def test_multilock_is_lost_at_the_first_member_lost() -> None:
    contexts, cores = members(3)
    losses = Losses()
    front = object()  # the public MultiLock, bound by its front
    multi = MultiLockCore(cores, bind_callback(losses, front))
    owners = owners_of(contexts)
    acq = held(multi, owners, [0, 1, 2])
    cores[1].hold_lost(owners[1])
    assert multi.is_lost(owners)
    assert acq.lost
    assert acq.lost_members == {1}
    assert losses.fronts == [front]
    cores[2].hold_lost(owners[2])  # reported once per acquisition
    assert losses.fronts == [front]


def test_composite_on_lost_is_called_with_no_argument() -> None:
    contexts, cores = members(1)
    calls: list[tuple[object, ...]] = []
    multi = MultiLockCore(cores, lambda *args: calls.append(args))
    owners = owners_of(contexts)
    held(multi, owners, [0])
    cores[0].hold_lost(owners[0])
    assert calls == [()]


def test_redlock_is_lost_only_below_a_majority() -> None:
    contexts, cores = members(5)
    losses = Losses()
    red = RedLockCore(cores, 0.1, losses)
    owners = owners_of(contexts)
    held(red, owners, [0, 1, 2, 3, 4], valid=1.0)
    cores[0].hold_lost(owners[0])
    cores[1].hold_lost(owners[1])
    assert not red.is_lost(owners)
    assert losses.fronts == []
    cores[1].hold_lost(owners[1])  # the same member again changes nothing
    assert not red.is_lost(owners)
    cores[4].hold_lost(owners[4])
    assert red.is_lost(owners)
    assert len(losses.fronts) == 1


def test_redlock_acquired_with_a_bare_quorum_is_lost_at_one_member() -> None:
    contexts, cores = members(3)
    red = RedLockCore(cores, 0.1, None)
    owners = owners_of(contexts)
    held(red, owners, [0, 2], valid=1.0)  # member 1 was unreachable
    cores[1].hold_lost(owners[1])  # not part of this acquisition
    assert not red.is_lost(owners)
    cores[2].hold_lost(owners[2])
    assert red.is_lost(owners)


def test_losses_of_other_owners_or_unheld_composites_are_ignored() -> None:
    contexts, cores = members(2)
    losses = Losses()
    multi = MultiLockCore(cores, losses)
    owners = owners_of(contexts)
    cores[0].hold_lost(owners[0])  # nothing held yet
    held(multi, owners, [0, 1])
    cores[0].hold_lost("another-caller:1")
    assert not multi.is_lost(owners)
    assert losses.fronts == []


def test_every_acquisition_holding_the_member_is_reported() -> None:
    contexts, cores = members(2)
    losses = Losses()
    multi = MultiLockCore(cores, losses)
    owners = owners_of(contexts)
    held(multi, owners, [0, 1])
    held(multi, owners, [0, 1])  # re-entered
    cores[0].hold_lost(owners[0])
    assert len(losses.fronts) == 2


def test_failing_on_lost_does_not_stop_the_roll_up() -> None:
    calls: list[tuple[object, ...]] = []

    def broken(*args: object) -> None:
        calls.append(args)
        raise RuntimeError("bug")

    contexts, cores = members(1)
    multi = MultiLockCore(cores, broken)
    owners = owners_of(contexts)
    held(multi, owners, [0])
    held(multi, owners, [0])  # re-entered: the second report still comes
    cores[0].hold_lost(owners[0])
    assert multi.is_lost(owners)
    assert calls == [(), ()]


def test_member_loss_found_by_the_watchdog_rolls_up() -> None:
    contexts, cores = members(3)
    red = RedLockCore(cores, 0.1, None)
    owners = owners_of(contexts)
    for core, owner in zip(cores, owners, strict=True):
        assert drive(core.acquire(owner, True, 0, None), [("lock_acquire", None)]).result
    held(red, owners, [0, 1, 2], valid=1.0)
    for ctx in contexts[:2]:
        (lost,) = drive(renew(ctx), [("lock_renew", [0])]).result
        lost.sink.hold_lost(lost.owner)  # what the driver does with a lost hold
    assert red.is_lost(owners)


def test_member_loss_found_at_release_rolls_up() -> None:
    contexts, cores = members(2)
    multi = MultiLockCore(cores, None)
    owners = owners_of(contexts)
    for core, owner in zip(cores, owners, strict=True):
        drive(core.acquire(owner, True, 0, None), [("lock_acquire", None)])
    held(multi, owners, [0, 1])
    flow = cores[0].release(owners[0])
    next(flow)
    with pytest.raises(NotOwnedError):
        flow.send(None)
    assert multi.is_lost(owners)


def test_composite_is_not_kept_alive_by_its_members() -> None:
    contexts, cores = members(1)
    multi = MultiLockCore(cores, None)
    owners = owners_of(contexts)
    held(multi, owners, [0])
    del multi
    gc.collect()
    cores[0].hold_lost(owners[0])  # the dead listener is dropped, not called
    assert cores[0]._loss_listeners == []


def test_release_outcome() -> None:
    assert release_outcome("RedLock", []) is None
    first, second = BackendError("a"), NotOwnedError("b")
    error = release_outcome("MultiLock", [first, second])
    assert error is first
    assert error.__notes__ == ["MultiLock: another member failed too: NotOwnedError: b"]
