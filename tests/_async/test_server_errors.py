# Server refusals (asyncio source of tests/_sync/test_server_errors.py).
"""A refusal that retrying cannot cure is a ServerError (not a ConnectionError) that says
what to do; a connection fault stays a BackendError."""

from __future__ import annotations

import pytest

import tenure
from support.servers import Server, free_port


@pytest.fixture
def own_server(server):
    """A server of the session's kind that this test may reconfigure."""
    s = Server(server.binary).start()
    yield s
    s.stop()


async def test_a_server_that_needs_a_password_says_so(own_server):
    with own_server.client() as raw:
        raw.config_set("requirepass", "s3cret")
    client = tenure.AsyncClient(own_server.url)
    try:
        with pytest.raises(tenure.ServerError, match="the server needs a password") as caught:
            await client.lock("pw").acquire(timeout=0)
        assert not isinstance(caught.value, ConnectionError | tenure.BackendError)
        assert caught.value.__cause__ is not None
    finally:
        await client.close()
    wrong = tenure.AsyncClient(own_server.url.replace("redis://", "redis://:nope@"))
    try:
        with pytest.raises(tenure.ServerError, match="refused the username or password"):
            await wrong.lock("pw").acquire(timeout=0)
    finally:
        await wrong.close()
    right = tenure.AsyncClient(own_server.url.replace("redis://", "redis://:s3cret@"))
    try:
        assert await right.lock("pw").acquire(timeout=0)
        await right.lock("pw").release()
    finally:
        await right.close()


async def test_an_acl_that_forbids_scripts_is_a_server_error(own_server):
    with own_server.client() as raw:
        raw.execute_command(
            "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting"
        )
    client = tenure.AsyncClient(own_server.url.replace("redis://", "redis://noscripts:pw@"))
    try:
        with pytest.raises(tenure.ServerError, match="ACL") as caught:
            await client.lock("acl").acquire(timeout=0)
        assert "NOPERM" in str(caught.value)
    finally:
        await client.close()


async def test_a_key_of_the_wrong_type_is_a_server_error(async_client, r):
    r.hset("sem-wrong", "a", "1")
    with pytest.raises(tenure.ServerError, match="wrong type"):
        await async_client.semaphore("sem-wrong").available_permits()


async def test_a_connection_fault_stays_a_backend_error():
    client = tenure.AsyncClient(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    try:
        with pytest.raises(tenure.BackendError) as caught:
            await client.lock("nobody").acquire(timeout=0)
        assert isinstance(caught.value, ConnectionError)
        assert not isinstance(caught.value, tenure.ServerError)
    finally:
        await client.close()
