"""MultiLock and RedLock flows (``core/composite.py``), members driven by scripted replies.

Member flows run inline when the composite starts them, so the steps list the members'
effects in the order the composite starts them; ``nodes`` marks dead or slow members.
"""

from __future__ import annotations

import pytest

from tenure.core import composite
from tenure.core.clock import validity
from tenure.core.context import Context
from tenure.core.effects import (
    WATCH_HOLDS,
    Command,
    Join,
    OnMember,
    Sleep,
    Spawn,
    Subscribe,
    Together,
    Unsubscribe,
    Wait,
)
from tenure.core.lock import LockCore
from tenure.errors import BackendError, LockLostError, NotOwnedError

from .conftest import new_context
from .scripted import DEAD, SLOW, Clock, Do, drive, fails

ACQ, REL = "lock_acquire", "lock_release"
GUARDED = "lock_release+guard"  # a release behind the reconcile guard (scripts.guarded())


def on(index: int, script: str = ACQ):
    """Matches a call of ``script`` on member ``index`` (keys ``m<index>``)."""

    def match(effect: object) -> bool:
        name = getattr(getattr(effect, "script", None), "name", None)
        return name == script and effect.keys[0] == f"m{index}"  # type: ignore[attr-defined]

    match.__name__ = f"{script}@m{index}"
    return match


def setup(n: int) -> tuple[list[Context], list[LockCore], tuple[str, ...]]:
    contexts = [new_context() for _ in range(n)]
    cores = [LockCore(c, f"m{i}") for i, c in enumerate(contexts)]
    return contexts, cores, tuple(c.identity.thread_owner() for c in contexts)


class Calls:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


# ------------------------------------------------------------------------ MultiLock


def test_multilock_takes_every_member_in_order(clock: Clock) -> None:
    _, cores, owners = setup(3)
    multi = composite.MultiLockCore(cores, None)
    run = drive(
        multi.acquire(owners, True, 5, None),
        [(on(0), None), (on(1), None), (on(2), None)],
        clock=clock,
    )
    assert run.result is True
    # The first member alone (its holder is the one caller that goes on), then one try
    # of every other member at once; none refused: nothing to wait for one by one.
    assert [effect.index for effect in run.of(OnMember)] == [0]
    (together,) = run.of(Together)
    assert [index for index, _ in together.flows] == [1, 2]
    assert multi.current(owners) is not None
    assert len(run.extra) == 3  # each member asks for renewal (a watchdog hold)


def test_multilock_refused_its_first_member_tries_no_other(clock: Clock) -> None:
    # Callers contending for the same members never split them: one refused the first
    # member takes none of the others (with timeout 0, exactly one caller wins).
    _, cores, owners = setup(3)
    multi = composite.MultiLockCore(cores, None)
    run = drive(multi.acquire(owners, True, 0, None), [(on(0), 5000)], clock=clock)
    assert run.result is False
    assert run.of(Together) == []
    assert [c.keys[0] for c in run.calls(ACQ)] == ["m0"]


def test_multilock_member_lease_covers_the_round_then_is_set_back(clock: Clock) -> None:
    _, cores, owners = setup(2)
    multi = composite.MultiLockCore(cores, None)
    run = drive(
        multi.acquire(owners, True, 4, 1),
        [(on(0), None), (on(1), None), (Command, 1), (Command, 1)],
        clock=clock,
    )
    assert run.result is True
    assert [c.args[0] for c in run.calls(ACQ)] == [8000, 8000]  # 2 x the 4 s round
    assert [c.args for c in run.of(Command)] == [("PEXPIRE", "m0", 1000), ("PEXPIRE", "m1", 1000)]
    assert run.extra == [WATCH_HOLDS] * 2  # leased members: only their loss is watched


def test_multilock_member_lease_already_the_lease_is_not_set_back(clock: Clock) -> None:
    _, cores, owners = setup(2)
    multi = composite.MultiLockCore(cores, None)
    run = drive(
        multi.acquire(owners, True, 1, 10),  # 2 x the 1 s round < 10 s
        [(on(0), None), (on(1), None)],
        clock=clock,
    )
    assert run.result is True
    assert [c.args[0] for c in run.calls(ACQ)] == [10000, 10000]
    assert run.of(Command) == []


def test_multilock_failing_set_back_releases_the_members(clock: Clock) -> None:
    _, cores, owners = setup(2)
    multi = composite.MultiLockCore(cores, None)
    error = BackendError("m0 down")
    run = fails(
        multi.acquire(owners, True, 4, 1),
        [
            (on(0), None),
            (on(1), None),
            (Command, error),  # the set-backs go out together: both are sent
            (Command, 1),
            (on(0, REL), 1),
            (on(1, REL), 1),
        ],
        clock=clock,
    )
    assert run.error is error
    assert multi.current(owners) is None


def test_multilock_one_attempt_refused_releases_what_it_took(clock: Clock) -> None:
    _, cores, owners = setup(3)
    multi = composite.MultiLockCore(cores, None)
    run = drive(
        multi.acquire(owners, False, None, None),
        [(on(0), None), (on(1), 700), (on(2), None), (on(0, REL), 1), (on(2, REL), 1)],
        clock=clock,
    )
    assert run.result is False
    assert multi.current(owners) is None
    assert cores[0].ctx.holds.get("m0", owners[0]) is None
    assert cores[2].ctx.holds.get("m2", owners[2]) is None


def test_multilock_round_waits_for_a_member_then_lets_go(clock: Clock) -> None:
    _, cores, owners = setup(2)
    multi = composite.MultiLockCore(cores, None)
    run = drive(
        multi.acquire(owners, True, 1, None),
        [
            (on(0), None),
            (on(1), 60000),  # the one try of every member at once
            (on(1), 60000),  # then a wait for the refused one
            (Subscribe, None),
            (on(1), 60000),
            (Wait, False),  # the round's whole second passes
            (on(1), 60000),
            (Unsubscribe, None),
            (on(0, REL), 1),
        ],
        clock=clock,
    )
    assert run.result is False
    assert run.of(Wait)[0].seconds == pytest.approx(1.0)


def test_multilock_member_error_releases_the_taken_ones_shielded() -> None:
    _, cores, owners = setup(3)
    multi = composite.MultiLockCore(cores, None)
    error = BackendError("m2 down")
    run = fails(
        multi.acquire(owners, False, None, None),
        [(on(0), None), (on(1), None), (on(2), error), (on(0, REL), 1), (on(1, REL), 1)],
    )
    assert run.error is error
    assert [e.index for e in run.of(Spawn)] == [0, 1]
    assert len(run.of(Join)) == 1


def test_multilock_release_every_member_and_not_owned_after() -> None:
    _, cores, owners = setup(2)
    multi = composite.MultiLockCore(cores, None)
    drive(multi.acquire(owners, False, None, None), [(on(0), None), (on(1), None)])
    drive(multi.release(owners), [(on(0, REL), 1), (on(1, REL), 1)])
    assert multi.current(owners) is None
    with pytest.raises(NotOwnedError):
        drive(multi.release(owners), [])


def test_multilock_release_goes_on_after_a_member_error() -> None:
    _, cores, owners = setup(3)
    multi = composite.MultiLockCore(cores, None)
    drive(multi.acquire(owners, False, None, None), [(on(i), None) for i in range(3)])
    first = BackendError("m0")
    run = fails(
        multi.release(owners),
        [(on(0, REL), first), (on(1, REL), 1), (on(2, REL), None)],
    )
    assert run.error is first
    assert any("NotOwned" in note or "LockLost" in note for note in first.__notes__)


def test_multilock_owned_needs_every_member() -> None:
    _, cores, owners = setup(2)
    multi = composite.MultiLockCore(cores, None)
    assert drive(multi.owned(owners), [(Command, 1), (Command, 1)]).result is True
    assert drive(multi.owned(owners), [(Command, 0)]).result is False


def test_multilock_loss_of_one_member_is_a_loss() -> None:
    _, cores, owners = setup(2)
    calls = Calls()
    multi = composite.MultiLockCore(cores, calls)
    drive(multi.acquire(owners, False, None, None), [(on(0), None), (on(1), None)])
    cores[1].hold_lost(owners[1])
    assert multi.is_lost(owners)
    assert calls.count == 1


# -------------------------------------------------------------------------- RedLock


def test_redlock_node_timeout_is_checked() -> None:
    _, cores, _ = setup(3)
    with pytest.raises(ValueError, match="node_timeout"):
        composite.RedLockCore(cores, 0, None)


def test_redlock_all_members_granted(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    run = drive(
        red.acquire(owners, False, None, 10),
        [(on(0), None), (on(1), None), (on(2), None)],
        clock=clock,
    )
    assert run.result is True
    (together,) = run.of(Together)  # every member at once, in one round
    assert [index for index, _ in together.flows] == [0, 1, 2]
    acq = red.current(owners)
    assert acq is not None
    assert acq.validity == pytest.approx(validity(10, 0))


def test_redlock_without_a_lease_takes_validity_from_the_shortest_watchdog(clock: Clock) -> None:
    contexts = [new_context(watchdog_timeout=t) for t in (30.0, 10.0, 20.0)]
    cores = [LockCore(c, f"m{i}") for i, c in enumerate(contexts)]
    owners = tuple(c.identity.thread_owner() for c in contexts)
    red = composite.RedLockCore(cores, 0.1, None)
    run = drive(
        red.acquire(owners, False, None, None),
        [(on(0), None), (on(1), None), (on(2), None)],
        clock=clock,
    )
    assert run.result is True
    # each member's own watchdog lease on the wire, and each asks its runner for renewal
    assert [c.args[0] for c in run.calls(ACQ)] == [30000, 10000, 20000]
    assert len(run.extra) == 3
    acq = red.current(owners)
    assert acq is not None
    assert acq.validity == pytest.approx(validity(10.0, 0))


def test_redlock_quorum_with_a_dead_node(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    run = drive(
        red.acquire(owners, False, None, 10),
        [(on(0), None), (on(1), None)],
        clock=clock,
        nodes={2: DEAD},
    )
    assert run.result is True


def test_redlock_without_quorum_releases_and_fails(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    run = drive(
        red.acquire(owners, False, None, 10),
        [(on(0), None), (on(0, REL), 1)],
        clock=clock,
        nodes={1: DEAD, 2: DEAD},
    )
    assert run.result is False
    assert red.current(owners) is None
    assert run.of(Together)[0].seconds == pytest.approx(0.1)  # the node timeout, no longer


def test_redlock_refusals_retry_after_a_delay_until_the_deadline(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(composite, "RETRY_DELAY", (0.25, 0.25))
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    one_round = [(on(0), None), (on(1), 500), (on(2), 500), (on(0, REL), 1)]
    run = drive(red.acquire(owners, True, 0.5, 10), one_round * 3, clock=clock)
    assert run.result is False
    assert [s.seconds for s in run.of(Sleep)] == [0.25, 0.25]
    assert red.current(owners) is None


def test_redlock_validity_spent_waiting_is_a_failure(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 5.0, None)
    slow_grant = Do(lambda e: clock.advance(0.995))  # returns None: granted, 995 ms later
    run = drive(
        red.acquire(owners, False, None, 1),
        [
            (on(0), slow_grant),
            (on(0, REL), 1),  # the member itself undoes a grant answered past its validity
            (on(1), None),
            (on(2), None),
            (on(1, REL), 1),
            (on(2, REL), 1),
        ],
        clock=clock,
    )
    assert run.result is False  # 1 - 0.995 - 0.012 < 0


def test_redlock_member_error_counts_as_not_acquired_and_is_released(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    run = drive(
        red.acquire(owners, False, None, 10),
        [(on(0), None), (on(1), BackendError("timeout")), (on(1, REL), None), (on(2), None)],
        clock=clock,
    )
    assert run.result is True  # 0 and 2: a quorum; the lost reply on 1 was released


def test_redlock_late_grant_is_released_at_once(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    drive(
        red.acquire(owners, False, None, 10),
        [(on(0), None), (on(1), None)],
        clock=clock,
        nodes={2: SLOW},
    )
    # the slow node's grant arrives while the RedLock is being released: released too
    run = drive(
        red.release(owners),
        [(on(0, REL), 1), (on(1, REL), 1), (on(2), None), (on(2, REL), 1)],
        clock=clock,
    )
    assert run.result is None
    assert cores[2].ctx.holds.get("m2", owners[2]) is None


def test_redlock_release_raises_only_if_no_member_was_held(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)

    def take() -> None:
        drive(red.acquire(owners, False, None, 10), [(on(i), None) for i in range(3)], clock=clock)

    take()
    run = drive(
        red.release(owners), [(on(0, REL), None), (on(1, REL), 1), (on(2, REL), BackendError)]
    )
    # Member 2's release is finished in the background once its server answers (it had
    # not run: the guard frees the lock, then finds nothing beyond the 0 holds recorded,
    # twice); the owner's next acquire of that member waits for it.
    (background,) = run.extra
    drive(background.flow, [(on(2, GUARDED), 1)] + [(on(2, GUARDED), None)] * 2)
    take()
    run = fails(red.release(owners), [(on(i, REL), None) for i in range(3)])
    assert type(run.error) is LockLostError  # each member had a recorded hold
    with pytest.raises(NotOwnedError):
        drive(red.release(owners), [])


def test_redlock_owned_needs_a_majority(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    yes = drive(red.owned(owners), [(Command, 1), (Command, 0)], nodes={2: DEAD}, clock=clock)
    assert yes.result is False
    assert drive(red.owned(owners), [(Command, 1), (Command, 1), (Command, 0)]).result is True


def test_redlock_sleeps_between_attempts(clock: Clock) -> None:
    _, cores, owners = setup(3)
    red = composite.RedLockCore(cores, 0.1, None)
    run = drive(
        red.acquire(owners, True, 1, 10),
        [
            (on(0), 500),
            (on(1), 500),
            (on(2), 500),
            (on(0), None),
            (on(1), None),
            (on(2), None),
        ],
        clock=clock,
    )
    assert run.result is True
    (sleep,) = run.of(Sleep)
    low, high = composite.RETRY_DELAY
    assert low <= sleep.seconds <= high
