# client.inspect (asyncio source of tests/_sync/test_inspect.py).
"""client.inspect(name): kind, holders, leases, queue, token, permits, waiters; read-only."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

import tenure
from support.parking import waiting
from support.twins import async_spawn, async_wait_until
from tenure import keys


def state(r):
    """Every key with its value dump and TTL: what inspect must leave as it found it."""
    return {k: (r.dump(k), r.pttl(k) > 0) for k in sorted(r.keys("*"))}


async def test_free_name(async_client, r):
    info = await async_client.inspect("nothing")
    assert isinstance(info, tenure.LockInfo)
    assert info.kind == "free"
    assert not info.exists
    assert not info.held
    assert info.holders == ()
    assert info.remaining_lease is None
    assert info.waiters == 0


async def test_lock_holders_parsed_and_nothing_changed(async_make_client, r):
    client = async_make_client(watchdog_timeout=20)
    lock = client.lock("orders")
    assert await lock.acquire()
    assert await lock.acquire()
    before = state(r)
    info = await client.inspect("orders")
    assert state(r) == before
    assert info.kind == "lock"
    assert info.held
    assert info.exists
    (holder,) = info.holders
    assert holder.client_id == client.client_id
    assert holder.owner == f"{client.client_id}:{holder.number}"
    assert isinstance(holder.number, int)
    assert holder.hold_count == 2
    assert 15 < info.remaining_lease <= 20
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.kind = "x"
    await lock.release()
    await lock.release()
    assert (await client.inspect("orders")).kind == "free"


async def test_waiters_counted(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    assert await a.lock("w").acquire(lease_time=30)
    waiter = async_spawn(lambda: b.lock("w").acquire(timeout=30))
    assert await async_wait_until(lambda: r.pubsub_numsub(keys.lock_channel("w"))[0][1] == 1)
    info = await a.inspect("w")
    assert info.waiters == 1
    assert await a.lock("w").force_release()
    assert await waiter.result() is True


async def test_waiters_counted_where_the_server_miscounts(async_client, r):
    """Valkey 9.0-9.1 answer PUBSUB NUMSUB with a memory address while a channel's table
    resizes, at 8 subscribers among others (docs/wire.md): inspect settles the count first."""
    assert await async_client.lock("m").acquire(lease_time=30)
    listeners = [r.pubsub() for _ in range(8)]
    try:
        for listener in listeners:
            listener.subscribe(keys.lock_channel("m"))
            assert listener.get_message(timeout=5)["type"] == "subscribe"
        info = await async_client.inspect("m")
        assert info.waiters == 8
        assert not info.notes
    finally:
        for listener in listeners:
            listener.close()
        await async_client.lock("m").release()


async def test_fenced_token(async_client, r):
    lock = async_client.fenced_lock("ledger")
    token = await lock.acquire_token(lease_time=10)
    info = await async_client.inspect("ledger")
    assert info.kind == "fenced"
    assert info.fencing_token == token
    assert info.held
    await lock.release()
    info = await async_client.inspect("ledger")
    assert info.kind == "fenced"
    assert not info.held
    assert info.fencing_token == token


async def test_fair_queue_with_deadlines(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    assert await a.fair_lock("f").acquire(lease_time=30)
    waiter = async_spawn(lambda: b.fair_lock("f").acquire(timeout=20))
    # Queued by its first attempt, subscribed only after it: wait for both.
    assert await async_wait_until(lambda: r.llen(keys.fair_queue_key("f")) == 1)
    prefix = keys.fair_waiter_channel_prefix("f")
    assert await async_wait_until(lambda: len(r.pubsub_channels(f"{prefix}*")) == 1)
    before = state(r)
    info = await a.inspect("f")
    assert state(r) == before
    assert info.kind == "fair"
    assert info.held
    (queued,) = info.queue
    assert queued.client_id == b.client_id
    assert queued.deadline is not None
    assert queued.remaining is not None
    assert 0 < queued.remaining <= 30 + 20 + 1
    assert math.isclose(queued.deadline - info.server_time, queued.remaining, abs_tol=0.01)
    assert info.waiters == 1
    assert await a.fair_lock("f").force_release()
    assert await waiter.result() is True


async def test_read_write_modes_and_reader_leases(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    ra, rb = a.read_write_lock("rw"), b.read_write_lock("rw")
    assert await ra.read_lock().acquire(lease_time=50)
    assert await ra.read_lock().acquire(lease_time=5)
    assert await rb.read_lock().acquire(lease_time=8)
    before = state(r)
    info = await a.inspect("rw")
    assert state(r) == before
    assert info.kind == "rw"
    assert info.mode == "read"
    by_client = {h.client_id: h for h in info.holders}
    assert by_client[a.client_id].hold_count == 2
    assert by_client[a.client_id].mode == "read"
    assert 45 < by_client[a.client_id].remaining_lease <= 50  # its longest read hold
    assert 3 < by_client[b.client_id].remaining_lease <= 8
    await ra.read_lock().release()
    await ra.read_lock().release()
    await rb.read_lock().release()
    assert await ra.write_lock().acquire(lease_time=10)
    info = await a.inspect("rw")
    (writer,) = info.holders
    assert info.mode == "write"
    assert writer.mode == "write"
    assert writer.client_id == a.client_id


async def test_semaphore_and_latch_layouts(async_client, r):
    """Written raw as docs/wire.md lays them out (the primitives may not exist yet)."""
    r.set("pool", 3)
    info = await async_client.inspect("pool")
    assert info.kind == "semaphore"
    assert info.permits == 3
    assert info.notes
    r.set("gpus", 1)
    r.zadd(keys.permit_timeout_key("gpus"), {bytes(range(16)): keys.PERMIT_NO_LEASE_SCORE})
    info = await async_client.inspect("gpus")
    assert info.kind == "permit_expirable_semaphore"
    assert info.permits == 1
    (permit,) = info.permit_leases
    assert permit.permit_id == bytes(range(16)).hex()
    assert permit.remaining_lease == math.inf
    r.set("warmup", 2)
    sub = r.pubsub()
    sub.subscribe(keys.latch_channel("warmup"))
    try:
        assert await async_wait_until(
            lambda: r.pubsub_numsub(keys.latch_channel("warmup"))[0][1] == 1
        )
        info = await async_client.inspect("warmup")
        assert info.kind == "latch"
        assert info.count == 2
        assert info.waiters == 1
    finally:
        sub.close()


async def test_foreign_key_is_unknown(async_client, r):
    r.rpush("jobs", "a")
    r.set("text", "hello")
    assert (await async_client.inspect("jobs")).kind == "unknown"
    assert (await async_client.inspect("text")).kind == "unknown"


async def test_name_prefix_and_bad_name(async_make_client, r):
    client = async_make_client(name_prefix="app:")
    assert await client.lock("x").acquire(lease_time=5)
    info = await client.inspect("x")
    assert info.key == "app:x"
    assert info.name == "x"
    assert info.kind == "lock"
    with pytest.raises(ValueError, match="name"):
        await client.inspect("")
    with pytest.raises(TypeError, match="name"):
        await client.inspect(3)


async def test_json_form_is_plain(async_client, r):
    assert await async_client.lock("j").acquire()
    r.persist("j")
    data = (await async_client.inspect("j")).to_dict()
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["remaining_lease"] is None
    assert data["exists"] is True
    assert data["holders"][0]["hold_count"] == 1


async def test_an_election_shows_its_leader_term_and_candidates_in_order(async_make_client, r):
    a, b, c = (async_make_client(name=n, watchdog_timeout=20) for n in ("alpha", "beta", "gamma"))
    first, second, third = (x.election("sched") for x in (a, b, c))
    term = await first.campaign("host-a:1")
    assert term is not None
    queue, channel = "{sched}:tenure_election_queue", keys.lock_channel("{sched}:tenure_election")
    runner_up = async_spawn(lambda: second.campaign("host-b:2", timeout=30))
    assert await async_wait_until(lambda: r.llen(queue) == 1)
    last = async_spawn(lambda: third.campaign("host-c:3", timeout=30))
    assert await async_wait_until(lambda: r.llen(queue) == 2)
    assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 2)
    # Each candidate past its attempt after subscribing (which moves its deadline): on a
    # loaded machine one came between the two looks at the state below.
    assert await async_wait_until(lambda: waiting(b) == 1 and waiting(c) == 1, 10)
    before = state(r)
    info = await a.inspect("sched")
    assert state(r) == before  # looking changes nothing
    assert info.kind == "election"
    assert info.held
    assert info.exists
    (leader,) = info.holders
    assert leader.client_id == a.client_id
    assert leader.client_name == "alpha"
    assert leader.hold_count == 1
    assert leader.remaining_lease == info.remaining_lease
    assert info.value == "host-a:1"
    assert info.term == term
    assert 15 < info.remaining_lease <= 20
    assert [q.client_id for q in info.queue] == [b.client_id, c.client_id]  # in order
    assert [q.value for q in info.queue] == ["host-b:2", "host-c:3"]
    assert [q.client_name for q in info.queue] == ["beta", "gamma"]
    for candidate in info.queue:
        assert candidate.remaining is not None
        assert candidate.deadline is not None
        assert 0 < candidate.remaining <= 20
        assert math.isclose(
            candidate.deadline - info.server_time, candidate.remaining, abs_tol=0.01
        )
    assert info.waiters == 2
    assert info.fencing_token is None
    assert json.loads(json.dumps(info.to_dict()))["term"] == term

    await first.resign()  # the next candidate leads at once
    assert await runner_up.result() == term + 1
    info = await a.inspect("sched")
    assert info.holders[0].client_id == b.client_id
    assert info.value == "host-b:2"
    assert info.term == term + 1
    assert [q.client_id for q in info.queue] == [c.client_id]
    await second.resign()
    assert await last.result() == term + 2
    await third.resign()
    info = await a.inspect("sched")  # vacant: the last term handed out, nobody queued
    assert info.kind == "election"
    assert not info.held
    assert not info.exists
    assert info.holders == ()
    assert info.queue == ()
    assert info.value is None
    assert info.term == term + 2
    assert info.remaining_lease is None
