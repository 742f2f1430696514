"""Client options shared by :class:`tenure.Client` and :class:`tenure.AsyncClient`."""

from __future__ import annotations

from typing import Any

from tenure.core.args import check_positive, to_ms
from tenure.core.context import Context
from tenure.core.effects import Call
from tenure.errors import BackendError, ReplicationError


def make_context(
    *,
    watchdog_timeout: Any,
    name_prefix: Any,
    wait_for_replicas: Any,
    replica_timeout: Any,
) -> Context:
    """Check the options (before any I/O) and build the client's context."""
    if not isinstance(name_prefix, str):
        raise TypeError(f"name_prefix must be a str, not {type(name_prefix).__name__}")
    if isinstance(wait_for_replicas, bool) or not isinstance(wait_for_replicas, int):
        raise TypeError("wait_for_replicas must be an int")
    if wait_for_replicas < 0:
        raise ValueError(f"wait_for_replicas must be >= 0, not {wait_for_replicas}")
    return Context(
        watchdog_timeout=check_positive(watchdog_timeout, "watchdog_timeout"),
        name_prefix=name_prefix,
        wait_for_replicas=wait_for_replicas,
        replica_timeout=check_positive(replica_timeout, "replica_timeout"),
    )


def check_timeouts(socket_timeout: Any, socket_connect_timeout: Any) -> None:
    for value, what in (
        (socket_timeout, "socket_timeout"),
        (socket_connect_timeout, "socket_connect_timeout"),
    ):
        if value is not None:
            check_positive(value, what)


def backend_error(error: Exception) -> BackendError:
    """A redis-py error as tenure's :class:`BackendError`, the original chained as cause."""
    wrapped = BackendError(f"{type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


def replica_wait(ctx: Context, call: Call) -> tuple[int, int] | None:
    """``(replicas, timeout_ms)`` of the ``WAIT`` a driver sends after ``call``, or None.

    Only scripts that change lock state wait, and only with ``wait_for_replicas`` >= 1.
    """
    if not call.changes or ctx.wait_for_replicas < 1:
        return None
    return ctx.wait_for_replicas, to_ms(ctx.replica_timeout)


def check_replicas(ctx: Context, call: Call, reply: object, acknowledged: int) -> None:
    """Raise :class:`ReplicationError` when ``WAIT`` saw fewer replicas than required.

    (Redisson's ``checkLockSyncedSlaves``.) The error carries the script's ``reply`` so the
    flow that sent the script can undo what it changed (see ``LockCore.acquire_call``).
    """
    if acknowledged < ctx.wait_for_replicas:
        raise ReplicationError(
            f"{call.script.name}: {acknowledged} of {ctx.wait_for_replicas} replicas "
            f"acknowledged within {ctx.replica_timeout} s",
            reply=reply,
            acknowledged=acknowledged,
        )


def resolve_redis(
    url_or_redis: Any,
    redis_class: type[Any],
    pool_class: type[Any],
    retry: Any,
    socket_timeout: float | None,
    socket_connect_timeout: float | None,
) -> tuple[Any, bool, float | None]:
    """The redis-py client a tenure client uses: (client, owned by tenure, command timeout).

    From a URL tenure builds a blocking pool: with more concurrent commands than connections,
    callers wait for a free one (each comes back within a command's socket timeout) instead of
    failing with MaxConnectionsError (redis-py's default pool caps at 100). Retries are off. A
    passed-in ``redis_class`` instance keeps its own pool and timeouts.
    """
    if isinstance(url_or_redis, str):
        pool = pool_class.from_url(
            url_or_redis,
            max_connections=100,
            timeout=None,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
            retry=retry,
        )
        return redis_class.from_pool(pool), True, socket_timeout
    if isinstance(url_or_redis, redis_class):
        kwargs = url_or_redis.connection_pool.connection_kwargs
        return url_or_redis, False, kwargs.get("socket_timeout")
    raise TypeError(
        f"url_or_redis must be a URL str or a {redis_class.__module__}.{redis_class.__name__}, "
        f"not {type(url_or_redis).__name__}"
    )
