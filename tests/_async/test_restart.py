# A server restarted between two calls (asyncio source of tests/_sync/test_restart.py).
"""A server restarted on the same port between two calls: the client's pooled connections
to the old process are dead, their EOF already received. The first command after the
restart goes on a new connection; written to a dead socket it would fail as a command that
may have run (BackendError, and a reconcile in the background)."""

from __future__ import annotations

import pytest

import tenure
from support.servers import Server
from support.twins import async_sleep


@pytest.fixture
def own_server(server):
    """A server of the session's kind that this test may kill and start again."""
    s = Server(server.binary).start()
    yield s
    s.stop()


async def test_the_first_acquire_after_a_restart_does_not_fail(own_server):
    async with tenure.AsyncClient(
        own_server.url, socket_timeout=1, socket_connect_timeout=1
    ) as client:
        lock = client.lock("restarted")
        for _ in range(3):  # connections kept by the client and its pool
            assert await lock.acquire(timeout=1)
            await lock.release()
        own_server.kill()
        own_server.start()  # same port, a new process: the old sockets are closed
        # A moment for the event loop to see them close, as a live application's would.
        await async_sleep(0.05)
        assert await lock.acquire(timeout=1)
        assert await lock.locked()
        await lock.release()
        assert await client.fair_lock("restarted-fair").acquire(timeout=1)
        await client.fair_lock("restarted-fair").release()
