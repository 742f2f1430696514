# Permit releases with a BackendError (asyncio source of tests/_sync/test_pes_release_errors.py).
"""A PermitExpirableSemaphore release that fails with a BackendError (a timeout, a dropped
connection, the server paused) on a real server: the caller gets the error, and the release
is finished in the background once the server answers (releasing a permit id is
idempotent: sent again, it frees nothing more), as a lock's release is (docs/internals.md,
"Cancellation and interruption").

Before, the permit had left the client's table (nobody renewed it) and stayed out on the
server to its lease end (30 s): every other waiter waited that long. The caller is a task
here and a thread in the generated sync twin (tests/_sync)."""

from __future__ import annotations

import logging
import time

import pytest

import tenure
from support.pauses import Pause, async_sends_waiting, holder_url
from support.proxy import Proxy
from support.twins import async_spawn, async_wait_until
from support.wire import async_kill_the_waiting_script
from tenure import keys

NAME = "pes-release-errors"


def permits_out(r, name: str) -> int:
    """Permits out on the server (the semaphore's timeout ZSET)."""
    return int(r.zcard(keys.permit_timeout_key(name)))


async def taken(client, name: str):
    """A PermitExpirableSemaphore ``name`` of one permit, taken by ``client`` (renewed by
    its watchdog, lease 30 s): the semaphore and the permit id."""
    sem = client.permit_expirable_semaphore(name)
    assert await sem.try_set_permits(1)
    permit = await sem.acquire()
    assert permit is not None
    return sem, permit


async def release(sem, permit: str, strict: bool) -> None:
    if strict:
        await sem.release(permit)
    else:
        await sem.try_release(permit)


@pytest.fixture
async def holder(server):
    """A client with a 0.3 s socket timeout whose connections are named
    `support.pauses.HOLDER`."""
    client = tenure.AsyncClient(holder_url(server.url), socket_timeout=0.3)
    yield client
    await client.close()


@pytest.mark.parametrize("mode", ["ALL", "WRITE"])
@pytest.mark.parametrize("strict", [True, False], ids=["release", "try_release"])
async def test_a_permit_release_that_timed_out_gives_the_permit_back_once_the_server_answers(
    holder, async_make_client, server, r, mode, strict
):
    """The server paused longer than the holder's socket timeout: the release raises
    BackendError, the background sends it again (a send that timed out is dropped with its
    connection, and sent anew), and another client gets the permit within a moment of the
    server answering, not at the lease's end (30 s).

    The server answers again at a moment the test knows: CLIENT UNPAUSE, just after a new
    send of the background's is seen waiting on it. A timed pause ends at the server's
    next cron tick (up to 0.1 s late, hz 10), and at a moment of its own it may find the
    background between two sends (a pause of up to 0.25 s, then a connection made anew):
    each step a wake-up of this process that a loaded host stretches (1.23 s once)."""
    other = async_make_client()
    sem, permit = await taken(holder, NAME)
    waiter = other.permit_expirable_semaphore(NAME)
    assert await waiter.acquire(blocking=False) is None  # its connection made
    pause = Pause(r, server.port, mode)
    try:
        with pytest.raises(tenure.BackendError):
            await release(sem, permit, strict)
        assert sem.valid_for(permit) == 0.0  # out of the hold table: never renewed again
        job = async_spawn(lambda: waiter.acquire(timeout=10))
        # A send waits on the server; the next one, sent once it timed out, is just sent.
        seen = await async_sends_waiting(r, pause)
        await async_sends_waiting(r, pause, besides=seen)
    finally:
        unpaused = pause.end()
    got = await job.result(10)
    waited = time.monotonic() - unpaused
    print(f"{mode}: the permit came back {waited:.3f} s after the server answered again")
    assert got is not None, f"still out: {permits_out(r, NAME)} permit(s)"
    assert waited < 1.0
    await waiter.release(got)
    assert await waiter.available_permits() == 1  # never one more than set


async def test_a_permit_release_whose_connection_dropped_is_finished_once_the_server_answers(
    async_make_client, r
):
    """The release's script waits on a server paused for writes and its connection is
    killed (CLIENT KILL): the script never ran, release raises BackendError, and the
    background sends it again once the server answers."""
    holder = async_make_client()
    other = async_make_client()
    sem, permit = await taken(holder, NAME)
    waiter = other.permit_expirable_semaphore(NAME)
    assert await waiter.acquire(blocking=False) is None
    r.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
    try:
        killer = async_spawn(async_kill_the_waiting_script, r)
        with pytest.raises(tenure.BackendError):
            await sem.release(permit)
        assert await killer.result(5)
        assert permits_out(r, NAME) == 1  # it never ran
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
    unpaused = time.monotonic()
    got = await waiter.acquire(timeout=5)
    waited = time.monotonic() - unpaused
    print(f"the permit came back {waited:.3f} s after the server answered again")
    assert got is not None, f"still out: {permits_out(r, NAME)} permit(s)"
    assert waited < 1.0
    await waiter.release(got)
    assert await waiter.available_permits() == 1


@pytest.fixture
def proxy(server):
    p = Proxy(server.port)
    yield p
    p.close()


async def test_a_permit_release_whose_reply_was_lost_frees_nothing_more(
    async_make_client, proxy, r, caplog
):
    """The release's script runs but its reply is held (a TCP proxy) past the socket
    timeout: BackendError, the permit already back. The background sends it again: a no-op
    (the id is no longer out), never a permit more than set, and a permit taken meanwhile
    by another client stays out."""
    caplog.set_level(logging.INFO, logger="tenure")
    holder = tenure.AsyncClient(proxy.url, socket_timeout=0.3)
    other = async_make_client()
    try:
        sem, permit = await taken(holder, NAME)
        await sem.release(permit)  # the release script now cached: no NOSCRIPT round trip
        permit = await sem.acquire()
        assert permit is not None
        proxy.hold_replies()
        with pytest.raises(tenure.BackendError):
            await sem.release(permit)
        assert permits_out(r, NAME) == 0  # the script ran
        waiter = other.permit_expirable_semaphore(NAME)
        got = await waiter.acquire(timeout=2)
        assert got is not None
        proxy.thaw()
        # The background's release of the old id answers "not out" and frees nothing.
        assert await async_wait_until(lambda: finished(caplog, permit), 3.0), caplog.text
        assert permits_out(r, NAME) == 1
        assert await waiter.available_permits() == 0
        await waiter.release(got)
        assert await waiter.available_permits() == 1
    finally:
        proxy.thaw()
        await holder.close()


def finished(caplog, permit: str) -> bool:
    """The background finished the release of ``permit`` (logged at INFO)."""
    return any(
        permit in record.getMessage() and "cut short" in record.getMessage()
        for record in caplog.records
    )
