# GENERATED from tests/_async/test_election.py by tools/unasync.py: edit that file, not this one.
"""Election: terms, FIFO candidates, handover, loss, observe. Crashes: tests/process."""

from __future__ import annotations

import asyncio
import inspect
import math
import time

import pytest

import tenure
from support.monitor import Monitor
from support.twins import sleep, spawn, wait_until
from tenure import scripts
from tenure.core.election import election_channel, election_keys

LEADER, TERM, QUEUE, DEADLINES, CANDIDATES, LOG = election_keys("sched")


def test_wire_layout_and_first_term(client, r):
    election = client.election("sched")
    assert isinstance(election, tenure.Election)
    assert election.name == "sched"
    assert election.leader() is None
    assert election.term is None
    term = election.campaign("host-a:1")
    assert term == 1
    assert election.term == 1
    assert LEADER == "{sched}:tenure_election"
    assert TERM == "{sched}:tenure_election_term"
    fields = {k.decode(): v.decode() for k, v in r.hgetall(LEADER).items()}
    assert fields["value"] == "host-a:1"
    assert fields["term"] == "1"
    assert fields["owner"].startswith(client.client_id + ":")
    assert 29_000 < r.pttl(LEADER) <= 30_000  # the watchdog's lease
    assert r.get(TERM) == b"1"
    assert r.ttl(TERM) == -1  # the counter never expires
    assert r.llen(QUEUE) == 0
    assert r.zcard(DEADLINES) == 0
    assert r.hlen(CANDIDATES) == 0
    leader = election.leader()
    assert leader is not None
    assert leader.value == "host-a:1"
    assert leader.term == 1
    assert leader.owner == fields["owner"]
    assert leader.client_name
    assert leader.remaining_lease is not None
    assert 29 < leader.remaining_lease <= 30
    assert election.is_leader()
    election.resign()
    assert not r.exists(LEADER)
    assert election.leader() is None
    assert not election.is_leader()


def test_campaign_again_while_leading_keeps_the_term_and_proclaims(client, r):
    election = client.election("sched")
    term = election.campaign("a")
    assert election.campaign("a", timeout=0) == term
    assert election.campaign("b") == term
    assert r.hget(LEADER, "value") == b"b"
    election.resign()  # one resign ends it, however many campaigns
    assert not r.exists(LEADER)


def test_terms_strictly_increase_across_leaderships_and_clients(make_client):
    made = [make_client() for _ in range(3)]
    terms = []
    for _ in range(4):
        for c in made:
            election = c.election("sched")
            terms.append(election.campaign("x"))
            election.resign()
    assert terms == list(range(1, 13))


def test_candidates_are_elected_in_the_order_they_started(make_client, r):
    leader = make_client().election("sched")
    leader.campaign("first")
    order: list[str] = []

    def candidate(i: int) -> None:
        election = make_client().election("sched")
        assert election.campaign(f"c{i}", timeout=30) is not None
        order.append(f"c{i}")
        sleep(0.05)
        election.resign()

    jobs = []
    for i in range(4):
        jobs.append(spawn(candidate, i))
        assert wait_until(lambda n=i: r.llen(QUEUE) == n + 1)
    leader.resign()
    for job in jobs:
        job.result()
    assert order == ["c0", "c1", "c2", "c3"]
    assert r.get(TERM) == b"5"


def test_resign_hands_over_within_one_round_trip(make_client):
    a, b = make_client(), make_client()
    first, second = a.election("sched"), b.election("sched")
    first.campaign("a")
    stamps: list[float] = []

    def wait_for_it() -> int:
        term = second.campaign("b", timeout=30)
        stamps.append(time.monotonic())
        return term

    job = spawn(wait_for_it)
    sleep(0.3)
    resigned = time.monotonic()
    first.resign()
    assert job.result() == 2
    # elected inside the resign script; the candidate hears it on the channel and confirms
    assert stamps[0] - resigned < 0.25, stamps[0] - resigned
    assert second.is_leader()
    assert not first.is_leader()
    second.resign()


def test_timeout_returns_none_and_leaves_the_queue(make_client, r):
    a, b = make_client(), make_client()
    a.election("sched").campaign("a")
    started = time.monotonic()
    assert b.election("sched").campaign("b", timeout=0.3) is None
    assert 0.3 <= time.monotonic() - started < 0.3 + 0.4
    assert r.llen(QUEUE) == 0
    assert r.zcard(DEADLINES) == 0
    assert r.hlen(CANDIDATES) == 0
    assert b.election("sched").campaign("b", timeout=0) is None
    assert r.llen(QUEUE) == 0


def test_cancelled_campaign_leaves_the_queue(make_client, r):
    a, b = make_client(), make_client()
    a.election("sched").campaign("a")
    job = spawn(lambda: b.election("sched").campaign("b"))
    assert wait_until(lambda: r.llen(QUEUE) == 1)
    if isinstance(job, object) and hasattr(job, "task"):
        job.task.cancel()
        assert isinstance(job.outcome(), asyncio.CancelledError)
        assert wait_until(lambda: r.llen(QUEUE) == 0)


def test_dead_candidate_is_skipped(client, r):
    r.rpush(QUEUE, "dead:1")
    r.zadd(DEADLINES, {"dead:1": 1})  # its deadline passed long ago
    r.hset(CANDIDATES, mapping={"dead:1": "ghost", "dead:1|lease": 30000})
    election = client.election("sched")
    assert election.campaign("alive", timeout=1) == 1
    assert r.hget(LEADER, "value") == b"alive"
    assert r.llen(QUEUE) == 0
    assert r.zcard(DEADLINES) == 0


def test_resign_and_proclaim_by_a_non_leader_raise(make_client):
    a, b = make_client(), make_client()
    leader, other = a.election("sched"), b.election("sched")
    with pytest.raises(tenure.NotOwnedError):
        leader.resign()
    leader.campaign("a")
    with pytest.raises(tenure.NotOwnedError):
        other.resign()
    with pytest.raises(tenure.NotOwnedError):
        other.proclaim("x")
    # a second Election object of the same client is another candidate
    with pytest.raises(tenure.NotOwnedError):
        a.election("sched").resign()
    assert leader.proclaim("a2") == 1
    got = leader.leader()
    assert got is not None
    assert got.value == "a2"
    assert got.term == 1
    leader.resign()


def test_lost_leadership_is_reported_and_raises(make_client, r):
    reported: list[object] = []
    c = make_client(watchdog_timeout=0.6)
    election = c.election("sched", on_lost=reported.append)
    election.campaign("a")
    r.delete(LEADER)  # taken away (an operator, a failover that lost it)
    assert wait_until(lambda: election.lost, timeout=5)
    assert wait_until(lambda: reported == [election], timeout=5)
    with pytest.raises(tenure.LockLostError):
        election.resign()
    with pytest.raises(tenure.NotOwnedError):
        election.resign()


def test_watchdog_keeps_the_leadership_past_three_leases(make_client, r):
    c = make_client(watchdog_timeout=0.6)
    election = c.election("sched")
    election.campaign("a")
    sleep(2.0)
    assert election.is_leader()
    assert not election.lost
    assert r.pttl(LEADER) > 0
    election.resign()


def test_terms_are_accepted_by_fenced_write(make_client, r):
    a, b = make_client(), make_client()
    ea, eb = a.election("sched"), b.election("sched")
    t1 = ea.campaign("a")
    assert tenure.fenced_write(r, "resource", t1, b"from a")
    ea.resign()
    t2 = eb.campaign("b")
    assert tenure.fenced_write(r, "resource", t2, b"from b")
    assert not tenure.fenced_write(r, "resource", t1, b"stale a")
    assert tenure.fenced_read(r, "resource") == (t2, b"from b")
    eb.resign()


def test_observe_yields_the_current_leader_first_then_changes(make_client):
    a, b, watcher = make_client(), make_client(), make_client()
    ea, eb = a.election("sched"), b.election("sched")
    seen: list[tenure.Leader | None] = []

    def observe() -> None:
        for leader in watcher.election("sched").observe():
            seen.append(leader)
            if len(seen) == 5:
                return

    job = spawn(observe)
    assert wait_until(lambda: seen == [None])
    ea.campaign("a")
    assert wait_until(lambda: len(seen) == 2)
    ea.proclaim("a2")
    assert wait_until(lambda: len(seen) == 3)
    elected = spawn(lambda: eb.campaign("b"))
    sleep(0.2)
    ea.resign()
    assert elected.result() == 2
    assert wait_until(lambda: len(seen) == 4)
    eb.resign()
    job.result()
    values = [(x.value, x.term) if x is not None else None for x in seen]
    assert values == [None, ("a", 1), ("a2", 1), ("b", 2), None]


def test_observe_sends_nothing_while_nothing_changes(make_client, server):
    leader = make_client(watchdog_timeout=0.6)  # a renewal every 0.2 s
    watcher = make_client()
    election = leader.election("sched")  # the candidate lives as long as this object
    election.campaign("a")
    seen: list[tenure.Leader | None] = []

    def observe() -> None:
        for item in watcher.election("sched").observe():
            seen.append(item)

    job = spawn(observe)
    assert wait_until(lambda: len(seen) == 1)
    sleep(0.2)
    monitor = Monitor(server)
    sleep(2.0)  # ten renewals, three leases
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
        watcher.close()  # the observing thread ends with BackendError
    job.outcome()


def test_observe_sees_a_dead_leader_lapse_at_its_lease_end(make_client):
    dead = make_client(watchdog_timeout=0.6)
    watcher = make_client()
    election = dead.election("sched")
    election.campaign("a")
    seen: list[tuple[float, tenure.Leader | None]] = []

    def observe() -> None:
        for item in watcher.election("sched").observe():
            seen.append((time.monotonic(), item))
            if len(seen) == 2:
                return

    job = spawn(observe)
    assert wait_until(lambda: len(seen) == 1)
    dead.close()  # renewal stops; the leadership is not released
    stopped = time.monotonic()
    job.result(10)
    at, item = seen[1]
    assert item is None
    assert at - stopped < 0.6 + 0.5, at - stopped


def test_leadership_context_campaigns_and_resigns(make_client, r):
    c = make_client()
    election = c.election("sched")
    with election.leadership("a") as term:
        assert term == 1
        assert election.is_leader()
    assert not r.exists(LEADER)
    other = make_client().election("sched")
    other.campaign("b")

    def lead_while_another_leads() -> None:
        with election.leadership("a", timeout=0.2):
            pytest.fail("entered without leading")

    with pytest.raises(tenure.LockTimeout):
        lead_while_another_leads()
    other.resign()
    with pytest.raises(TypeError, match="cancel_on_loss must be a bool, not int"):
        election.leadership("a", cancel_on_loss=1)
    with pytest.raises(TypeError, match="value must be a str, not int"):
        election.campaign(5)


def test_leadership_lost_ends_the_block_with_lock_lost(make_client, r):
    c = make_client(watchdog_timeout=0.6)
    election = c.election("sched")
    steps = 0

    def lead_until_lost() -> None:
        nonlocal steps
        with election.leadership("a"):
            r.delete(LEADER)
            while not election.lost and steps < 300:  # a sync body checks between steps
                steps += 1
                sleep(0.01)

    with pytest.raises(tenure.LockLostError):
        lead_until_lost()
    assert steps < 300
    assert not r.exists(LEADER)


def test_closed_client_refuses_to_campaign(make_client):
    c = make_client()
    election = c.election("sched")
    c.close()
    with pytest.raises(tenure.LockError):
        election.campaign("a")


def test_bad_arguments_before_io(client):
    with pytest.raises(TypeError, match="name must be a str, not int"):
        client.election(5)
    with pytest.raises(ValueError, match="name must not be empty"):
        client.election("")
    election = client.election("sched")
    with pytest.raises(ValueError, match=r"timeout must be >= 0, None or -1, not -2"):
        election.campaign("a", timeout=-2)
    with pytest.raises(ValueError, match="value cannot be encoded as UTF-8"):
        election.campaign("\udc80")
    assert math.isfinite(0.0)


def test_channel_shares_the_slot_of_the_keys():
    from tenure.keys import key_slot

    slots = {key_slot(k) for k in [*election_keys("sched"), election_channel("sched")]}
    assert len(slots) == 1


def test_asyncio_body_is_cancelled_on_loss(make_client, r):
    c = make_client(watchdog_timeout=0.6)
    if not inspect.iscoroutinefunction(c.close):
        pytest.skip("a thread's body cannot be cancelled (covered by the test above)")
    election = c.election("sched")
    reached = []
    started = time.monotonic()

    def lead_while_the_lease_goes() -> None:
        with election.leadership("a"):
            r.delete(LEADER)
            sleep(30)
            reached.append(True)

    with pytest.raises(tenure.LockLostError) as info:
        lead_while_the_lease_goes()
    assert not reached
    assert time.monotonic() - started < 0.6 + 0.5
    assert isinstance(info.value.__cause__, asyncio.CancelledError)
    # an outside cancellation stays a CancelledError
    job = spawn(lambda: _lead_forever(election))
    assert wait_until(lambda: r.exists(LEADER))
    assert hasattr(job, "task")  # an asyncio job (the skip above)
    job.task.cancel()
    assert isinstance(job.outcome(), asyncio.CancelledError)
    assert not r.exists(LEADER)  # resigned on the way out


def _lead_forever(election: tenure.Election) -> None:
    with election.leadership("b"):
        sleep(30)


def test_valid_for_and_checkpoint_need_no_io(make_client, r):
    c = make_client(watchdog_timeout=0.6)
    election = c.election("sched")
    assert election.valid_for() == 0.0
    with pytest.raises(tenure.NotOwnedError):
        election.checkpoint()
    election.campaign("a")
    assert 0.4 < election.valid_for() <= 0.6
    election.checkpoint()
    r.delete(LEADER)
    assert wait_until(lambda: election.valid_for() == 0.0, timeout=5)
    with pytest.raises(tenure.LockLostError):
        election.checkpoint()


def test_observe_sees_every_change_in_order_however_fast(make_client, r):
    a, b, watcher = make_client(), make_client(), make_client()
    ea, eb = a.election("sched"), b.election("sched")
    changes = watcher.election("sched").observe()
    assert changes.__next__() is None
    ea.campaign("a")
    ea.proclaim("a2")
    ea.resign()
    eb.campaign("b")
    eb.resign()
    seen = [changes.__next__() for _ in range(5)]
    values = [(x.value, x.term) if x is not None else None for x in seen]
    assert values == [("a", 1), ("a2", 1), None, ("b", 2), None]
    assert r.xlen(LOG) == 6  # the first read logged the vacancy; capped near 128 entries
