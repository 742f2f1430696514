"""The frame every waiter's loop runs in (``core/waiting.py``): however the loop ends, and
wherever a signal handler raises in the frame's own code, the flow yields an Unsubscribe
of its channel before the exception goes on (else the waiter's ticket, and the channel's
subscription, would stay for the client's life)."""

from __future__ import annotations

import sys
from collections.abc import Generator
from types import FrameType
from typing import Any

import pytest

from tenure.core import waiting
from tenure.core.effects import Subscribe, Unsubscribe, Wait
from tenure.core.waiting import subscribed

CH = "redisson_sc:{s}"


class Interrupted(Exception):
    """What the stand-in for a signal handler raises."""


def granted_loop() -> Generator[Any, Any, bool]:
    yield Wait(CH, 1.0)
    return True


def raising_as(name: str) -> Any:
    """A tracer that raises Interrupted as a function of ``core/waiting.py`` named
    ``name`` begins (where a signal handler runs: as a Python function begins)."""

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event == "call" and code.co_name == name and code.co_filename == waiting.__file__:
            raise Interrupted(name)  # a raising tracer is unset: it raises once
        return None

    return tracer


def test_a_loop_that_ends_leaves_the_channel() -> None:
    flow = subscribed(Subscribe(CH, frozenset()), granted_loop())
    assert isinstance(next(flow), Subscribe)
    assert isinstance(flow.send(True), Wait)
    assert flow.send(True) == Unsubscribe(CH)
    with pytest.raises(StopIteration) as stop:
        flow.send(None)
    assert stop.value.value is True


def test_an_interrupt_as_the_leave_begins_still_leaves() -> None:
    # The loop returned (granted); a handler raises as the generator that yields the
    # Unsubscribe begins, before its own try: the flow still yields an Unsubscribe, then
    # the exception goes on (R1's PES storms: 1 channel of 300 left subscribed).
    flow = subscribed(Subscribe(CH, frozenset()), granted_loop())
    next(flow)
    flow.send(True)
    sys.settrace(raising_as("leaving"))
    try:
        effect = flow.send(True)
    finally:
        sys.settrace(None)
    assert effect == Unsubscribe(CH, pass_on=True)
    with pytest.raises(Interrupted):
        flow.send(None)


def test_an_interrupt_at_the_leaves_yield_leaves_again() -> None:
    flow = subscribed(Subscribe(CH, frozenset()), granted_loop())
    next(flow)
    flow.send(True)
    assert flow.send(True) == Unsubscribe(CH)
    # Thrown at the yield (it may have come before the driver performed it): once more.
    assert flow.throw(Interrupted("at the yield")) == Unsubscribe(CH, pass_on=True)
    effects: list[Any] = []
    with pytest.raises(Interrupted):
        effects.extend(flow.send(None) for _ in range(3))
    # Any more is an Unsubscribe: a no-op for a caller with no ticket.
    assert set(effects) <= {Unsubscribe(CH, pass_on=True)}


def test_an_error_in_the_loop_leaves_passing_a_wake_up_on() -> None:
    flow = subscribed(Subscribe(CH, frozenset()), granted_loop())
    next(flow)
    flow.send(True)
    assert flow.throw(Interrupted("in the wait")) == Unsubscribe(CH, pass_on=True)
    with pytest.raises(Interrupted):
        flow.send(None)
