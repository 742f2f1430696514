"""Interrupts, one after another, at every Unsubscribe a flow's clean-up yields (sync API):
however many land there, a granted Lock's grant is still undone and a candidate still leaves
the election's queue, and the caller gets an interrupt.

Before (d740499, b6b64fa): the clean-up retried its Unsubscribe once; a third interrupt, on
that retry, skipped the undo (the hold stayed on the server, renewed by the watchdog) and
the give-up (the candidate stayed queued).

The stand-in for a signal handler raises Alarm as the runner performs an Unsubscribe (after
performing it, or before: both orders), ``times`` times in a row, in the main thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

import tenure
from support.signals import current_frame
from support.twins import wait_until
from support.wire import text
from tenure.core.effects import Unsubscribe, Wait


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def waiting_in(thread: threading.Thread, name: str) -> bool:
    """True if ``thread`` is inside the pub/sub listener's method ``name`` now."""
    frame = current_frame(thread.ident)
    while frame is not None:
        code = frame.f_code
        if code.co_name == name and code.co_filename.endswith("listener.py"):
            return True
        frame = frame.f_back
    return False


def interrupt_unsubscribes(
    client: tenure.Client, times: int, after: bool, armed: threading.Event, wait: bool = False
) -> list[str]:
    """From when ``armed`` is set: the next ``times`` Unsubscribes (and with ``wait``, a
    Wait first) the client's runner performs in the main thread raise Alarm (``after``:
    once performed; a Wait, before). What landed."""
    runner = client._runner
    perform = runner.perform
    main = threading.main_thread()
    landed: list[str] = []

    def interrupted(effect: Any) -> Any:
        kinds = (Unsubscribe, Wait) if wait and not landed else Unsubscribe
        hit = (
            isinstance(effect, kinds)
            and armed.is_set()
            and threading.current_thread() is main
            and len(landed) < times
        )
        if not hit:
            return perform(effect)
        landed.append(f"{type(effect).__name__} {'after' if after else 'before'}")
        if after and isinstance(effect, Unsubscribe):
            perform(effect)
        raise Alarm(f"interrupt {len(landed)}")

    runner.perform = interrupted  # type: ignore[method-assign]
    return landed


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("times", [3, 5])
def test_interrupts_at_every_leave_of_a_granted_lock_still_undo_the_grant(
    make_client: Callable[..., tenure.Client], r: redis.Redis, times: int, after: bool
) -> None:
    name = f"leave-again-{times}-{after}"
    holder = make_client().lock(name)
    assert holder.acquire()
    client = make_client()
    main = threading.main_thread()
    armed = threading.Event()
    landed = interrupt_unsubscribes(client, times, after, armed)

    def release_when_parked() -> None:
        assert wait_until(lambda: waiting_in(main, "wait"), 10, 0.001)
        armed.set()  # the waiter is granted next, then leaves its channel
        assert holder.force_release()

    threading.Thread(target=release_when_parked).start()
    with pytest.raises(Alarm):
        client.lock(name).acquire(timeout=30)
    assert len(landed) == times, landed
    field = f"{client.client_id}:"
    assert wait_until(lambda: not any(text(f).startswith(field) for f in r.hkeys(name)), 1.5), (
        r.hgetall(name)
    )


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("times", [3, 5])
def test_interrupts_at_every_leave_of_a_candidate_still_leave_the_queue(
    make_client: Callable[..., tenure.Client], r: redis.Redis, times: int, after: bool
) -> None:
    # The first interrupt in the candidate's wait, the others at its clean-up's leaves:
    # the third is the retried Unsubscribe's.
    from tenure.core.election import election_keys

    name = f"cand-again-{times}-{after}"
    leader = make_client().election(name)
    assert leader.campaign("leader") is not None
    client = make_client()
    queue = election_keys(name)[2]
    armed = threading.Event()
    armed.set()
    landed = interrupt_unsubscribes(client, times, after, armed, wait=True)
    with pytest.raises(Alarm):
        client.election(name).campaign("me", timeout=30)
    assert len(landed) == times, landed
    assert landed[0].startswith("Wait")
    field = f"{client.client_id}:"

    def gone() -> bool:
        return not any(text(m).startswith(field) for m in r.lrange(queue, 0, -1))

    assert wait_until(gone, 1.5), r.lrange(queue, 0, -1)
    leader.resign()
