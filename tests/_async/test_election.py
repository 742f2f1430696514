# Election (asyncio source of tests/_sync/test_election.py).
"""Election: terms, FIFO candidates, handover, loss, observe. Crashes: tests/process."""

from __future__ import annotations

import asyncio
import inspect
import math
import time

import pytest

import tenure
from support.monitor import Monitor
from support.twins import async_sleep, async_spawn, async_wait_until
from tenure import scripts
from tenure.core.election import election_channel, election_keys

LEADER, TERM, QUEUE, DEADLINES, CANDIDATES, LOG = election_keys("sched")


async def test_wire_layout_and_first_term(async_client, r):
    election = async_client.election("sched")
    assert isinstance(election, tenure.AsyncElection)
    assert election.name == "sched"
    assert await election.leader() is None
    assert election.term is None
    term = await election.campaign("host-a:1")
    assert term == 1
    assert election.term == 1
    assert LEADER == "{sched}:tenure_election"
    assert TERM == "{sched}:tenure_election_term"
    fields = {k.decode(): v.decode() for k, v in r.hgetall(LEADER).items()}
    assert fields["value"] == "host-a:1"
    assert fields["term"] == "1"
    assert fields["owner"].startswith(async_client.client_id + ":")
    assert 29_000 < r.pttl(LEADER) <= 30_000  # the watchdog's lease
    assert r.get(TERM) == b"1"
    assert r.ttl(TERM) == -1  # the counter never expires
    assert r.llen(QUEUE) == 0
    assert r.zcard(DEADLINES) == 0
    assert r.hlen(CANDIDATES) == 0
    leader = await election.leader()
    assert leader is not None
    assert leader.value == "host-a:1"
    assert leader.term == 1
    assert leader.owner == fields["owner"]
    assert leader.client_name
    assert leader.remaining_lease is not None
    assert 29 < leader.remaining_lease <= 30
    assert await election.is_leader()
    await election.resign()
    assert not r.exists(LEADER)
    assert await election.leader() is None
    assert not await election.is_leader()


async def test_campaign_again_while_leading_keeps_the_term_and_proclaims(async_client, r):
    election = async_client.election("sched")
    term = await election.campaign("a")
    assert await election.campaign("a", timeout=0) == term
    assert await election.campaign("b") == term
    assert r.hget(LEADER, "value") == b"b"
    await election.resign()  # one resign ends it, however many campaigns
    assert not r.exists(LEADER)


async def test_terms_strictly_increase_across_leaderships_and_clients(async_make_client):
    made = [async_make_client() for _ in range(3)]
    terms = []
    for _ in range(4):
        for c in made:
            election = c.election("sched")
            terms.append(await election.campaign("x"))
            await election.resign()
    assert terms == list(range(1, 13))


async def test_candidates_are_elected_in_the_order_they_started(async_make_client, r):
    leader = async_make_client().election("sched")
    await leader.campaign("first")
    order: list[str] = []

    async def candidate(i: int) -> None:
        election = async_make_client().election("sched")
        assert await election.campaign(f"c{i}", timeout=30) is not None
        order.append(f"c{i}")
        await async_sleep(0.05)
        await election.resign()

    jobs = []
    for i in range(4):
        jobs.append(async_spawn(candidate, i))
        assert await async_wait_until(lambda n=i: r.llen(QUEUE) == n + 1)
    await leader.resign()
    for job in jobs:
        await job.result()
    assert order == ["c0", "c1", "c2", "c3"]
    assert r.get(TERM) == b"5"


async def test_resign_hands_over_within_one_round_trip(async_make_client):
    a, b = async_make_client(), async_make_client()
    first, second = a.election("sched"), b.election("sched")
    await first.campaign("a")
    stamps: list[float] = []

    async def wait_for_it() -> int:
        term = await second.campaign("b", timeout=30)
        stamps.append(time.monotonic())
        return term

    job = async_spawn(wait_for_it)
    await async_sleep(0.3)
    resigned = time.monotonic()
    await first.resign()
    assert await job.result() == 2
    # elected inside the resign script; the candidate hears it on the channel and confirms
    assert stamps[0] - resigned < 0.25, stamps[0] - resigned
    assert await second.is_leader()
    assert not await first.is_leader()
    await second.resign()


async def test_timeout_returns_none_and_leaves_the_queue(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    await a.election("sched").campaign("a")
    started = time.monotonic()
    assert await b.election("sched").campaign("b", timeout=0.3) is None
    assert 0.3 <= time.monotonic() - started < 0.3 + 0.4
    assert r.llen(QUEUE) == 0
    assert r.zcard(DEADLINES) == 0
    assert r.hlen(CANDIDATES) == 0
    assert await b.election("sched").campaign("b", timeout=0) is None
    assert r.llen(QUEUE) == 0


async def test_cancelled_campaign_leaves_the_queue(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    await a.election("sched").campaign("a")
    job = async_spawn(lambda: b.election("sched").campaign("b"))
    assert await async_wait_until(lambda: r.llen(QUEUE) == 1)
    if isinstance(job, object) and hasattr(job, "task"):
        job.task.cancel()
        assert isinstance(await job.outcome(), asyncio.CancelledError)
        assert await async_wait_until(lambda: r.llen(QUEUE) == 0)


async def test_dead_candidate_is_skipped(async_client, r):
    r.rpush(QUEUE, "dead:1")
    r.zadd(DEADLINES, {"dead:1": 1})  # its deadline passed long ago
    r.hset(CANDIDATES, mapping={"dead:1": "ghost", "dead:1|lease": 30000})
    election = async_client.election("sched")
    assert await election.campaign("alive", timeout=1) == 1
    assert r.hget(LEADER, "value") == b"alive"
    assert r.llen(QUEUE) == 0
    assert r.zcard(DEADLINES) == 0


async def test_resign_and_proclaim_by_a_non_leader_raise(async_make_client):
    a, b = async_make_client(), async_make_client()
    leader, other = a.election("sched"), b.election("sched")
    with pytest.raises(tenure.NotOwnedError):
        await leader.resign()
    await leader.campaign("a")
    with pytest.raises(tenure.NotOwnedError):
        await other.resign()
    with pytest.raises(tenure.NotOwnedError):
        await other.proclaim("x")
    # a second Election object of the same client is another candidate
    with pytest.raises(tenure.NotOwnedError):
        await a.election("sched").resign()
    assert await leader.proclaim("a2") == 1
    got = await leader.leader()
    assert got is not None
    assert got.value == "a2"
    assert got.term == 1
    await leader.resign()


async def test_lost_leadership_is_reported_and_raises(async_make_client, r):
    reported: list[object] = []
    c = async_make_client(watchdog_timeout=0.6)
    election = c.election("sched", on_lost=reported.append)
    await election.campaign("a")
    r.delete(LEADER)  # taken away (an operator, a failover that lost it)
    assert await async_wait_until(lambda: election.lost, timeout=5)
    assert await async_wait_until(lambda: reported == [election], timeout=5)
    with pytest.raises(tenure.LockLostError):
        await election.resign()
    with pytest.raises(tenure.NotOwnedError):
        await election.resign()


async def test_watchdog_keeps_the_leadership_past_three_leases(async_make_client, r):
    c = async_make_client(watchdog_timeout=0.6)
    election = c.election("sched")
    await election.campaign("a")
    await async_sleep(2.0)
    assert await election.is_leader()
    assert not election.lost
    assert r.pttl(LEADER) > 0
    await election.resign()


async def test_terms_are_accepted_by_fenced_write(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    ea, eb = a.election("sched"), b.election("sched")
    t1 = await ea.campaign("a")
    assert tenure.fenced_write(r, "resource", t1, b"from a")
    await ea.resign()
    t2 = await eb.campaign("b")
    assert tenure.fenced_write(r, "resource", t2, b"from b")
    assert not tenure.fenced_write(r, "resource", t1, b"stale a")
    assert tenure.fenced_read(r, "resource") == (t2, b"from b")
    await eb.resign()


async def test_observe_yields_the_current_leader_first_then_changes(async_make_client):
    a, b, watcher = async_make_client(), async_make_client(), async_make_client()
    ea, eb = a.election("sched"), b.election("sched")
    seen: list[tenure.Leader | None] = []

    async def observe() -> None:
        async for leader in watcher.election("sched").observe():
            seen.append(leader)
            if len(seen) == 5:
                return

    job = async_spawn(observe)
    assert await async_wait_until(lambda: seen == [None])
    await ea.campaign("a")
    assert await async_wait_until(lambda: len(seen) == 2)
    await ea.proclaim("a2")
    assert await async_wait_until(lambda: len(seen) == 3)
    elected = async_spawn(lambda: eb.campaign("b"))
    await async_sleep(0.2)
    await ea.resign()
    assert await elected.result() == 2
    assert await async_wait_until(lambda: len(seen) == 4)
    await eb.resign()
    await job.result()
    values = [(x.value, x.term) if x is not None else None for x in seen]
    assert values == [None, ("a", 1), ("a2", 1), ("b", 2), None]


async def test_observe_sends_nothing_while_nothing_changes(async_make_client, server):
    leader = async_make_client(watchdog_timeout=0.6)  # a renewal every 0.2 s
    watcher = async_make_client()
    election = leader.election("sched")  # the candidate lives as long as this object
    await election.campaign("a")
    seen: list[tenure.Leader | None] = []

    async def observe() -> None:
        async for item in watcher.election("sched").observe():
            seen.append(item)

    job = async_spawn(observe)
    assert await async_wait_until(lambda: len(seen) == 1)
    await async_sleep(0.2)
    monitor = Monitor(server)
    await async_sleep(2.0)  # ten renewals, three leases
    lines = monitor.stop()
    renew = scripts.get("election_renew").sha
    sent = [c for kind, c in lines if kind != "lua" and not c.startswith(Monitor.HANDSHAKE)]
    # the leader's client renews (and may register itself); the observer sends nothing
    others = [c for c in sent if renew not in c and leader.client_id not in c]
    assert others == [], others
    assert len(sent) >= 5  # the leader did renew meanwhile
    assert len(seen) == 1
    if hasattr(job, "task"):
        job.task.cancel()
    else:
        await watcher.close()  # the observing thread ends with BackendError
    await job.outcome()


async def test_observe_sees_a_dead_leader_lapse_at_its_lease_end(async_make_client):
    dead = async_make_client(watchdog_timeout=0.6)
    watcher = async_make_client()
    election = dead.election("sched")
    await election.campaign("a")
    seen: list[tuple[float, tenure.Leader | None]] = []

    async def observe() -> None:
        async for item in watcher.election("sched").observe():
            seen.append((time.monotonic(), item))
            if len(seen) == 2:
                return

    job = async_spawn(observe)
    assert await async_wait_until(lambda: len(seen) == 1)
    await dead.close()  # renewal stops; the leadership is not released
    stopped = time.monotonic()
    await job.result(10)
    at, item = seen[1]
    assert item is None
    assert at - stopped < 0.6 + 0.5, at - stopped


async def test_leadership_context_campaigns_and_resigns(async_make_client, r):
    c = async_make_client()
    election = c.election("sched")
    async with election.leadership("a") as term:
        assert term == 1
        assert await election.is_leader()
    assert not r.exists(LEADER)
    other = async_make_client().election("sched")
    await other.campaign("b")

    async def lead_while_another_leads() -> None:
        async with election.leadership("a", timeout=0.2):
            pytest.fail("entered without leading")

    with pytest.raises(tenure.LockTimeout):
        await lead_while_another_leads()
    await other.resign()
    with pytest.raises(TypeError, match="cancel_on_loss must be a bool, not int"):
        election.leadership("a", cancel_on_loss=1)
    with pytest.raises(TypeError, match="value must be a str, not int"):
        await election.campaign(5)


async def test_leadership_lost_ends_the_block_with_lock_lost(async_make_client, r):
    c = async_make_client(watchdog_timeout=0.6)
    election = c.election("sched")
    steps = 0

    async def lead_until_lost() -> None:
        nonlocal steps
        async with election.leadership("a"):
            r.delete(LEADER)
            while not election.lost and steps < 300:  # a sync body checks between steps
                steps += 1
                await async_sleep(0.01)

    with pytest.raises(tenure.LockLostError):
        await lead_until_lost()
    assert steps < 300
    assert not r.exists(LEADER)


async def test_closed_client_refuses_to_campaign(async_make_client):
    c = async_make_client()
    election = c.election("sched")
    await c.close()
    with pytest.raises(tenure.LockError):
        await election.campaign("a")


async def test_bad_arguments_before_io(async_client):
    with pytest.raises(TypeError, match="name must be a str, not int"):
        async_client.election(5)
    with pytest.raises(ValueError, match="name must not be empty"):
        async_client.election("")
    election = async_client.election("sched")
    with pytest.raises(ValueError, match=r"timeout must be >= 0, None or -1, not -2"):
        await election.campaign("a", timeout=-2)
    with pytest.raises(ValueError, match="value cannot be encoded as UTF-8"):
        await election.campaign("\udc80")
    assert math.isfinite(0.0)


def test_channel_shares_the_slot_of_the_keys():
    from tenure.keys import key_slot

    slots = {key_slot(k) for k in [*election_keys("sched"), election_channel("sched")]}
    assert len(slots) == 1


async def test_asyncio_body_is_cancelled_on_loss(async_make_client, r):
    c = async_make_client(watchdog_timeout=0.6)
    if not inspect.iscoroutinefunction(c.close):
        pytest.skip("a thread's body cannot be cancelled (covered by the test above)")
    election = c.election("sched")
    reached = []
    started = time.monotonic()

    async def lead_while_the_lease_goes() -> None:
        async with election.leadership("a"):
            r.delete(LEADER)
            await async_sleep(30)
            reached.append(True)

    with pytest.raises(tenure.LockLostError) as info:
        await lead_while_the_lease_goes()
    assert not reached
    assert time.monotonic() - started < 0.6 + 0.5
    assert isinstance(info.value.__cause__, asyncio.CancelledError)
    # an outside cancellation stays a CancelledError
    job = async_spawn(lambda: _lead_forever(election))
    assert await async_wait_until(lambda: r.exists(LEADER))
    assert hasattr(job, "task")  # an asyncio job (the skip above)
    job.task.cancel()
    assert isinstance(await job.outcome(), asyncio.CancelledError)
    assert not r.exists(LEADER)  # resigned on the way out


async def _lead_forever(election: tenure.AsyncElection) -> None:
    async with election.leadership("b"):
        await async_sleep(30)


async def test_valid_for_and_checkpoint_need_no_io(async_make_client, r):
    c = async_make_client(watchdog_timeout=0.6)
    election = c.election("sched")
    assert election.valid_for() == 0.0
    with pytest.raises(tenure.NotOwnedError):
        election.checkpoint()
    await election.campaign("a")
    assert 0.4 < election.valid_for() <= 0.6
    election.checkpoint()
    r.delete(LEADER)
    assert await async_wait_until(lambda: election.valid_for() == 0.0, timeout=5)
    with pytest.raises(tenure.LockLostError):
        election.checkpoint()


async def test_observe_sees_every_change_in_order_however_fast(async_make_client, r):
    a, b, watcher = async_make_client(), async_make_client(), async_make_client()
    ea, eb = a.election("sched"), b.election("sched")
    changes = watcher.election("sched").observe()
    assert await changes.__anext__() is None
    await ea.campaign("a")
    await ea.proclaim("a2")
    await ea.resign()
    await eb.campaign("b")
    await eb.resign()
    seen = [await changes.__anext__() for _ in range(5)]
    values = [(x.value, x.term) if x is not None else None for x in seen]
    assert values == [("a", 1), ("a2", 1), None, ("b", 2), None]
    assert r.xlen(LOG) == 6  # the first read logged the vacancy; capped near 128 entries
