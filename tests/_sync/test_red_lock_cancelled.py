# GENERATED from tests/_async/test_red_lock_cancelled.py by tools/unasync.py: edit that file, not this one.
"""A RedLock acquire cancelled while members are still answering (three of five nodes
hung): the caller gets the cancellation, and no member stays held for nobody: the grants
already made and the ones that come after the cancellation (the hung nodes run the script
once resumed) are released well before their lease ends (DESIGN §1: never an orphan hold).
asyncio only: a thread's wait cannot be cancelled from outside (the sync twin skips)."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from support.twins import is_asyncio, spawn, wait_until
from support.wire import keys_on

NAME = "red-cancelled"
HUNG = (0, 1, 2)

# Skipped before the five servers start.
pytestmark = pytest.mark.skipif(
    not is_asyncio, reason="a thread's wait cannot be cancelled from outside (asyncio only)"
)


def test_a_cancelled_acquire_leaves_no_member_held(nodes):
    clients = [tenure.Client(s.url, socket_timeout=10.0) for s in nodes]
    try:
        red = clients[0].red_lock(*(c.lock(NAME) for c in clients), node_timeout=5.0)
        # One round with every node up: each client knows its server and has a connection
        # (a first use on a hung node would wait for the server's INFO before sending).
        assert red.acquire(lease_time=30)
        red.release()
        assert wait_until(lambda: keys_on(nodes, NAME) == [False] * 5, 5)
        for i in HUNG:
            nodes[i].pause()
        up = [s for i, s in enumerate(nodes) if i not in HUNG]
        job = spawn(lambda: red.acquire(timeout=30, lease_time=30))
        # The two live nodes granted; the round waits for the hung ones' replies.
        assert wait_until(lambda: keys_on(up, NAME) == [True, True], 5)
        assert not job.done()
        assert hasattr(job, "task")  # an asyncio job (the skip above)
        job.task.cancel()
        assert isinstance(job.outcome(5), asyncio.CancelledError)
        for i in HUNG:
            nodes[i].resume()  # their scripts run now: late grants, for nobody
        # Released, not expired (the lease is 30 s).
        assert wait_until(lambda: keys_on(nodes, NAME) == [False] * 5, 5), keys_on(
            nodes, NAME
        )
        assert not red.owned()
        red.close()
    finally:
        for i in HUNG:
            nodes[i].resume()
        for c in clients:
            c.close()
