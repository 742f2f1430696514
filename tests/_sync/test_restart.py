# GENERATED from tests/_async/test_restart.py by tools/unasync.py: edit that file, not this one.
"""A server restarted on the same port between two calls: the client's pooled connections
to the old process are dead, their EOF already received. The first command after the
restart goes on a new connection; written to a dead socket it would fail as a command that
may have run (BackendError, and a reconcile in the background)."""

from __future__ import annotations

import pytest

import tenure
from support.servers import Server
from support.twins import sleep


@pytest.fixture
def own_server(server):
    """A server of the session's kind that this test may kill and start again."""
    s = Server(server.binary).start()
    yield s
    s.stop()


def test_the_first_acquire_after_a_restart_does_not_fail(own_server):
    with tenure.Client(
        own_server.url, socket_timeout=1, socket_connect_timeout=1
    ) as client:
        lock = client.lock("restarted")
        for _ in range(3):  # connections kept by the client and its pool
            assert lock.acquire(timeout=1)
            lock.release()
        own_server.kill()
        own_server.start()  # same port, a new process: the old sockets are closed
        # A moment for the event loop to see them close, as a live application's would.
        sleep(0.05)
        assert lock.acquire(timeout=1)
        assert lock.locked()
        lock.release()
        assert client.fair_lock("restarted-fair").acquire(timeout=1)
        client.fair_lock("restarted-fair").release()
