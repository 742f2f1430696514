"""All redis-py glue: the client classes, building a client, reading pub/sub, error mapping.

The drivers import redis-py only through this module. The asyncio names (``AsyncRedis``,
``async_read_push``) become the sync ones (``Redis``, ``read_push``) in the generated
driver, by the same substitution as everything else (``tools/unasync.py``).
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.retry import Retry

from tenure.errors import BackendError, LockError, LockKindError

__all__ = [
    "AsyncBlockingPool",
    "AsyncRedis",
    "BlockingPool",
    "NoScriptError",
    "Redis",
    "RedisError",
    "ResponseError",
    "async_read_push",
    "backend_error",
    "listener_connection",
    "read_push",
    "resolve_redis",
    "text",
]

Redis = redis.Redis
AsyncRedis = redis.asyncio.Redis
BlockingPool = redis.BlockingConnectionPool
AsyncBlockingPool = redis.asyncio.BlockingConnectionPool


def resolve_redis(
    url_or_redis: Any,
    redis_class: type[Any],
    pool_class: type[Any],
    socket_timeout: float | None,
    socket_connect_timeout: float | None,
) -> tuple[Any, bool, float | None]:
    """The redis-py client a tenure client uses: (client, owned by tenure, command timeout).

    From a URL tenure builds a blocking pool: with more concurrent commands than connections,
    callers wait for a free one (each comes back within a command's socket timeout) instead of
    failing with MaxConnectionsError (redis-py's default pool caps at 100). Retries are off:
    redis-py would resend a lock script after a timeout and hide how long a dead server takes.
    A passed-in ``redis_class`` instance keeps its own pool, timeouts and retries.
    """
    if isinstance(url_or_redis, str):
        pool = pool_class.from_url(
            url_or_redis,
            max_connections=100,
            timeout=None,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
            retry=Retry(NoBackoff(), 0),
        )
        return redis_class.from_pool(pool), True, socket_timeout
    if isinstance(url_or_redis, redis_class):
        kwargs = url_or_redis.connection_pool.connection_kwargs
        return url_or_redis, False, kwargs.get("socket_timeout")
    raise TypeError(
        f"url_or_redis must be a URL str or a {redis_class.__module__}.{redis_class.__name__}, "
        f"not {type(url_or_redis).__name__}"
    )


KIND_ERROR = "TENURE_KIND "
"""Start of a script's error reply refusing a key of another kind (``scripts/_kinds.lua``)."""


def backend_error(error: Exception) -> LockError:
    """A redis-py error as tenure's :class:`BackendError`, the original chained as cause;
    a script's refusal of a key of another kind as :class:`LockKindError`."""
    wrapped: LockError
    message = str(error)
    if isinstance(error, ResponseError) and KIND_ERROR in message:
        detail = message[message.index(KIND_ERROR) + len(KIND_ERROR) :]
        wrapped = LockKindError(detail.split(" script: ")[0])
    else:
        wrapped = BackendError(f"{type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def listener_connection(client: Any) -> Any:
    """A new connection for pub/sub, made like the client pool's connections but in RESP2
    (messages arrive as plain replies; RESP3 routes them to push handlers), without
    health checks (the listener PINGs itself) and without redis-py's maintenance
    notifications, which need RESP3 or hiredis."""
    pool = client.connection_pool
    kwargs = {
        k: v for k, v in pool.connection_kwargs.items() if not k.startswith("maint_notifications")
    }
    kwargs.update(health_check_interval=0, protocol=2)
    return pool.connection_class(**kwargs)


async def async_read_push(conn: Any, timeout: float) -> Any:
    """The next reply on a pub/sub connection, or None when nothing came within ``timeout``."""
    return await conn.read_response(timeout=timeout)


def read_push(conn: Any, timeout: float) -> Any:
    """The next reply on a pub/sub connection, or None when nothing came within ``timeout``."""
    if not conn.can_read(timeout=timeout):
        return None
    return conn.read_response()
