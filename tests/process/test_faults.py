"""A dead or hung server raises BackendError within the socket timeout; nothing hangs."""

from __future__ import annotations

import time

import pytest

import tenure
from support.servers import Server, valkey_binary
from support.twins import spawn
from tenure import keys


@pytest.fixture
def own_server():
    srv = Server(valkey_binary()).start()
    yield srv
    srv.stop()


def test_killed_server_gives_backend_error_quickly(own_server):
    with tenure.Client(own_server.url, socket_timeout=1.0, socket_connect_timeout=1.0) as client:
        lock = client.lock("k")
        assert lock.acquire()
        own_server.kill()
        for call in (lock.release, lock.acquire, lock.locked):
            start = time.monotonic()
            with pytest.raises(tenure.BackendError) as info:
                call()
            assert time.monotonic() - start < 1.5
            assert isinstance(info.value, ConnectionError)
            assert info.value.__cause__ is not None


def test_hung_server_gives_backend_error_within_socket_timeout(own_server):
    with tenure.Client(own_server.url, socket_timeout=1.0) as client:
        lock = client.lock("h")
        lock.locked()  # connect first: the hang must hit a command, not the connect
        own_server.pause()
        try:
            start = time.monotonic()
            with pytest.raises(tenure.BackendError):
                lock.acquire(timeout=0, lease_time=5)
            assert time.monotonic() - start < 1.0 + 0.5  # no hidden retries
        finally:
            own_server.resume()
        # the acquire that landed late expires with its lease; the socket was not reused
        remaining = client.lock("h").remaining_lease()
        assert remaining is None or remaining <= 5


def test_waiter_gets_backend_error_when_server_dies(own_server):
    with (
        tenure.Client(own_server.url, socket_timeout=1.0, socket_connect_timeout=1.0) as a,
        tenure.Client(own_server.url, socket_timeout=1.0, socket_connect_timeout=1.0) as b,
    ):
        a.lock("w").acquire(lease_time=30)
        import threading

        outcome: list[BaseException] = []

        def wait() -> None:
            try:
                b.lock("w").acquire(timeout=30)
            except BaseException as error:
                outcome.append(error)

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.3)
        own_server.kill()
        t.join(10)
        assert not t.is_alive(), "the waiter hung on a dead server"
        assert outcome
        assert isinstance(outcome[0], tenure.BackendError)


def test_close_wakes_waiters_with_backend_error(own_server):
    import threading

    holder = tenure.Client(own_server.url)
    holder.lock("c").acquire()
    client = tenure.Client(own_server.url)
    outcome: list[BaseException] = []
    started = threading.Event()

    def wait() -> None:
        started.set()
        try:
            client.lock("c").acquire()
        except BaseException as error:
            outcome.append(error)

    t = threading.Thread(target=wait)
    t.start()
    started.wait()
    time.sleep(0.3)
    client.close()
    t.join(5)
    assert not t.is_alive()
    assert outcome
    assert isinstance(outcome[0], tenure.BackendError)
    holder.close()


def test_fair_backend_timeout_while_waiting_leaves_queue() -> None:
    """A fair waiter whose attempt times out (server stalled) leaves the queue afterwards."""
    srv = Server(valkey_binary()).start()
    raw = srv.client()
    try:
        holder = tenure.Client(srv.url)
        assert holder.fair_lock("stall").acquire(lease_time=30)
        waiter = tenure.Client(srv.url, socket_timeout=0.5)
        srv.pause()
        try:
            job = spawn(lambda: waiter.fair_lock("stall").acquire(timeout=10))
            time.sleep(0.8)  # the waiter's attempt times out meanwhile; its cleanup is in flight
        finally:
            srv.resume()
        assert isinstance(job.outcome(), tenure.BackendError)
        assert raw.llen(keys.fair_queue_key("stall")) == 0
        assert raw.zcard(keys.fair_timeout_key("stall")) == 0
        assert raw.exists("stall") == 1  # the holder still holds it
        waiter.close()
        holder.close()
    finally:
        raw.close()
        srv.stop()
