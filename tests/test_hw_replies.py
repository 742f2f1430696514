"""`tenure._redis.read_response()` reads what redis-py's ``read_response()`` reads, on a real
server, in RESP2 and RESP3: the one-line replies it parses itself (integers, nulls, simple
strings) and every other reply it hands on to redis-py (errors, bulk strings, arrays);
a timeout or a closed connection fails as redis-py fails, the connection dropped."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from support.servers import Server
from tenure._redis import read_response

COMMANDS: list[tuple[Any, ...]] = [
    ("SET", "k", "v"),  # +OK
    ("PING",),  # +PONG
    ("INCR", "n"),  # an integer
    ("DECRBY", "n", 5),  # a negative integer
    ("GET", "k"),  # a bulk string
    ("GET", "absent"),  # a null
    ("EVAL", "return nil", 0),  # a null from a script
    ("EVAL", "return 7", 0),
    ("EVAL", "return {1, 'a', {2}}", 0),  # an array
    ("HSET", "h", "f", "x" * 100_000),  # an integer after a big command
    ("HGET", "h", "f"),  # a bulk string in several pieces
    ("PEXPIRE", "h", 30_000),
    ("PTTL", "h"),
    ("ECHO", "line\r\nbreak"),  # a bulk string with a CRLF inside
]


def _connection(server: Server, protocol: int, **kwargs: Any) -> Any:
    client = redis.Redis.from_url(server.url, protocol=protocol, **kwargs)
    return client.connection_pool.make_connection()


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("decode", [False, True])
def test_the_replies_are_redis_pys(server: Server, protocol: int, decode: bool) -> None:
    ours = _connection(server, protocol, decode_responses=decode)
    theirs = _connection(server, protocol, decode_responses=decode)
    theirs.connect()
    theirs.send_command("SELECT", 1)  # a database of its own: the same replies
    theirs.read_response()
    theirs.send_command("FLUSHDB")
    theirs.read_response()
    ours.connect()
    ours.send_command("SELECT", 2)
    ours.read_response()
    ours.send_command("FLUSHDB")
    ours.read_response()
    try:
        for command in COMMANDS:
            ours.send_command(*command)
            theirs.send_command(*command)
            assert read_response(ours) == theirs.read_response(), command
        for conn in (ours, theirs):  # an error reply: redis-py's own exception
            conn.send_command("EVALSHA", "0" * 40, 0)
            with pytest.raises(NoScriptError):
                read_response(conn) if conn is ours else conn.read_response()
        ours.send_command("PING")  # the connection goes on, in step
        assert read_response(ours) in (b"PONG", "PONG")
    finally:
        ours.disconnect()
        theirs.disconnect()


def test_a_timeout_drops_the_connection(server: Server) -> None:
    conn = _connection(server, 3, socket_timeout=0.05)
    conn.connect()
    conn.send_command("BLPOP", "nothing", 1)
    with pytest.raises(RedisTimeoutError):
        read_response(conn)
    assert conn._sock is None  # never read again: the late reply would be the next one's


def test_a_closed_connection_fails_as_redis_pys(server: Server, r: redis.Redis) -> None:
    conn = _connection(server, 3)
    conn.connect()
    conn.send_command("CLIENT", "ID")
    killed = read_response(conn)
    r.client_kill_filter(_id=killed)
    conn.send_command("PING")
    with pytest.raises(RedisConnectionError):
        read_response(conn)
    assert conn._sock is None
