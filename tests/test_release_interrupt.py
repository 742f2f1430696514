"""A signal handler's exception at every place of a sync lock release (reviewer R5, S3).

The caller meant to let the lock go once it called ``release()``. An exception landing
before the release's flow reached its own clean-up ``try`` (the front, the observer, the
runner, the driver before the flow's first step, the flow's first instruction, the flow
before it read the owner's count) used to leave the hold in the client's hold table: held
on the server and renewed by the watchdog for ever. Now the runner
(`tenure.sync.runner.Runner.release_by`) starts such a release in the background, and a
flow that began finishes it itself (docs/internals.md, "Cancellation and interruption").

Deterministic: a tracer raises ``Alarm`` at the n-th place where a signal handler could run
(see ``AFTER``) in the release's code (the front, the runner and its driver, the observer,
the lock cores, the hold table), one run per place, on Lock, FairLock and both sides of a
ReadWriteLock, with one hold and with two (reentrant). (FairLock's release wrapped the
Lock's, and an interrupt between the two kept the hold at 3 of 83 places: it now adds its
step through the `after_release()` hook.) At each place the caller must get the
``Alarm``; within 2 s the server and the hold table must keep exactly the holds beyond the
one released (none: the lock is free and nothing renews it), and releasing those must work.
The places left to the caller: the entry of the front (``Lock.release``) and of
``Runner.release_by``, before their first call: as an interrupt just before the call,
nothing was done (checked: every hold is still held, and releases as usual). (A
``with`` block's exit reaches ``Lock.release`` through tenure.sync.acquiring, whose frames
are not traced here: an interrupt there, before the call, is the caller's too.)

asyncio: a cancellation lands only at an ``await``, all after the flow's first step, but
for a task made of the release and cancelled before it ever ran (``create_task``,
``gather``, ``wait_for``): its coroutine never runs. ``release()`` returns an
`tenure.aio.runner.AsyncReleasing`, which then runs the release in the background.
"""

from __future__ import annotations

import asyncio
import dis
import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import pytest
import redis

import tenure
import tenure.core.fair
import tenure.core.holds
import tenure.core.lock
import tenure.core.rwlock
import tenure.observe
import tenure.sync.fair
import tenure.sync.lock
import tenure.sync.runner
import tenure.sync.rwlock
from support.signals import codes_of
from support.twins import async_wait_until, wait_until


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


AFTER = {"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RESUME"}
"""Instructions after which CPython 3.11+ may run a pending signal handler."""

pytestmark = pytest.mark.parametrize("server", ["valkey"], indirect=True)  # one server: speed

ENTRIES = {"Lock.release", "Runner.release_by"}
"""The outermost frames: an interrupt as they begin (``start``) is one just before the call."""


CODES = codes_of(
    tenure.sync.lock,
    tenure.sync.fair,
    tenure.sync.rwlock,
    tenure.sync.runner,
    tenure.observe,
    tenure.core.lock,
    tenure.core.fair,
    tenure.core.rwlock,
    tenure.core.holds,
)


def handler_at(code: CodeType) -> dict[int, int | None]:
    """Offset -> the exception handler covering it in ``code`` (None: none)."""
    entries = dis.Bytecode(code).exception_entries  # type: ignore[attr-defined]
    return {
        i.offset: next((e.target for e in entries if e.start <= i.offset < e.end), None)
        for i in dis.get_instructions(code)
    }


def alarm_at(n: int) -> tuple[Callable[..., Any], list[int]]:
    """`raising_at_place`'s tracer over ``CODES`` (with ``at_start``: a frame's start or
    resumption is a place, its ``RESUME``), but for its artefacts: it raises at the
    instruction after a call, where CPython raises at the call itself (its pending-signal
    check ends the call), so a place whose two instructions have different exception
    handlers (a ``return`` inside ``with``: the ``with`` ends after the call) is skipped."""
    handlers = {code: handler_at(code) for code in CODES}
    seen = [0]

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code not in handlers:
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        names = {i.offset: i.opname for i in dis.get_instructions(code)}
        last = [-1]
        seen[0] += 1  # as the frame begins or resumes (its RESUME)
        if seen[0] == n + 1:
            raise Alarm(f"{code.co_qualname}:{frame.f_lineno} start", None)

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                before, at = last[0], frame.f_lasti
                last[0] = at
                opname = names.get(before, "")
                if opname in AFTER and handlers[code][before] == handlers[code].get(at):
                    seen[0] += 1
                    if seen[0] == n + 1:
                        where = f"{code.co_qualname}:{frame.f_lineno} after {opname}"
                        raise Alarm(where, names.get(at))
            return local

        return local

    return tracer, seen


def side(client: tenure.Client, kind: str, name: str) -> tenure.Lock:
    if kind == "lock":
        return client.lock(name)
    if kind == "fair":
        return client.fair_lock(name)
    rw = client.read_write_lock(name)
    return rw.read_lock() if kind == "read" else rw.write_lock()


def recorded(client: tenure.Client, lock: tenure.Lock) -> int:
    """The caller's holds of ``lock`` in the client's hold table (what the watchdog renews)."""
    core: Any = lock.core
    return int(core._recorded(client._runner.owner()))


@pytest.mark.parametrize("holds", [1, 2], ids=["once", "reentrant"])
@pytest.mark.parametrize("kind", ["lock", "fair", "read", "write"])
def test_a_signal_anywhere_in_a_release_still_releases_one_hold(
    make_client: Callable[..., tenure.Client], r: redis.Redis, kind: str, holds: int
) -> None:
    client = make_client()
    kept: list[str] = []
    entries: list[str] = []
    left = holds - 1
    n = 0
    while True:
        name = f"release-interrupt-{kind}-{holds}-{n}"
        lock = side(client, kind, name)
        for _ in range(holds):
            assert lock.acquire(timeout=5)
        tracer, seen = alarm_at(n)
        where = ""
        sys.settrace(tracer)
        try:
            lock.release()
        except Alarm as alarm:
            where = alarm.args[0]
        finally:
            sys.settrace(None)
        if seen[0] <= n:  # no place left: the release ran through
            assert where == ""
            assert lock.hold_count() == left
            for _ in range(left):
                lock.release()
            break
        assert where, f"place {n}: the caller did not get the interrupt"
        if where.split(":")[0] in ENTRIES and where.endswith(" start"):
            # Before the first call: nothing was done, the caller still holds every hold.
            entries.append(where)
            assert lock.hold_count() == holds == recorded(client, lock)
            for _ in range(holds):
                lock.release()
        else:
            if not wait_until(
                lambda lock=lock: lock.hold_count() == left == recorded(client, lock), 2.0
            ):
                kept.append(
                    f"place {n} ({where}): server {lock.hold_count()}, "
                    f"table {recorded(client, lock)}, wanted {left}"
                )
                core: Any = lock.core  # stop renewing it, and free it for the next place
                client._runner.ctx.holds.discard(core.key, core.field(client._runner.owner()))
                r.delete(name)
            else:
                for _ in range(left):  # exactly ``left`` holds are left: each releases
                    lock.release()
        assert r.exists(name) == 0, f"place {n} ({where}): {r.hgetall(name)!r}"
        n += 1
    assert n >= 40, n  # the release was traced
    assert len(entries) <= len(ENTRIES), entries
    assert kept == [], f"{len(kept)} of {n} places: {kept}"


ASYNC_KINDS = ["lock", "read", "write", "semaphore", "permit"]


@pytest.mark.parametrize("kind", ASYNC_KINDS)
async def test_a_release_task_cancelled_before_it_ran_still_releases(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis, kind: str
) -> None:
    # asyncio: a cancellation lands only at an await, all after the flow's first step, but
    # for a task made of the release and cancelled before it ran (create_task, gather,
    # wait_for): its coroutine never runs. The caller called release(): it still happens.
    client = async_make_client()
    name = f"release-cancelled-{kind}"
    holds = 1 if kind in ("semaphore", "permit") else 2
    release: Callable[[], Any]
    if kind == "semaphore":
        sem = client.semaphore(name)
        assert await sem.try_set_permits(1)
        assert await sem.acquire()
        release = sem.release
        def released() -> bool:
            return bool(r.get(name) == b"1")
    elif kind == "permit":
        psem = client.permit_expirable_semaphore(name)
        assert await psem.try_set_permits(1)
        permit = await psem.acquire()
        assert permit is not None
        release = lambda: psem.release(permit)  # noqa: E731
        def released() -> bool:
            return bool(r.get(name) == b"1") and psem.valid_for(permit) == 0.0
    else:
        rw = client.read_write_lock(name)
        lock: Any = client.lock(name) if kind == "lock" else (
            rw.read_lock() if kind == "read" else rw.write_lock()
        )
        for _ in range(holds):
            assert await lock.acquire(timeout=5)
        owner = client._runner.owner()
        release = lock.release
        def released() -> bool:  # exactly one hold left, on the server and in the table
            field = lock.core.field(owner)
            table = lock.core._recorded(owner)
            return bool(r.hget(name, field) == b"1") and table == 1
    task = asyncio.ensure_future(release())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await async_wait_until(released, 2.0), kind
    if kind not in ("semaphore", "permit"):
        await lock.release()  # the one hold left releases, and frees the lock
        assert r.exists(name) == 0
