"""Using fencing tokens: a fenced value stored in Redis.

A [`tenure.FencedLock`][tenure.FencedLock] hands out tokens that strictly increase per lock name.
The lock
alone cannot stop a holder that was paused past its lease; the *resource* must check tokens
(Kleppmann, "How to do distributed locking"). These helpers show how, for a resource kept in
Redis: a HASH ``key`` with fields ``token`` (highest token seen) and ``value``.

A write carrying a token *lower* than the highest seen is refused; an *equal* token is accepted,
so a holder may write several times under one acquisition (and a re-entry, which draws a new,
higher token, may write too). The check and the store happen in one Lua script, atomically.
The resource may live on any server, not necessarily the lock's.

Example:
    ```python
    token = lock.acquire_token(timeout=5)
    if token is not None:
        try:
            if not tenure.fenced_write(r, "ledger", token, b"balance=10"):
                ...  # a newer holder has written: our lock was lost meanwhile
        finally:
            lock.release()
    ```
"""

from __future__ import annotations

import redis

from tenure import keys, scripts

_WRITE = scripts.get("fenced_write")


def _check(key: object, token: object) -> None:
    if not isinstance(key, str | bytes) or not key:
        raise TypeError("key must be a non-empty str or bytes")
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError(f"token must be an int, not {type(token).__name__}")
    if token < 0:
        raise ValueError(f"token must be >= 0, not {token}")


def fenced_write(redis_client: redis.Redis, key: str, token: int, value: bytes | str) -> bool:
    """Store ``value`` at ``key`` unless a higher fencing token was already seen there.

    Args:
        redis_client: any sync redis-py client holding the protected resource.
        key: the resource's key (a HASH with fields ``token`` and ``value``).
        token: the writer's token from
            [`tenure.FencedLock.acquire_token()`][tenure.FencedLock.acquire_token] / ``token``.
        value: the new value (bytes or str).

    Returns:
        True when stored (``token`` >= every token seen before); False when refused because
            a higher token was already stored (the writer's lock was lost to a newer holder).

    Raises:
        TypeError, ValueError: a bad argument, before any I/O.
        redis.RedisError: from redis-py, unchanged (this helper is not a lock method).
    """
    _check(key, token)
    script = redis_client.register_script(_WRITE.source)
    stored = script(
        keys=[key], args=[keys.FENCED_TOKEN_FIELD, keys.FENCED_VALUE_FIELD, token, value]
    )
    return int(stored) == 1


def fenced_read(redis_client: redis.Redis, key: str) -> tuple[int, bytes] | None:
    """The ``(token, value)`` last stored at ``key`` by
    [`fenced_write()`][tenure.fencing.fenced_write], or None.

    Raises TypeError for a bad key and redis-py errors unchanged.
    """
    _check(key, 0)
    token, value = redis_client.hmget(key, [keys.FENCED_TOKEN_FIELD, keys.FENCED_VALUE_FIELD])
    if token is None:
        return None
    if isinstance(value, str):  # a client with decode_responses=True
        value = value.encode()
    return int(token), value if value is not None else b""
