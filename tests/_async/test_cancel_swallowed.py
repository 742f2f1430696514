# A cancellation redis-py absorbs (asyncio source of tests/_sync/test_cancel_swallowed.py).
"""A cancellation absorbed under the driver still stops the flow (``AsyncDriver.run``).

On Python 3.11, ``asyncio.wait_for`` (which redis-py writes through when a socket timeout is
set) returns the inner write's result when the caller is cancelled after that write ended
and before the caller ran again: the cancellation is absorbed, ``task.cancelling()`` stays
raised, and the I/O returns as if nothing happened. A tenure call then went on: an acquire
cancelled that way returned True, and a worker ``while True: async with lock: ...``
cancelled once ran on for good. Here the race is forced: at the chosen write of a lock's
acquire or release (a reconnect's handshake included), the writer's caller is cancelled in
the very loop step the write ends, which is what the race needs. The caller must get the
cancellation, and no hold may be left (on the server nor in the client's table).

asyncio only: a thread cannot be cancelled from outside (the sync twin skips).
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest
import redis.asyncio.connection

from support.twins import async_is_asyncio, async_spawn

WRITES = 6
"""Writes swept per call: a reconnect's handshake (4 with redis-py 8), and more. tenure
writes its own commands and scripts without ``wait_for`` (``tenure._redis``), so a
handshake is where redis-py's absorbs a cancellation."""

_target: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "_target", default=None
)


@pytest.fixture
def cancel_at_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each write by a task whose ``_target`` is ``[task, n]`` counts ``n`` down, and at 0
    cancels ``task`` in the loop step after the write's (a write into an empty buffer ends
    in its first step): redis-py's ``wait_for`` runs the write in a task of its own, with
    the caller's context, and the caller is then cancelled with the write done."""
    write = redis.asyncio.connection.AbstractConnection._send_packed_command

    async def counted(self: Any, command: Any) -> Any:
        target = _target.get()
        if target is not None:
            target[1] -= 1
            if target[1] == 0:
                asyncio.get_running_loop().call_soon(target[0].cancel)
        return await write(self, command)

    monkeypatch.setattr(
        redis.asyncio.connection.AbstractConnection, "_send_packed_command", counted
    )


async def _cut(call: Any, write: int) -> tuple[bool, Any]:
    """Run ``call()`` in a task cancelled at its ``write``-th write: (cancelled, outcome)."""
    target: list[Any] = [None, write]

    async def body() -> Any:
        _target.set(target)
        return await call()

    job = async_spawn(body)
    assert hasattr(job, "task")  # an asyncio job (the tests skip in threads)
    target[0] = job.task
    ended = await job.join(5)
    if not ended:  # the cancellation was lost: stop it now, then fail
        job.task.cancel()
        await job.join(5)
    assert ended, "the call did not end: the cancellation was lost"
    return target[1] <= 0, await job.outcome(0)


async def _dropped(client: Any) -> None:
    """Drop the client's sockets: the next call connects again (its handshake's writes)."""
    await client.redis.connection_pool.disconnect()


@pytest.mark.parametrize("write", range(1, WRITES + 1))
async def test_an_acquire_cancelled_at_a_write_stops_and_holds_nothing(
    async_make_client, r, cancel_at_write, write
):
    if not async_is_asyncio:
        pytest.skip("a thread cannot be cancelled from outside (asyncio only)")
    client = async_make_client()
    lock = client.lock("swallowed-acquire")
    assert await client.lock("warm").acquire()  # scripts loaded; the sweep below reconnects
    await _dropped(client)
    fired, outcome = await _cut(lambda: lock.acquire(), write)
    if not fired:
        assert outcome is True  # fewer writes than that: nothing cancelled
        return
    assert isinstance(outcome, asyncio.CancelledError), f"cancelled, yet got {outcome!r}"
    assert not client._runner.ctx.holds.counts("swallowed-acquire"), "left in the table"
    other = async_make_client().lock("swallowed-acquire")
    assert await other.acquire(timeout=5), "the cancelled acquire's grant was left"


@pytest.mark.parametrize("write", range(1, WRITES + 1))
async def test_a_release_cancelled_at_a_write_stops_and_still_releases(
    async_make_client, cancel_at_write, write
):
    if not async_is_asyncio:
        pytest.skip("a thread cannot be cancelled from outside (asyncio only)")
    client = async_make_client()
    lock = client.lock("swallowed-release")
    assert await lock.acquire()
    await _dropped(client)
    release = lock.release()  # the owner is fixed at the call: this task's
    fired, outcome = await _cut(lambda: release, write)
    if fired:
        assert isinstance(outcome, asyncio.CancelledError), f"cancelled, yet got {outcome!r}"
    else:
        assert outcome is None
    assert not client._runner.ctx.holds.counts("swallowed-release"), "left in the table"
    other = async_make_client().lock("swallowed-release")
    assert await other.acquire(timeout=5), "the release was not finished"


@pytest.mark.parametrize("write", range(1, 2 * WRITES + 1))
async def test_a_lock_loop_cancelled_once_stops(async_make_client, cancel_at_write, write):
    """A worker ``while True: async with lock: ...`` cancelled once, at any write of its
    first rounds, stops, and leaves the lock free. Its holder drops the client's sockets,
    so that its acquire and its release each connect again (a cancellation that drops a
    socket mid-call does the same)."""
    if not async_is_asyncio:
        pytest.skip("a thread cannot be cancelled from outside (asyncio only)")
    client = async_make_client()
    lock = client.lock("swallowed-loop")
    assert await lock.acquire()
    await lock.release()
    await _dropped(client)

    async def worker() -> None:
        while True:
            async with lock:
                await _dropped(client)

    fired, outcome = await _cut(worker, write)
    assert fired
    assert isinstance(outcome, asyncio.CancelledError), f"cancelled, yet got {outcome!r}"
    assert not client._runner.ctx.holds.counts("swallowed-loop"), "left in the table"
    other = async_make_client().lock("swallowed-loop")
    assert await other.acquire(timeout=5), "the worker left the lock held"
