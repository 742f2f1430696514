# GENERATED from tests/_async/test_inspect.py by tools/unasync.py: edit that file, not this one.
"""client.inspect(name): kind, holders, leases, queue, token, permits, waiters; read-only."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

import tenure
from support.parking import waiting
from support.twins import spawn, wait_until
from tenure import keys


def state(r):
    """Every key with its value dump and TTL: what inspect must leave as it found it."""
    return {k: (r.dump(k), r.pttl(k) > 0) for k in sorted(r.keys("*"))}


def test_free_name(client, r):
    info = client.inspect("nothing")
    assert isinstance(info, tenure.LockInfo)
    assert info.kind == "free"
    assert not info.exists
    assert not info.held
    assert info.holders == ()
    assert info.remaining_lease is None
    assert info.waiters == 0


def test_lock_holders_parsed_and_nothing_changed(make_client, r):
    client = make_client(watchdog_timeout=20)
    lock = client.lock("orders")
    assert lock.acquire()
    assert lock.acquire()
    before = state(r)
    info = client.inspect("orders")
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
    lock.release()
    lock.release()
    assert (client.inspect("orders")).kind == "free"


def test_waiters_counted(make_client, r):
    a, b = make_client(), make_client()
    assert a.lock("w").acquire(lease_time=30)
    waiter = spawn(lambda: b.lock("w").acquire(timeout=30))
    assert wait_until(lambda: r.pubsub_numsub(keys.lock_channel("w"))[0][1] == 1)
    info = a.inspect("w")
    assert info.waiters == 1
    assert a.lock("w").force_release()
    assert waiter.result() is True


def test_waiters_counted_where_the_server_miscounts(client, r):
    """Valkey 9.0-9.1 answer PUBSUB NUMSUB with a memory address while a channel's table
    resizes, at 8 subscribers among others (docs/wire.md): inspect settles the count first."""
    assert client.lock("m").acquire(lease_time=30)
    listeners = [r.pubsub() for _ in range(8)]
    try:
        for listener in listeners:
            listener.subscribe(keys.lock_channel("m"))
            assert listener.get_message(timeout=5)["type"] == "subscribe"
        info = client.inspect("m")
        assert info.waiters == 8
        assert not info.notes
    finally:
        for listener in listeners:
            listener.close()
        client.lock("m").release()


def test_fenced_token(client, r):
    lock = client.fenced_lock("ledger")
    token = lock.acquire_token(lease_time=10)
    info = client.inspect("ledger")
    assert info.kind == "fenced"
    assert info.fencing_token == token
    assert info.held
    lock.release()
    info = client.inspect("ledger")
    assert info.kind == "fenced"
    assert not info.held
    assert info.fencing_token == token


def test_fair_queue_with_deadlines(make_client, r):
    a, b = make_client(), make_client()
    assert a.fair_lock("f").acquire(lease_time=30)
    waiter = spawn(lambda: b.fair_lock("f").acquire(timeout=20))
    # Queued by its first attempt, subscribed only after it: wait for both.
    assert wait_until(lambda: r.llen(keys.fair_queue_key("f")) == 1)
    prefix = keys.fair_waiter_channel_prefix("f")
    assert wait_until(lambda: len(r.pubsub_channels(f"{prefix}*")) == 1)
    before = state(r)
    info = a.inspect("f")
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
    assert a.fair_lock("f").force_release()
    assert waiter.result() is True


def test_read_write_modes_and_reader_leases(make_client, r):
    a, b = make_client(), make_client()
    ra, rb = a.read_write_lock("rw"), b.read_write_lock("rw")
    assert ra.read_lock().acquire(lease_time=50)
    assert ra.read_lock().acquire(lease_time=5)
    assert rb.read_lock().acquire(lease_time=8)
    before = state(r)
    info = a.inspect("rw")
    assert state(r) == before
    assert info.kind == "rw"
    assert info.mode == "read"
    by_client = {h.client_id: h for h in info.holders}
    assert by_client[a.client_id].hold_count == 2
    assert by_client[a.client_id].mode == "read"
    assert 45 < by_client[a.client_id].remaining_lease <= 50  # its longest read hold
    assert 3 < by_client[b.client_id].remaining_lease <= 8
    ra.read_lock().release()
    ra.read_lock().release()
    rb.read_lock().release()
    assert ra.write_lock().acquire(lease_time=10)
    info = a.inspect("rw")
    (writer,) = info.holders
    assert info.mode == "write"
    assert writer.mode == "write"
    assert writer.client_id == a.client_id


def test_semaphore_and_latch_layouts(client, r):
    """Written raw as docs/wire.md lays them out (the primitives may not exist yet)."""
    r.set("pool", 3)
    info = client.inspect("pool")
    assert info.kind == "semaphore"
    assert info.permits == 3
    assert info.notes
    r.set("gpus", 1)
    r.zadd(keys.permit_timeout_key("gpus"), {bytes(range(16)): keys.PERMIT_NO_LEASE_SCORE})
    info = client.inspect("gpus")
    assert info.kind == "permit_expirable_semaphore"
    assert info.permits == 1
    (permit,) = info.permit_leases
    assert permit.permit_id == bytes(range(16)).hex()
    assert permit.remaining_lease == math.inf
    r.set("warmup", 2)
    sub = r.pubsub()
    sub.subscribe(keys.latch_channel("warmup"))
    try:
        assert wait_until(
            lambda: r.pubsub_numsub(keys.latch_channel("warmup"))[0][1] == 1
        )
        info = client.inspect("warmup")
        assert info.kind == "latch"
        assert info.count == 2
        assert info.waiters == 1
    finally:
        sub.close()


def test_foreign_key_is_unknown(client, r):
    r.rpush("jobs", "a")
    r.set("text", "hello")
    assert (client.inspect("jobs")).kind == "unknown"
    assert (client.inspect("text")).kind == "unknown"


def test_name_prefix_and_bad_name(make_client, r):
    client = make_client(name_prefix="app:")
    assert client.lock("x").acquire(lease_time=5)
    info = client.inspect("x")
    assert info.key == "app:x"
    assert info.name == "x"
    assert info.kind == "lock"
    with pytest.raises(ValueError, match="name"):
        client.inspect("")
    with pytest.raises(TypeError, match="name"):
        client.inspect(3)


def test_json_form_is_plain(client, r):
    assert client.lock("j").acquire()
    r.persist("j")
    data = (client.inspect("j")).to_dict()
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["remaining_lease"] is None
    assert data["exists"] is True
    assert data["holders"][0]["hold_count"] == 1


def test_an_election_shows_its_leader_term_and_candidates_in_order(make_client, r):
    a, b, c = (make_client(name=n, watchdog_timeout=20) for n in ("alpha", "beta", "gamma"))
    first, second, third = (x.election("sched") for x in (a, b, c))
    term = first.campaign("host-a:1")
    assert term is not None
    queue, channel = "{sched}:tenure_election_queue", keys.lock_channel("{sched}:tenure_election")
    runner_up = spawn(lambda: second.campaign("host-b:2", timeout=30))
    assert wait_until(lambda: r.llen(queue) == 1)
    last = spawn(lambda: third.campaign("host-c:3", timeout=30))
    assert wait_until(lambda: r.llen(queue) == 2)
    assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 2)
    # Each candidate past its attempt after subscribing (which moves its deadline): on a
    # loaded machine one came between the two looks at the state below.
    assert wait_until(lambda: waiting(b) == 1 and waiting(c) == 1, 10)
    before = state(r)
    info = a.inspect("sched")
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

    first.resign()  # the next candidate leads at once
    assert runner_up.result() == term + 1
    info = a.inspect("sched")
    assert info.holders[0].client_id == b.client_id
    assert info.value == "host-b:2"
    assert info.term == term + 1
    assert [q.client_id for q in info.queue] == [c.client_id]
    second.resign()
    assert last.result() == term + 2
    third.resign()
    info = a.inspect("sched")  # vacant: the last term handed out, nobody queued
    assert info.kind == "election"
    assert not info.held
    assert not info.exists
    assert info.holders == ()
    assert info.queue == ()
    assert info.value is None
    assert info.term == term + 2
    assert info.remaining_lease is None
