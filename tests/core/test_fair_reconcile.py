"""FairLock: a fair acquire whose reply was lost leaves the queue again once the server answers."""

from __future__ import annotations

from typing import Any

from tenure.core.context import Context
from tenure.core.effects import Background
from tenure.core.fair import FairLockCore
from tenure.errors import BackendError

from .scripted import Clock, Do, drive, fails

FAIR, GIVE_UP, GUARDED_RELEASE = "fair_acquire", "fair_give_up", "fair_release+guard"


def reconcile_of(lock: FairLockCore, owner: str) -> Any:
    """The background reconcile of an acquire by ``owner`` whose reply was lost."""
    run = fails(lock.acquire(owner, True, 5, None), [(FAIR, BackendError("timeout")), (GIVE_UP, 0)])
    (flow,) = [e.flow for e in run.extra if isinstance(e, Background)]
    return flow


def test_a_lost_acquire_leaves_the_queue_again_after_the_holds_reconcile(
    ctx: Context, owner: str, clock: Clock
) -> None:
    """The lost fair_acquire went on a connection not ordered with the flow's own give-up:
    it may land after it and queue the owner anew (an entry nobody waits on; found by the
    simulator's "orphan queue entry" rule). Once the holds' reconcile has heard the server
    twice, a second give-up comes after it; the owner's next acquire waits until it is sent."""
    lock = FairLockCore(ctx, "f")
    flow = reconcile_of(lock, owner)
    pending = (lock.key, lock.field(owner))
    seen: list[bool] = []

    def give_up(call: Any) -> int:
        seen.append(pending in ctx.reconciling)
        return 1

    run = drive(flow, [(GUARDED_RELEASE, None), (GUARDED_RELEASE, None), (GIVE_UP, Do(give_up))])
    assert run.names[-1] == GIVE_UP
    assert run.effects[-1].args[0] == owner
    assert seen == [True]
    assert pending not in ctx.reconciling


def test_no_second_give_up_when_the_owner_queued_again(ctx: Context, owner: str) -> None:
    lock = FairLockCore(ctx, "f")
    flow = reconcile_of(lock, owner)
    lock._queued.add(owner)  # the same owner asked again meanwhile: its entry is its own
    run = drive(flow, [(GUARDED_RELEASE, None), (GUARDED_RELEASE, None)])
    assert GIVE_UP not in run.names


def test_a_failed_second_give_up_is_retried_in_the_background(ctx: Context, owner: str) -> None:
    lock = FairLockCore(ctx, "f")
    flow = reconcile_of(lock, owner)
    run = drive(
        flow,
        [(GUARDED_RELEASE, None), (GUARDED_RELEASE, None), (GIVE_UP, BackendError("down"))],
    )
    (retry,) = [e.flow for e in run.extra if isinstance(e, Background)]
    assert drive(retry, [(GIVE_UP, 1)]).names[-1] == GIVE_UP
