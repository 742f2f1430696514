"""`tenure._redis.pack_command()` sends the bytes redis-py's own packer sends, for every
argument kind (its fast path covers text, whole numbers and bytes; the rest goes to redis-py).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.asyncio
from hypothesis import given
from hypothesis import strategies as st

from tenure._redis import pack_command

WORDS = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.binary(max_size=40),
    st.floats(allow_nan=False),
)


def _connections() -> list[Any]:
    return [redis.Connection(), redis.asyncio.Connection()]


@given(st.sampled_from(["EVALSHA", "SET", "CLIENT SETINFO", "PUBSUB NUMSUB"]), st.lists(WORDS))
def test_the_bytes_are_redis_pys(name: str, words: list[object]) -> None:
    for conn in _connections():
        args = (name, *words)
        assert b"".join(pack_command(conn, args)) == b"".join(conn.pack_command(*args))


def test_a_big_argument_goes_out_whole() -> None:
    for conn in _connections():
        args = ("SET", "k", "v" * 100_000)
        assert b"".join(pack_command(conn, args)) == b"".join(conn.pack_command(*args))


@pytest.mark.parametrize("word", [True, None, object()])
def test_what_redis_py_refuses_it_refuses(word: object) -> None:
    for conn in _connections():
        with pytest.raises(redis.exceptions.DataError):
            conn.pack_command("SET", "k", word)
        with pytest.raises(redis.exceptions.DataError):
            pack_command(conn, ("SET", "k", word))


def test_another_encoding_is_left_to_redis_py() -> None:
    conn = redis.Connection(encoding="latin-1")
    args = ("SET", "k", "café")
    assert b"".join(pack_command(conn, args)) == b"".join(conn.pack_command(*args))
