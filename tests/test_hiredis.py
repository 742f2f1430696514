"""With hiredis installed redis-py parses replies with it, and its parser keeps a plain
bytearray where the Python parser keeps a SocketBuffer. The sync client's spare-connection
check must work with both (CI's floor job installs hiredis; skipped where it is absent)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import redis

import tenure

hiredis = pytest.importorskip("hiredis")


def test_lock_cycles_on_spare_connections_with_the_hiredis_parser(
    make_client: Callable[..., tenure.Client],
) -> None:
    client = make_client()
    assert isinstance(client.redis, redis.Redis)
    probe = client.redis.connection_pool.make_connection()
    assert isinstance(probe, redis.connection.AbstractConnection)
    assert "Hiredis" in type(probe._parser).__name__  # the parser this test is about
    probe.disconnect()
    lock = client.lock("hiredis")
    done = 0

    def cycle() -> None:
        nonlocal done
        for _ in range(50):
            with lock:
                done += 1

    threads = [threading.Thread(target=cycle) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert done == 200
    assert not lock.locked()
