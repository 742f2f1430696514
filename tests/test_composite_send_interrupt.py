"""A signal handler's exception at every place of the composite driver's round (sync).

``CompositeRunner._together`` sends every member's script, then reads every reply. An
exception a handler raised in a member's ``send`` once its script was written (a
``BaseException``: ``except Exception`` let it through) went to the ``finally``, which
handed the member's flow on with its effect still to do: the script went a second time. A
MultiLock held twice (reentrant) then lost both holds of that member (2 of 42 places). One
raised right after (its reply not read yet), or as ``receive`` began, left that connection
out of the pool for good (4 more places).

Deterministic: a tracer raises ``Alarm`` at the n-th place in ``_together`` and in the
backend's ``send`` where a signal handler could run, one run per place, as a MultiLock held
twice releases once. At each place the caller gets the ``Alarm``; within 2 s every member
must be held once, on its server and in the hold table alike, no connection may be left
out of the pool (but the backend's spares), and the last release must free every member.
"""

from __future__ import annotations

import dis
import functools
import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import pytest
import redis

import tenure
from support.twins import wait_until
from tenure.sync.backend import Backend
from tenure.sync.runner import CompositeRunner

# One server (speed): the driver's round is the same on both.
pytestmark = pytest.mark.parametrize("server", ["valkey"], indirect=True)

AFTER = {"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
"""Instructions after which CPython 3.11+ may run a pending signal handler."""

CODES = {CompositeRunner._together.__code__, Backend.send.__code__}
"""The round, and the backend's send of one member's script."""


class Alarm(BaseException):
    """What the stand-in for a signal handler raises (as KeyboardInterrupt, no Exception)."""


@functools.cache
def handler_at(code: CodeType) -> dict[int, int | None]:
    """Offset -> the exception handler covering it in ``code`` (None: none)."""
    entries = dis.Bytecode(code).exception_entries  # type: ignore[attr-defined]
    return {
        i.offset: next((e.target for e in entries if e.start <= i.offset < e.end), None)
        for i in dis.get_instructions(code)
    }


def alarm_at(n: int) -> tuple[Callable[..., Any], list[int]]:
    """A `sys.settrace` tracer raising ``Alarm`` at the n-th place (from 0) in ``CODES``
    where CPython 3.11 may run a pending signal handler, and a list whose one item counts the
    places seen. The places: the instruction after one of ``AFTER`` where both have the same
    exception handler (a handler's exception comes at the call itself, which the tracer
    cannot do), but not after a call of a Python function: CPython runs that function's
    frame inline and checks for signals as it begins, not after it returned (a handler
    raising in a loop ``x = f()`` lands in ``f`` or at the jump back, never between the
    return and the store); where it begins is the callee's place, counted here too."""
    seen = [0]
    inline: set[int] = set()  # ids of the frames whose last instruction called a Python function

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        caller = frame.f_back
        if event == "call" and caller is not None and caller.f_code in CODES:
            inline.add(id(caller))
            seen[0] += 1  # the callee begins: its place
            if seen[0] == n + 1:
                raise Alarm(f"{code.co_name} begins, from {caller.f_code.co_name}")
        if code not in CODES:
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        handlers = handler_at(code)
        names = {i.offset: i.opname for i in dis.get_instructions(code)}
        last = [-1]

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                before, at = last[0], frame.f_lasti
                last[0] = at
                opname = names.get(before, "")
                called = id(frame) in inline
                inline.discard(id(frame))
                if opname in AFTER and handlers[before] == handlers.get(at) and not called:
                    seen[0] += 1
                    if seen[0] == n + 1:
                        where = f"{code.co_name}:{frame.f_lineno} after {opname}"
                        raise Alarm(where)
            return local

        return local

    return tracer, seen


def lent(client: tenure.Client) -> set[Any]:
    """The client's connections out of its pool but for the backend's spares."""
    backend = client._runner.backend
    redis_client: Any = client.redis
    pool = redis_client.connection_pool
    return set(pool._get_in_use_connections()) - set(backend.spare)


def test_a_signal_anywhere_in_a_composite_round_keeps_every_hold_and_connection(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    bad: list[str] = []
    n = 0
    while True:
        client = make_client()  # a pool of its own: a connection lost here is seen here
        locks = [client.lock(f"composite-send-{n}-{i}") for i in range(2)]
        composite: Any = client.multi_lock(*locks)
        assert composite.acquire(timeout=5)
        assert composite.acquire(timeout=5)  # held twice: each member's count is 2
        owner = client._runner.owner()

        def members(ls: list[Any] = locks, o: str = owner) -> list[tuple[int, int]]:
            """Each member's holds: (on the server, in the hold table)."""
            return [
                (int(r.hget(m.core.key, m.core.field(o)) or 0), m.core._recorded(o)) for m in ls
            ]

        assert members() == [(2, 2), (2, 2)]
        tracer, seen = alarm_at(n)
        where = ""
        sys.settrace(tracer)
        try:
            composite.release()
        except Alarm as alarm:
            where = alarm.args[0]
        finally:
            sys.settrace(None)
        if seen[0] <= n:  # no place left: the release ran through
            assert where == ""
            assert members() == [(1, 1), (1, 1)]
            composite.release()
            break
        assert where, f"place {n}: the caller did not get the interrupt"
        if not wait_until(lambda c=client: members() == [(1, 1), (1, 1)] and not lent(c), 2.0):
            bad.append(f"place {n} ({where}): members {members()}, lent {len(lent(client))}")
        else:
            composite.release()  # the acquisition left
            if members() != [(0, 0), (0, 0)]:
                bad.append(f"place {n} ({where}): after the last release {members()}")
        for lock in locks:  # whatever this place left
            lock.force_release()
            lock.core.ctx.holds.discard(lock.core.key, lock.core.field(owner))
        composite.close()
        client.close()
        n += 1
    assert n >= 10, n  # the round was traced
    assert bad == [], f"{len(bad)} of {n} places: {bad}"
