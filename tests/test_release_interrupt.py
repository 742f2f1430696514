"""A signal handler's exception at every place of a sync lock release (reviewer R5, S3).

The caller meant to let the lock go once it called ``release()``. An exception landing
before the release's flow reached its own clean-up ``try`` (the front, the observer, the
runner, the driver before the flow's first step, the flow's first instruction, the flow
before it read the owner's count) used to leave the hold in the client's hold table: held
on the server and renewed by the watchdog for ever. Now the runner
(`tenure.sync.runner.Driver.release_by`) starts such a release in the background, and a
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
``release_by``, before their first call: as an interrupt just before the call,
nothing was done (checked: every hold is still held, and releases as usual). (A
``with`` block's exit reaches ``Lock.release`` through tenure.sync.acquiring, whose frames
are not traced here: an interrupt there, before the call, is the caller's too.)

MultiLock (two members) and RedLock (three nodes) alike: their release kept every member
held and renewed at 73 of 213 and 86 of 274 places (the front called the runner directly;
the composite flow forgot the acquisition, then its members' releases began one by one in
the driver, with no clean-up between). Now the front goes through ``release_by`` and the
composite flow releases in the background the members whose release never began
(`tenure.core.composite.CompositeCore.release`); every member must be released and the
acquisition forgotten within 2 s at every place but the entries of the front and of
``release_by``.

asyncio: a cancellation lands only at an ``await``, all after the flow's first step, but
for a task made of the release and cancelled before it ever ran (``create_task``,
``gather``, ``wait_for``): its coroutine never runs. ``release()`` returns an
`tenure.aio.runner.AsyncReleasing`, which then runs the release in the background (a
MultiLock's and a RedLock's too).
"""

from __future__ import annotations

import asyncio
import dis
import functools
import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import pytest
import redis

import tenure
import tenure.core.composite
import tenure.core.fair
import tenure.core.holds
import tenure.core.lock
import tenure.core.rwlock
import tenure.observe
import tenure.sync.composite
import tenure.sync.fair
import tenure.sync.lock
import tenure.sync.runner
import tenure.sync.rwlock
from support.servers import Server
from support.signals import codes_of
from support.twins import async_wait_until, wait_until


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


AFTER = {"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RESUME"}
"""Instructions after which CPython 3.11+ may run a pending signal handler."""

# One server (speed); a long fault run: deselected by default, run by .ci/run (`pytest -m long`).
pytestmark = [pytest.mark.parametrize("server", ["valkey"], indirect=True), pytest.mark.long]

FRONTS = {"Lock.release", "MultiLock.release", "RedLock.release"}
"""The fronts: an interrupt as they begin (``start``) is one just before the call; as the
runner's ``release_by`` begins, too."""


def entry(where: str) -> bool:
    """An interrupt as a front or the runner's ``release_by`` begins: the caller's."""
    frame, _, place = where.partition(":")
    return place.endswith(" start") and (
        frame in FRONTS or frame.rpartition(".")[2] == "release_by"
    )


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


@functools.cache
def handler_at(code: CodeType) -> dict[int, int | None]:
    """Offset -> the exception handler covering it in ``code`` (None: none)."""
    entries = dis.Bytecode(code).exception_entries  # type: ignore[attr-defined]
    return {
        i.offset: next((e.target for e in entries if e.start <= i.offset < e.end), None)
        for i in dis.get_instructions(code)
    }


def alarm_at(n: int, codes: set[CodeType] = CODES) -> tuple[Callable[..., Any], list[int]]:
    """`raising_at_place`'s tracer over ``codes`` (with ``at_start``: a frame's start or
    resumption is a place, its ``RESUME``), but for its artefacts: it raises at the
    instruction after a call, where CPython raises at the call itself (its pending-signal
    check ends the call), so a place whose two instructions have different exception
    handlers (a ``return`` inside ``with``: the ``with`` ends after the call) is skipped."""
    handlers = {code: handler_at(code) for code in codes}
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
        if entry(where):
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
    assert len(entries) <= 2, entries
    assert kept == [], f"{len(kept)} of {n} places: {kept}"


COMPOSITE_CODES = codes_of(
    tenure.sync.composite,
    tenure.sync.runner,
    tenure.observe,
    tenure.core.composite,
    tenure.core.lock,
    tenure.core.holds,
)


def members_held(composite: Any) -> list[tuple[int, int]]:
    """Each member's holds by the caller: (on its server, in its client's hold table)."""
    out = []
    for member in composite.members:
        owner = member.runner.owner()
        out.append((member.hold_count(), int(member.core._recorded(owner))))
    return out


def forget_everything(composite: Any) -> None:
    """Stop renewing every member hold of the caller, free them and the acquisition."""
    composite.core.forget(composite.runner.owners())
    for member in composite.members:
        core, runner = member.core, member.runner
        runner.ctx.holds.discard(core.key, core.field(runner.owner()))
        member.force_release()


@pytest.mark.parametrize("kind", ["multi", "red"])
def test_a_signal_anywhere_in_a_composite_release_still_releases_every_member(
    make_client: Callable[..., tenure.Client], r: redis.Redis, nodes: list[Server], kind: str
) -> None:
    # MultiLock: two members on one server; RedLock: three nodes. Every member released
    # (none left on a server nor in a hold table) and the acquisition forgotten, at every
    # place but the entries of the front and of release_by (nothing done: all held).
    if kind == "multi":
        clients = [make_client()]
        servers = 2 * clients
    else:
        clients = [tenure.Client(s.url, socket_timeout=1.0) for s in nodes[:3]]
        servers = clients
    kept: list[str] = []
    entries: list[str] = []
    n = 0
    try:
        while True:
            name = f"composite-release-{kind}-{n}"
            locks = [c.lock(f"{name}-{i}") for i, c in enumerate(servers)]
            composite: Any = (
                clients[0].multi_lock(*locks) if kind == "multi" else clients[0].red_lock(*locks)
            )
            assert composite.acquire(timeout=5)
            if kind == "red":  # the members still answering count too: every one held
                assert wait_until(lambda c=composite: members_held(c) == [(1, 1)] * 3, 2.0)
            owners = composite.runner.owners()
            tracer, seen = alarm_at(n, COMPOSITE_CODES)
            where = ""
            sys.settrace(tracer)
            try:
                composite.release()
            except Alarm as alarm:
                where = alarm.args[0]
            finally:
                sys.settrace(None)
            every = len(locks)
            if seen[0] <= n:  # no place left: the release ran through
                assert where == ""
                assert members_held(composite) == [(0, 0)] * every
                break
            assert where, f"place {n}: the caller did not get the interrupt"
            if entry(where):
                # Before the first call: nothing was done, the caller still holds every member.
                entries.append(where)
                assert members_held(composite) == [(1, 1)] * every
                assert composite.core.current(owners) is not None
                composite.release()
            elif not wait_until(
                lambda c=composite, o=owners, k=every: (
                    members_held(c) == [(0, 0)] * k and c.core.current(o) is None
                ),
                2.0,
            ):
                kept.append(
                    f"place {n} ({where}): members {members_held(composite)}, "
                    f"acquisition {'kept' if composite.core.current(owners) else 'forgotten'}"
                )
                forget_everything(composite)
            assert members_held(composite) == [(0, 0)] * every
            composite.close()
            n += 1
    finally:
        if kind == "red":
            for c in clients:
                c.close()
    assert n >= 40, n  # the release was traced
    assert len(entries) <= 2, entries
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


async def cancelled_before_it_ran(release: Callable[[], Any], form: str) -> None:
    """Make a task of ``release()`` in ``form`` and cancel it before the release ran."""
    if form == "task":
        task: Any = asyncio.ensure_future(release())
        task.cancel()
    elif form == "gather":
        task = asyncio.gather(release())  # its child task is made at once
        task.cancel()
    else:  # no time at all: wait_for cancels the release's task before it ran (3.11)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(release(), 0)
        return
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("form", ["task", "gather", "wait_for"])
@pytest.mark.parametrize("kind", ["multi", "red"])
async def test_a_composite_release_task_cancelled_before_it_ran_still_releases(
    async_make_client: Callable[..., tenure.AsyncClient],
    r: redis.Redis,
    nodes: list[Server],
    kind: str,
    form: str,
) -> None:
    # A MultiLock held twice (reentrant): one acquisition is released, one hold of each
    # member left; a RedLock on three nodes: every member released.
    if kind == "multi":
        clients = [async_make_client()]
        locks = [clients[0].lock(f"composite-cancelled-{form}-{i}") for i in range(2)]
        composite: Any = clients[0].multi_lock(*locks)
        holds, raws = 2, [r, r]
    else:
        clients = [tenure.AsyncClient(s.url, socket_timeout=1.0) for s in nodes[:3]]
        locks = [c.lock(f"composite-cancelled-{form}") for c in clients]
        composite = clients[0].red_lock(*locks)
        holds, raws = 1, [s.client() for s in nodes[:3]]
    try:
        for _ in range(holds):
            assert await composite.acquire(timeout=5)
        owners = composite.runner.owners()

        def members() -> list[tuple[int, int]]:
            """Each member's holds by the caller: (on its server, in its hold table)."""
            return [
                (int(raw.hget(m.core.key, m.core.field(o)) or 0), int(m.core._recorded(o)))
                for m, o, raw in zip(locks, owners, raws, strict=True)
            ]

        def all_held(count: int) -> bool:
            return members() == [(count, count)] * len(locks)

        assert await async_wait_until(lambda: all_held(holds), 2.0)  # a RedLock's late ones
        await cancelled_before_it_ran(composite.release, form)
        assert await async_wait_until(lambda: all_held(holds - 1), 2.0), members()
        if holds > 1:
            await composite.release()  # the acquisition left releases, and frees every member
            assert members() == [(0, 0)] * len(locks)
        assert composite.core.current(owners) is None
    finally:
        composite.close()
        if kind == "red":
            for c, raw in zip(clients, raws, strict=True):
                await c.close()
                raw.close()
