# wait_for_replicas on a real server (asyncio source of tests/_sync/test_replicas.py).
"""wait_for_replicas: a replica_timeout that the command timeout would cut short is refused
at construction; a replica count that cannot be met raises ReplicationError within the
replica timeout, and the unreplicated grant is undone."""

from __future__ import annotations

import time

import pytest

import tenure
from support.twins import AsyncRedis


@pytest.mark.parametrize("replica_timeout", [1.0, 2.5])
async def test_replica_timeout_not_below_socket_timeout_is_refused(server, replica_timeout):
    with pytest.raises(ValueError, match=r"replica_timeout.*socket_timeout"):
        tenure.AsyncClient(
            server.url, wait_for_replicas=1, replica_timeout=replica_timeout, socket_timeout=1.0
        )


async def test_a_passed_in_clients_socket_timeout_counts(server):
    redis = AsyncRedis.from_url(server.url, socket_timeout=0.5)
    try:
        with pytest.raises(ValueError, match=r"replica_timeout.*socket_timeout"):
            tenure.AsyncClient(redis, wait_for_replicas=1)  # replica_timeout 1.0 by default
    finally:
        await redis.aclose()


async def test_replica_timeout_is_free_without_waiting_or_socket_timeout(async_make_client):
    async_make_client(replica_timeout=5.0, socket_timeout=1.0)  # wait_for_replicas=0
    async_make_client(wait_for_replicas=1, replica_timeout=5.0, socket_timeout=None)
    async_make_client(wait_for_replicas=1, replica_timeout=0.9, socket_timeout=1.0)


async def test_missing_replica_raises_replication_error_within_bound(async_make_client, r):
    """A server without replicas cannot meet wait_for_replicas=1: ReplicationError after
    about replica_timeout (not BackendError at the socket timeout), the grant undone."""
    client = async_make_client(wait_for_replicas=1, replica_timeout=0.3, socket_timeout=1.0)
    lock = client.lock("unreplicated")
    started = time.monotonic()
    with pytest.raises(tenure.ReplicationError) as caught:
        await lock.acquire()
    took = time.monotonic() - started
    assert caught.value.acknowledged == 0
    # the grant's WAIT (0.3 s) and the undo's WAIT (0.3 s), well inside one socket timeout each
    assert 0.3 <= took < 0.9, f"took {took:.3f} s"
    assert not r.exists("unreplicated")
