# Election losses (asyncio source of tests/_sync/test_election_loss.py).
"""Election: a leadership lost on the server while its client still records it, and
``leadership()`` blocks that share one leadership (nested, or entered by two tasks)."""

from __future__ import annotations

import asyncio
import logging

import pytest

import tenure
from support.twins import (
    AsyncEvent,
    async_is_asyncio,
    async_sleep,
    async_spawn,
    async_wait_until,
)
from tenure.core.election import election_keys

LEADER, TERM, QUEUE, DEADLINES, CANDIDATES, LOG = election_keys("sched")


async def test_campaign_after_a_server_side_loss_reports_it_and_takes_nothing(
    async_make_client, r
):
    # A's lease ends on the server before its watchdog's next renewal (a pause), B leads
    # term 2 and resigns, then A campaigns again ("ensure I lead"): term 1 was lost while
    # B led. The campaign reports it (lost, on_lost, the block cancelled) and raises
    # LockLostError, drawing no term over it; the next campaign is a new leadership.
    reported: list[object] = []
    a = async_make_client().election("sched", on_lost=reported.append)
    b = async_make_client().election("sched")
    entered, proceed = AsyncEvent(), AsyncEvent()
    reached: list[int] = []

    async def lead() -> None:
        async with a.leadership("a") as term:
            reached.append(term)
            entered.set()
            await proceed.wait(10)
            reached.append(-term)  # asyncio: never (cancelled when the loss is reported)

    job = async_spawn(lead)
    try:
        assert await entered.wait(10)
        r.pexpire(LEADER, 1)
        assert await async_wait_until(lambda: not r.exists(LEADER))
        assert await b.campaign("b", timeout=1) == 2
        await b.resign()
        with pytest.raises(tenure.LockLostError, match="term 1 was lost"):
            await a.campaign("a", timeout=1)
        assert a.lost
        assert a.valid_for() == 0.0
        with pytest.raises(tenure.LockLostError):
            a.checkpoint()
        assert not r.exists(LEADER)  # nothing drawn, nobody queued
        assert r.get(TERM) == b"2"
        assert r.llen(QUEUE) == 0
        assert await async_wait_until(lambda: reported == [a], timeout=5)
    finally:
        proceed.set()
    outcome = await job.outcome()
    assert isinstance(outcome, tenure.LockLostError), outcome
    if async_is_asyncio:
        assert reached == [1]
        assert isinstance(outcome.__cause__, asyncio.CancelledError)
    assert await a.campaign("a", timeout=1) == 3  # a new leadership
    assert not a.lost
    a.checkpoint()
    await a.resign()
    assert not r.exists(LEADER)
    assert reported == [a]


async def test_campaign_again_while_still_leading_reports_nothing(async_client, r):
    reported: list[object] = []
    a = async_client.election("sched", on_lost=reported.append)
    assert await a.campaign("a") == 1
    r.pexpire(LEADER, 5000)
    assert await a.campaign("a", timeout=0) == 1  # the same leadership: lease re-applied
    assert r.pttl(LEADER) > 5000
    assert not a.lost
    await a.resign()
    assert reported == []


async def test_nested_leadership_resigns_at_the_outermost_exit(async_make_client, r):
    a = async_make_client().election("sched")
    b = async_make_client().election("sched")
    async with a.leadership("a") as outer:
        async with a.leadership("a") as inner:
            assert inner == outer == 1
        assert await a.is_leader()  # the outer block still runs under it
        a.checkpoint()
        assert a.valid_for() > 0
        assert await b.campaign("b", timeout=0) is None
    assert not r.exists(LEADER)
    assert await b.campaign("b", timeout=0) == 2


async def test_leadership_entered_by_two_tasks_ends_with_the_last(async_make_client, r):
    a = async_make_client().election("sched")
    b = async_make_client().election("sched")
    entered, leave = AsyncEvent(), AsyncEvent()

    async def first() -> bool:
        async with a.leadership("a") as term:
            assert term == 1
            entered.set()
            await leave.wait(10)
            return await a.is_leader()

    job = async_spawn(first)
    waiting = None
    try:
        assert await entered.wait(10)
        async with a.leadership("a") as term:  # the same candidate, another task
            assert term == 1
        assert await a.is_leader()
        waiting = async_spawn(lambda: b.campaign("b", timeout=10))
        assert await async_wait_until(lambda: r.llen(QUEUE) == 1)
        assert await a.is_leader()  # B waits while the first block runs
    finally:
        leave.set()
    assert await job.result() is True
    assert await waiting.result() == 2  # handed over at the last exit


async def test_nested_blocks_each_raise_a_loss_once(async_make_client, r):
    a = async_make_client(watchdog_timeout=0.6).election("sched")
    inner_left: list[BaseException] = []

    async def lead() -> None:
        async with a.leadership("a"):
            try:
                async with a.leadership("a"):
                    r.delete(LEADER)
                    await async_wait_until(lambda: a.lost, timeout=5)
                    if async_is_asyncio:  # cancelled at once; a thread's body runs on
                        await async_sleep(5)
            except BaseException as error:
                inner_left.append(error)
                raise

    with pytest.raises(tenure.LockLostError):
        await lead()
    assert len(inner_left) == 1
    with pytest.raises(tenure.NotOwnedError):  # the loss was raised, not kept for later
        await a.resign()


async def test_a_block_whose_leadership_was_lost_leaves_the_next_one_alone(async_make_client, r):
    # The watchdog reports term 1 lost; the candidate campaigns again (another task) and
    # leads term 2 while the term-1 block still runs: that block's exit raises the loss and
    # must not resign term 2.
    a = async_make_client(watchdog_timeout=0.6).election("sched")
    entered, proceed = AsyncEvent(), AsyncEvent()

    async def lead() -> None:
        async with a.leadership("a"):
            entered.set()
            await proceed.wait(10)

    job = async_spawn(lead)
    try:
        assert await entered.wait(10)
        r.delete(LEADER)
        assert await async_wait_until(lambda: a.lost, timeout=5)
        assert await a.campaign("a", timeout=1) == 2
    finally:
        proceed.set()
    assert isinstance(await job.outcome(), tenure.LockLostError)
    assert r.hget(LEADER, "term") == b"2"
    assert await a.is_leader()
    await a.resign()


async def test_a_block_entered_after_a_server_side_loss_ends_every_block(async_client, r):
    a = async_client.election("sched")
    refused: list[BaseException] = []

    async def lead() -> None:
        async with a.leadership("a") as term:
            assert term == 1
            r.pexpire(LEADER, 1)  # lost on the server; no renewal has seen it yet
            await async_wait_until(lambda: not r.exists(LEADER))
            try:
                async with a.leadership("a"):
                    pytest.fail("entered a leadership that was lost")
            except BaseException as error:
                refused.append(error)
                raise

    with pytest.raises(tenure.LockLostError):
        await lead()
    # The campaign refused (a thread); in asyncio the loss it reported cancelled the task
    # first, and the outer block turned that into LockLostError.
    expected = asyncio.CancelledError if async_is_asyncio else tenure.LockLostError
    assert [type(e) for e in refused] == [expected]
    assert a.lost
    assert not r.exists(LEADER)
    assert r.get(TERM) == b"1"


async def test_the_first_campaign_warns_once_when_the_server_persists_nothing(
    async_make_client, r, caplog, monkeypatch
):
    # Terms are fencing tokens: a restart of a server that persists nothing (the test
    # servers persist nothing) starts them over. One warning per client, as a FencedLock's.
    monkeypatch.delenv("TENURE_ACCEPT_NO_PERSISTENCE", raising=False)
    caplog.set_level(logging.WARNING, logger="tenure")
    c = async_make_client()
    election = c.election("sched")
    assert await election.campaign("a") == 1
    await election.resign()
    assert await election.campaign("a") == 2
    assert await c.election("other").campaign("b") == 1
    await c.fenced_lock("ledger").acquire()
    warned = [rec.getMessage() for rec in caplog.records if "persists nothing" in rec.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("election 'sched': ")
    assert "its terms start over" in warned[0]
    monkeypatch.setenv("TENURE_ACCEPT_NO_PERSISTENCE", "1")  # acknowledged: DEBUG
    caplog.clear()
    assert await async_make_client().election("sched").campaign("c", timeout=0) is None
    assert not [rec for rec in caplog.records if "persists nothing" in rec.getMessage()]


# An explicit resign() while leadership() blocks run under that leadership ends it for every
# block, as a loss does: a block of another task (or thread) raises LockLostError (in
# asyncio its body is cancelled at once); the block whose own caller resigned ends quietly.
# No block's exit resigns again or raises NotOwnedError for a leadership it saw resigned.


async def test_a_resign_inside_the_block_ends_it_quietly(async_make_client, r):
    a = async_make_client().election("sched")
    b = async_make_client().election("sched")
    async with a.leadership("a") as term:
        assert term == 1
        await a.resign()
        assert not await a.is_leader()
        with pytest.raises(tenure.NotOwnedError):  # it no longer leads
            a.checkpoint()
        assert a.valid_for() == 0.0
        assert await b.campaign("b", timeout=1) == 2  # handed over at the resign
    assert r.hget(LEADER, "term") == b"2"  # the exit did not resign again
    assert not a.lost
    await b.resign()


async def test_a_resign_in_a_nested_block_ends_both_quietly(async_make_client, r):
    a = async_make_client().election("sched")
    async with a.leadership("a"):
        async with a.leadership("a"):
            await a.resign()
        assert not await a.is_leader()
    assert not r.exists(LEADER)
    with pytest.raises(tenure.NotOwnedError):
        await a.resign()
    async with a.leadership("a") as term:  # a new leadership, its blocks as before
        assert term == 2
    assert not r.exists(LEADER)


async def test_a_resign_beside_a_block_ends_that_block(async_make_client, r):
    a = async_make_client().election("sched")
    entered, resigned = AsyncEvent(), AsyncEvent()
    went_on: list[bool] = []

    async def lead() -> None:
        async with a.leadership("a"):
            entered.set()
            assert await resigned.wait(10)  # asyncio: cancelled at the resign
            went_on.append(True)

    job = async_spawn(lead)
    try:
        assert await entered.wait(10)
        await a.resign()  # another task (thread) of the same candidate
    finally:
        resigned.set()
    ended = await job.outcome()
    assert isinstance(ended, tenure.LockLostError), ended
    assert "resigned" in str(ended)
    if async_is_asyncio:  # the body was cancelled; a thread's body ran on to its exit
        assert went_on == []
        assert isinstance(ended.__cause__, asyncio.CancelledError)
    else:
        assert went_on == [True]
    assert not r.exists(LEADER)  # resigned once: nothing more was asked of the server
    assert not a.lost
    with pytest.raises(tenure.NotOwnedError):
        await a.resign()


async def test_a_resign_from_one_block_ends_the_other_blocks(async_make_client, r):
    a = async_make_client().election("sched")
    entered, resigned = AsyncEvent(), AsyncEvent()

    async def lead() -> None:
        async with a.leadership("a", cancel_on_loss=False):
            entered.set()
            assert await resigned.wait(10)

    job = async_spawn(lead)
    try:
        assert await entered.wait(10)
        async with a.leadership("a") as term:  # the same leadership, another task
            assert term == 1
            await a.resign()
    finally:
        resigned.set()
    ended = await job.outcome()  # cancel_on_loss=False: raised at its exit
    assert isinstance(ended, tenure.LockLostError), ended
    assert not r.exists(LEADER)
