"""A second interrupt (a signal handler that raises, sync API) at each place between a flow's
clean-up asking for background work and that work being started: the work must still run
once, and once only. An acquire whose reply said granted, then interrupted, gives its
grant back in the background (`Background`); a second handler raising before that work was
spawned used to drop it, and the permits stayed taken for good.

A tracer raises at each place a handler could run (as a frame begins, after a call
returns, at a backward jump: see tests/test_signal_windows.py) in the code between the two,
one place per run, on a real server."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import pytest
import redis

import tenure
from support.signals import TwoAlarms
from support.twins import wait_until
from tenure import _concurrency
from tenure.core import effects
from tenure.core.semaphore import SemaphoreCore
from tenure.sync import runner


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def nested(code: CodeType, name: str) -> CodeType:
    for const in code.co_consts:
        if isinstance(const, CodeType) and const.co_name == name:
            return const
    raise LookupError(name)


def code(fn: Any) -> CodeType:
    return fn.__code__


def test_a_second_interrupt_before_the_give_back_is_spawned_still_gives_permits_back(
    make_client: Callable[..., tenure.Client], r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()
    acquire = code(SemaphoreCore._acquire)
    attempt = nested(acquire, "attempt")

    def granted(frame: FrameType, event: str, arg: Any) -> bool:
        # As ``attempt`` returns its grant (None), ``taken`` set: the reply said granted.
        return (
            frame.f_code is attempt and event == "return" and arg is None
            and frame.f_locals.get("taken") is True
        )

    codes = {
        acquire,
        code(runner.Driver.run),
        code(runner.Runner.perform),
        code(effects.Background.__init__),
        code(_concurrency.Spawner.spawn),
        code(_concurrency._start),
    }
    n = 0
    outcomes = {"second": 0}
    sems: list[Any] = []
    left: list[str] = []
    while True:
        sem = client.semaphore(f"give-back-{n}")
        assert sem.try_set_permits(2)
        tracer = TwoAlarms(n, granted, codes, Alarm)
        sys.settrace(tracer.trace)
        sys.setprofile(tracer.profile)
        try:
            sem.acquire(2, timeout=5)
        except Alarm:
            pass
        finally:
            sys.settrace(None)
            sys.setprofile(None)
        assert tracer.fired >= 1, "the first alarm never fired"
        # Every permit back: the grant was given back, exactly once (never 4).
        if not wait_until(lambda sem=sem: sem.available_permits() == 2, 2.0):
            left.append(f"place {n} ({tracer.where}): {sem.available_permits()} of 2 back")
        sems.append(sem)
        if tracer.fired < 2:  # no place left after the first alarm
            break
        outcomes["second"] += 1
        n += 1
        assert n < 500
    assert not left, f"{len(left)} of {n + 1} places left permits taken: " + "; ".join(left)
    assert outcomes["second"] >= 10, outcomes
    # And once only: no place gave them back twice (4 of 2).
    time.sleep(0.5)
    assert [s.available_permits() for s in sems] == [2] * len(sems)
    # A flow yielded twice ran once: never twice at a time ("generator already executing").
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []



def test_a_second_interrupt_before_a_locks_reconcile_is_spawned_still_undoes_the_grant(
    make_client: Callable[..., tenure.Client], r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    # The Lock's twin: a grant the caller never learns of is undone by a background
    # reconcile (core/lock.py, _reconcile_later); a second interrupt before it was spawned
    # left the hold on the server (and its reconcile marked pending for good).
    from support.wire import text
    from tenure.core.lock import LockCore

    client = make_client()
    attempt = code(LockCore.attempt)

    def granted(frame: FrameType, event: str, arg: Any) -> bool:
        # As ``attempt`` returns a grant (None): the caller is interrupted right after.
        return frame.f_code is attempt and event == "return" and arg is None

    # The driver's side of the window: from the flow's yield of its Background to the
    # spawn. (The clean-up's own calls before that yield are places too: 10, a few
    # microseconds of straight code in core/lock.py's except block, still open.)
    codes = {
        code(runner.Driver.run),
        code(runner.Runner.perform),
        code(effects.Background.__init__),
        code(_concurrency.Spawner.spawn),
        code(_concurrency._start),
    }
    field = f"{client.client_id}:"
    n, left = 0, []
    while True:
        name = f"reconcile-{n}"
        tracer = TwoAlarms(n, granted, codes, Alarm)
        sys.settrace(tracer.trace)
        sys.setprofile(tracer.profile)
        try:
            client.lock(name).acquire(timeout=5)
        except Alarm:
            pass
        finally:
            sys.settrace(None)
            sys.setprofile(None)
        assert tracer.fired >= 1, "the first alarm never fired"
        if not wait_until(
            lambda name=name: not any(text(f).startswith(field) for f in r.hkeys(name)), 2.0
        ):
            left.append(f"place {n} ({tracer.where})")
        if tracer.fired < 2:
            break
        n += 1
        assert n < 500
    assert not left, f"{len(left)} of {n + 1} places left the hold: " + "; ".join(left)
    assert n >= 10, n
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    ctx = client._runner.ctx
    assert wait_until(lambda: not ctx.reconciling, 3.0), ctx.reconciling  # none stuck
