# Re-entry after a loss (asyncio source of tests/_sync/test_reentry_after_loss.py).
"""A re-entry after the hold was lost on the server reports the loss (reviewer R8, F1).

The caller holds a lock; its hold goes on the server (``PEXPIRE 1`` stands in for a lease
run out during a pause, a failover, a FLUSH or a force-release) while its client still counts
it valid, up to the next renewal. Another client takes the lock. The caller then acquires
again: a re-entry for its client. The acquire script once granted a fresh hold, which the
client counted as a second one: the inner release freed the lock under the outer body, and
the loss was never reported (two holders, ``lost`` False, no ``on_lost``). Now the attempt
tells the script it expects a re-entry: the script grants only on top of a hold the server
still has, the acquire raises LockLostError and takes nothing, and the loss is reported as
the watchdog would (``lost``, ``on_lost``, the outer scope cancelled).

The watchdog lease is 30 s (a renewal every 10 s): the loss is found by the re-entry, not by
a renewal.

The caller is a task here and a thread in the generated sync twin (tests/_sync).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

import tenure
from support.twins import async_wait_until
from tenure import _redis
from tenure.aio import backend as backend_module

KINDS = ["lock", "fair", "fenced", "spin", "read", "write"]


def make_lock(client: Any, kind: str, name: str, **kwargs: Any) -> Any:
    if kind == "lock":
        return client.lock(name, **kwargs)
    if kind == "fair":
        return client.fair_lock(name, **kwargs)
    if kind == "fenced":
        return client.fenced_lock(name, **kwargs)
    if kind == "spin":
        return client.spin_lock(name, **kwargs)
    rw = client.read_write_lock(name, **kwargs)
    return rw.read_lock() if kind == "read" else rw.write_lock()


def other(client: Any, kind: str, name: str) -> Any:
    """Another client's lock that excludes ``kind``'s holder (a read hold: the write side)."""
    return make_lock(client, "write" if kind == "read" else kind, name)


def fields(r: redis.Redis, name: str) -> set[Any]:
    """The holders' fields of the lock hash (a ReadWriteLock's ``mode`` left out)."""
    return set(r.hkeys(name)) - {b"mode"}


async def lose(r: redis.Redis, name: str) -> None:
    """The hold goes on the server, unknown to its client."""
    r.pexpire(name, 1)
    await async_wait_until(lambda: not r.exists(name), timeout=2)


@pytest.fixture(autouse=True)
def _quiet_fencing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENURE_ACCEPT_NO_PERSISTENCE", "1")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("blocking", [False, True])
async def test_a_reentry_after_a_loss_reports_it_and_takes_nothing(
    async_make_client, r, kind, blocking
):
    a, b = async_make_client(), async_make_client()
    told: list[Any] = []
    name = f"reentry-{kind}-{blocking}"
    la = make_lock(a, kind, name, on_lost=told.append)
    assert await la.acquire()
    mine = fields(r, name)
    await lose(r, name)
    lb = other(b, kind, name)
    assert await lb.acquire(blocking=False)
    # Before: granted at once when free (a fresh hold counted as 2), or waited behind B.
    with pytest.raises(tenure.LockLostError, match="earlier hold on this lock was lost"):
        await la.acquire(blocking=blocking, timeout=5 if blocking else None)
    assert la.lost
    await async_wait_until(lambda: len(told) == 1, timeout=5)
    assert told == [la]
    assert not fields(r, name) & mine  # nothing was taken for A
    assert await lb.owned()
    await lb.release()
    # The loss reported, another client takes the lock; A's client holds nothing.
    lc = other(b, kind, name)
    assert await lc.acquire(blocking=False)
    with pytest.raises(tenure.LockLostError):
        await la.release()  # the outer hold's release says it was lost
    with pytest.raises(tenure.NotOwnedError) as caught:
        await la.release()
    assert type(caught.value) is tenure.NotOwnedError
    assert await lc.owned()
    await lc.release()
    assert len(told) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_free_lock_is_not_taken_by_a_reentry_after_a_loss(async_make_client, r, kind):
    """Nobody took the lock meanwhile: the re-entry still takes nothing (the caller's outer
    body is no longer protected, and must hear so), and the lock stays free."""
    a = async_make_client()
    name = f"reentry-free-{kind}"
    la = make_lock(a, kind, name)
    assert await la.acquire()
    await lose(r, name)
    with pytest.raises(tenure.LockLostError):
        await la.acquire(blocking=False)  # before: True, hold count 2 on the client
    assert la.lost
    assert not r.exists(name)
    assert await la.acquire(blocking=False)  # a new acquire after the loss is a fresh hold
    assert not la.lost
    await la.release()
    assert not r.exists(name)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_nested_block_after_a_loss_ends_the_outer_one(async_make_client, r, kind):
    """``async with lock:`` nested in another on the same lock: the inner block raises
    LockLostError instead of entering, and the outer block ends with it (its body, in
    asyncio, cancelled). No other client is let in while the outer body believes it holds,
    without that body being told."""
    a, b = async_make_client(), async_make_client()
    told: list[Any] = []
    name = f"reentry-nested-{kind}"
    la = make_lock(a, kind, name, on_lost=told.append)
    events: list[str] = []
    error: BaseException | None = None
    try:
        async with la:
            await lose(r, name)
            lb = other(b, kind, name)
            assert await lb.acquire(blocking=False)
            await lb.release()
            async with la:
                events.append("inner entered")  # before: entered, hold count 2
            events.append("outer ran on")  # before: ran on while C could take the lock
    except BaseException as failure:
        error = failure
    assert isinstance(error, tenure.LockLostError), repr(error)
    assert events == []
    assert la.lost
    await async_wait_until(lambda: len(told) == 1, timeout=5)
    assert not r.exists(name)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_release_finding_fewer_holds_than_counted_reports_the_loss(
    async_make_client, r, kind
):
    """The other direction: a release freed the lock while the client counted more holds
    (the server's count went down unseen: ``HSET`` of the count stands in for a failover to
    a replica that missed a re-entry). The holds left are lost: reported, not forgotten
    quietly (before: ``lost`` False, no ``on_lost``, the next release NotOwnedError)."""
    a = async_make_client()
    told: list[Any] = []
    name = f"release-fewer-{kind}"
    la = make_lock(a, kind, name, on_lost=told.append)
    assert await la.acquire()
    assert await la.acquire()
    (field,) = fields(r, name)
    r.hset(name, field, 1)
    await la.release()  # the server's last hold: the lock is free
    assert not r.exists(name)
    assert la.lost
    await async_wait_until(lambda: len(told) == 1, timeout=5)
    with pytest.raises(tenure.LockLostError):
        await la.release()


@pytest.mark.parametrize("kind", ["lock", "fair", "fenced", "spin"])
async def test_a_reentry_with_a_shorter_lease_narrows_the_hold_until_its_reply(
    async_make_client, r, monkeypatch, kind
):
    """A re-entry's grant sets the lock's expiry to the re-entry's lease (Redisson's
    ``PEXPIRE``), which may end long before the outer hold's. Its owner reads the reply
    late (a pause, a GC): the key expires meanwhile and another client takes the lock. Until
    that reply, the owner must not count its hold valid for the rest of the outer lease
    (before: 29.9 s left while B held the lock; found by the simulator, seed 10 with
    ``--rwlocks 2 --drops 2``). A ReadWriteLock's re-entry never shortens the expiry: the
    next test."""
    a, b = async_make_client(), async_make_client()
    name = f"reentry-shorter-{kind}"
    la = make_lock(a, kind, name)
    assert await la.acquire()  # the watchdog's lease: 30 s
    believed: list[float] = []
    send = _redis.async_send_command  # how a call with no settle sends its script

    async def late(conn: Any, *args: Any) -> None:
        await send(conn, *args)
        if args[:1] == ("EVALSHA",) and name in args and 200 in args and not believed:
            # The re-entry is on its way: its reply is read once this returns. The key
            # expires 0.2 s after the script ran; another client takes the lock.
            assert await async_wait_until(lambda: not r.exists(name), timeout=5)
            assert await other(b, kind, name).acquire(blocking=False)
            believed.append(la.valid_for())

    monkeypatch.setattr(backend_module, "async_send_command", late)
    outcome: Any
    try:
        outcome = await la.acquire(timeout=0.1, lease_time=0.2)
    except tenure.LockError as error:
        outcome = error
    assert believed == [0.0]
    # B holds the lock: the late grant was undone and the wait ran out, or the retry, a
    # re-entry still, heard the hold was gone. Either way the loss is reported.
    assert outcome is False or isinstance(outcome, tenure.LockLostError), repr(outcome)
    assert await async_wait_until(lambda: la.lost, timeout=5)


@pytest.mark.parametrize("kind", ["read", "write"])
async def test_a_read_write_reentry_with_a_shorter_lease_leaves_the_hold_its_lease(
    async_make_client, r, kind
):
    """A ReadWriteLock's re-entry never shortens the hash's expiry (a read keeps the longer
    one, a write adds its lease to what is left), and the earlier hold keeps its own lease.
    Before, its client counted the whole hold valid for the re-entry's lease only: at its
    end the keeper reported the hold lost (its body cancelled, ``on_lost`` called) while
    the server still held it for 30 s."""
    a = async_make_client()
    told: list[Any] = []
    name = f"reentry-shorter-rw-{kind}"
    la = make_lock(a, kind, name, on_lost=told.append)
    assert await la.acquire()  # the watchdog's lease: 30 s
    assert await la.acquire(lease_time=0.2)
    assert r.pttl(name) > 29_000
    assert la.valid_for() > 29  # before: 0.2
    await la.release()
    await la.release()
    assert not la.lost
    assert told == []
    assert not r.exists(name)


@pytest.mark.parametrize("kind", ["lock", "fair", "fenced", "spin"])
async def test_holds_a_release_kept_after_the_client_counted_them_lost_are_released(
    async_make_client, r, monkeypatch, kind
):
    """The inner hold's lease (0.2 s) ran out by the client's clock while the release of
    that hold was on its way: the client took the outer hold off as lost (and said so), but
    the release kept it on the server and re-applied its 30 s lease. Before, that orphan
    held the lock for 30 s, and the owner's next acquire went in as a re-entry on the
    server that its client counted as a first hold (found by the simulator, seed 1115 of
    ``--rwlocks -1 --drops 5``). Now the client releases it."""
    a = async_make_client()
    name = f"kept-{kind}"
    warm = make_lock(a, kind, f"{name}-warm")  # the release script cached: one EVALSHA
    assert await warm.acquire()
    await warm.release()
    la = make_lock(a, kind, name)
    assert await la.acquire()  # the watchdog's lease: 30 s
    assert await la.acquire(lease_time=0.2)
    send = _redis.async_send_command  # how a call with no settle sends its script
    held_back: list[bool] = []

    async def late(conn: Any, *args: Any) -> None:
        await send(conn, *args)
        if args[:1] == ("EVALSHA",) and name in args and not held_back:
            held_back.append(True)
            # The inner release is on its way (the server keeps the outer hold, 30 s); its
            # reply is read once the client has counted the hold lost.
            assert await async_wait_until(lambda: la.lost, timeout=5)

    monkeypatch.setattr(backend_module, "async_send_command", late)
    await la.release()  # the inner hold: the server answers "holds left"
    monkeypatch.undo()
    assert held_back == [True]
    assert await async_wait_until(lambda: not r.exists(name), timeout=5), r.pttl(name)
    with pytest.raises(tenure.LockLostError):
        await la.release()  # the outer hold, reported lost
