"""Small public rules the subset's other tests pass by: which channel messages are renewals
(``keys.renewed_lease``), which server refusals a retry cannot cure (``errors.refusal``), and
the fencing helpers' argument checks and their reply on a ``decode_responses`` client."""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import ResponseError

import tenure
from tenure import keys
from tenure.errors import refusal

LOCK = keys.lock_channel("l")


@pytest.mark.parametrize(
    ("payload", "channel", "lease"),
    [
        ("-30000", None, 30.0),
        ("-30000", LOCK, 30.0),
        ("-1500", keys.rw_channel("rw"), 1.5),
        ("0", LOCK, None),  # an unlock
        ("1", LOCK, None),  # an unlock that wakes every waiter
        ("-", LOCK, None),  # no number after the sign
        ("-12x", LOCK, None),
        ("-30000", "redisson_sc:{s}", None),  # a semaphore's negative count, not a renewal
    ],
)
def test_only_a_number_after_the_sign_on_a_lock_channel_is_a_renewal(
    payload: str, channel: str | None, lease: float | None
) -> None:
    assert keys.renewed_lease(payload, channel) == lease


def test_a_script_error_is_a_refusal_and_a_lost_connection_is_not() -> None:
    said = refusal(ResponseError("ERR user_script:1: Script attempted to access a key"))
    assert said is not None
    assert said.startswith("a script failed on the server (")
    compiled = refusal(ResponseError("Error compiling script (new function): user_script:1"))
    assert compiled is not None
    assert compiled.startswith("a script failed on the server")
    wrong = refusal(ResponseError("WRONGTYPE Operation against a key holding the wrong kind"))
    assert wrong is not None
    assert "choose another name" in wrong
    assert refusal(redis.ConnectionError("Connection refused")) is None
    assert refusal(ResponseError("LOADING Redis is loading the dataset in memory")) is None


@pytest.mark.parametrize(
    ("key", "token", "error", "words"),
    [
        ("", 1, TypeError, "key must be a non-empty str or bytes"),
        (b"", 1, TypeError, "key must be a non-empty str or bytes"),
        (5, 1, TypeError, "key must be a non-empty str or bytes"),
        ("res", True, TypeError, "token must be an int, not bool"),
        ("res", 1.0, TypeError, "token must be an int, not float"),
        ("res", -1, ValueError, "token must be >= 0, not -1"),
    ],
)
def test_fenced_writes_check_their_arguments_before_any_io(
    key: object, token: object, error: type[Exception], words: str
) -> None:
    # No server behind this client: a check that let the call through would fail to connect.
    nowhere = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.1)
    with pytest.raises(error, match=words):
        tenure.fenced_write(nowhere, key, token, b"v")  # type: ignore[arg-type]
    if words.startswith("key"):  # the read checks its key the same way
        with pytest.raises(TypeError, match=words):
            tenure.fenced_read(nowhere, key)  # type: ignore[arg-type]
    nowhere.close()


def test_a_fenced_read_gives_bytes_on_a_decoding_client(server) -> None:
    with redis.Redis.from_url(server.url, decode_responses=True) as r:
        r.delete("fenced-text")
        assert tenure.fenced_write(r, "fenced-text", 3, "balance=10")
        assert tenure.fenced_read(r, "fenced-text") == (3, b"balance=10")
        assert not tenure.fenced_write(r, "fenced-text", 2, "stale")
        assert tenure.fenced_read(r, "fenced-text") == (3, b"balance=10")
        r.delete("fenced-text")
