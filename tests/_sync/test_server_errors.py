# GENERATED from tests/_async/test_server_errors.py by tools/unasync.py: edit that file, not this one.
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


def test_a_server_that_needs_a_password_says_so(own_server):
    with own_server.client() as raw:
        raw.config_set("requirepass", "s3cret")
    client = tenure.Client(own_server.url)
    try:
        with pytest.raises(tenure.ServerError, match="the server needs a password") as caught:
            client.lock("pw").acquire(timeout=0)
        assert not isinstance(caught.value, ConnectionError | tenure.BackendError)
        assert caught.value.__cause__ is not None
    finally:
        client.close()
    wrong = tenure.Client(own_server.url.replace("redis://", "redis://:nope@"))
    try:
        with pytest.raises(tenure.ServerError, match="refused the username or password"):
            wrong.lock("pw").acquire(timeout=0)
    finally:
        wrong.close()
    right = tenure.Client(own_server.url.replace("redis://", "redis://:s3cret@"))
    try:
        assert right.lock("pw").acquire(timeout=0)
        right.lock("pw").release()
    finally:
        right.close()


def test_an_acl_that_forbids_scripts_is_a_server_error(own_server):
    with own_server.client() as raw:
        raw.execute_command(
            "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting"
        )
    client = tenure.Client(own_server.url.replace("redis://", "redis://noscripts:pw@"))
    try:
        with pytest.raises(tenure.ServerError, match="ACL") as caught:
            client.lock("acl").acquire(timeout=0)
        assert "NOPERM" in str(caught.value)
    finally:
        client.close()


def test_a_key_of_the_wrong_type_is_a_server_error(client, r):
    r.hset("sem-wrong", "a", "1")
    with pytest.raises(tenure.ServerError, match="wrong type"):
        client.semaphore("sem-wrong").available_permits()


def test_a_connection_fault_stays_a_backend_error():
    client = tenure.Client(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    try:
        with pytest.raises(tenure.BackendError) as caught:
            client.lock("nobody").acquire(timeout=0)
        assert isinstance(caught.value, ConnectionError)
        assert not isinstance(caught.value, tenure.ServerError)
    finally:
        client.close()
