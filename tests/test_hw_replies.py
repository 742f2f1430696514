"""`tenure._redis.read_response()` reads what redis-py's ``read_response()`` reads, on a real
server, in RESP2 and RESP3: the one-line replies it parses itself (integers, nulls, simple
strings) and every other reply it hands on to redis-py (errors, bulk strings, arrays);
a timeout or a closed connection fails as redis-py fails, the connection dropped."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from support.servers import Server
from tenure._redis import listener_connection, read_push, read_response

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
    ("HSTRLEN", "h", "f"),
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


@pytest.mark.parametrize("decode", [False, True])
def test_the_pubsub_replies_are_redis_pys(server: Server, r: redis.Redis, decode: bool) -> None:
    """`tenure._redis.read_push()` parses a message received whole itself: the replies it
    returns are those redis-py reads on a twin connection, one by one, also when several
    came in one recv (redis-py reads them from its buffer)."""
    ours = listener_connection(redis.Redis.from_url(server.url, decode_responses=decode))
    theirs = listener_connection(redis.Redis.from_url(server.url, decode_responses=decode))
    for conn in (ours, theirs):
        conn.connect()
        conn.send_command("SUBSCRIBE", "hw:a", "hw:b\r\nc")
        conn.send_command("PSUBSCRIBE", "hw:p*")
    try:
        wanted = [theirs.read_response() for _ in range(3)]
        assert [read_push(ours, 5) for _ in range(3)] == wanted
        payloads = ["0", "", "-30000", "line\r\nbreak", "é" * 3000, "x" * 100_000]
        for payload in payloads:  # one at a time: each mostly a recv of its own
            r.publish("hw:a", payload)
            assert read_push(ours, 5) == theirs.read_response()
        r.publish("hw:b\r\nc", "1")
        r.publish("hw:pq", "2")  # a pattern's message: four items
        for payload in payloads:  # several in one recv
            r.publish("hw:a", payload)
        for conn in (ours, theirs):
            conn.send_command("PING")
            conn.send_command("UNSUBSCRIBE", "hw:a")
        for _ in range(len(payloads) + 4):
            assert read_push(ours, 5) == theirs.read_response()
        assert read_push(ours, 0.05) is None  # nothing left
    finally:
        ours.disconnect()
        theirs.disconnect()


@pytest.mark.parametrize(
    ("pieces", "wanted"),
    [
        ([b":", b"12\r\n"], 12),
        ([b"_", b"\r\n"], None),
        ([b"+O", b"K\r\n"], b"OK"),
        ([b":1", b"2", b"\r\n"], 12),
        ([b"$5\r\nhel", b"lo\r\n"], b"hello"),
    ],
)
def test_a_reply_in_pieces_is_read_whole(
    server: Server, pieces: list[bytes], wanted: object
) -> None:
    """A reply that comes in several recvs (the server's bytes here written by the test
    through a socket pair) is read to its end, never taken for a shorter one."""
    conn = _connection(server, 3, socket_timeout=5)
    conn.connect()
    if not hasattr(conn._parser._buffer, "_sock"):
        conn.disconnect()
        pytest.skip("hiredis's parser: redis-py reads every reply (no parsing of ours)")
    ours, peer = socket.socketpair()
    real = conn._sock
    conn._sock = conn._parser._buffer._sock = ours
    ours.settimeout(5)

    def write() -> None:
        for piece in pieces:
            peer.sendall(piece)
            time.sleep(0.02)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_response(conn) == wanted
        peer.sendall(b":7\r\n")  # the next reply is the next one, nothing left over
        assert read_response(conn) == 7
    finally:
        writer.join()
        conn._sock = conn._parser._buffer._sock = real
        conn.disconnect()
        ours.close()
        peer.close()
