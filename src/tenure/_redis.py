"""All redis-py glue: the client classes, building a client, reading pub/sub, error mapping.

The drivers import redis-py only through this module. The asyncio names (``AsyncRedis``,
``async_read_push``) become the sync ones (``Redis``, ``read_push``) in the generated
driver, by the same substitution as everything else (``tools/unasync.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import select
import socket
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    AuthenticationError,
    MovedError,
    NoScriptError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from tenure._concurrency import AsyncMutex, Mutex
from tenure.errors import BackendError, LockError, LockKindError, ServerError, refusal
from tenure.keys import cluster_safe

__all__ = [
    "AskError",
    "AsyncBlockingPool",
    "AsyncRedis",
    "AsyncRedisCluster",
    "AsyncRoute",
    "BlockingPool",
    "MovedError",
    "NoScriptError",
    "NotReady",
    "Redis",
    "RedisCluster",
    "RedisError",
    "ResponseError",
    "Route",
    "TryAgainError",
    "Unsent",
    "async_idle",
    "async_read_push",
    "async_read_reply",
    "async_send_command",
    "backend_error",
    "check_one_slot",
    "idle",
    "listener_connection",
    "read_push",
    "read_reply",
    "resolve_redis",
    "send_command",
    "text",
    "unsent",
]

Redis = redis.Redis
AsyncRedis = redis.asyncio.Redis
BlockingPool = redis.BlockingConnectionPool
AsyncBlockingPool = redis.asyncio.BlockingConnectionPool
RedisCluster = redis.cluster.RedisCluster
AsyncRedisCluster = redis.asyncio.cluster.RedisCluster


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
    cluster_class = RedisCluster if redis_class is Redis else AsyncRedisCluster
    if isinstance(url_or_redis, cluster_class):
        kwargs = url_or_redis.get_connection_kwargs()
        return url_or_redis, False, kwargs.get("socket_timeout")
    raise TypeError(
        f"url_or_redis must be a URL str, a {redis_class.__module__}.{redis_class.__name__} "
        f"or a {cluster_class.__module__}.{cluster_class.__name__}, "
        f"not {type(url_or_redis).__name__}"
    )


CLUSTER_REDIS_PY = (7, 2)
"""The lowest redis-py whose cluster client tenure can drive (``ClusterNode.release``,
``NodesManager.move_slot``, a topology refresh that leaves in-flight connections alone)."""


def require_cluster_support(version: str = redis.__version__) -> None:
    """Raise :class:`BackendError` when the installed redis-py is too old for Redis Cluster
    (single servers and Sentinel work from the package's floor, 5.3.0)."""
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < CLUSTER_REDIS_PY:
        wanted = ".".join(map(str, CLUSTER_REDIS_PY))
        raise BackendError(
            f"Redis Cluster needs redis-py >= {wanted} (installed: {version}); "
            f"pip install 'redis>={wanted}'"
        )


def cluster_from_url(
    cluster_class: type[Any], url: str, timeout: float | None, connect: float | None
) -> Any:
    """A redis-py cluster client for ``url`` with tenure's timeouts and no retries; each
    node's pool blocks for a free connection (as a URL client's pool on one server) instead
    of failing when all 100 are in use (the asyncio nodes get the same from
    :class:`_NodePool`)."""
    extra: dict[str, Any] = {"max_connections": 100}
    if cluster_class is RedisCluster:
        extra.update(connection_pool_class=BlockingPool, timeout=None)
    return cluster_class.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=connect,
        retry=Retry(NoBackoff(), 0),
        **extra,
    )


def slot_of(key: str) -> int:
    """The cluster hash slot of ``key`` (redis-py's own function)."""
    return int(key_slot(key.encode()))


def check_one_slot(what: str, keys: Any) -> None:
    """Raise ValueError unless every key of ``keys`` is in one cluster slot, and so is
    every key the script's first key (the lock's) names (:func:`tenure.keys.cluster_safe`)."""
    if not cluster_safe(keys[0]):
        raise ValueError(
            f"{what}: lock key {keys[0]!r} has a '{{' but no non-empty hash tag, so its keys "
            "and channel hash to different cluster slots; in a cluster a lock name that "
            "contains '{' must hold a non-empty hash tag ('{tag}')"
        )
    first = slot_of(keys[0])
    for key in keys[1:]:
        if slot_of(key) != first:
            raise ValueError(
                f"{what}: keys {keys[0]!r} and {key!r} hash to different cluster slots; in a "
                "cluster a lock name that contains '{' must hold a non-empty hash tag "
                "('{tag}'), or no '{' at all"
            )


def _parse_info(raw: Any) -> dict[str, str]:
    lines = text(raw).splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line and not line.startswith("#"))


def _sharded_pubsub(info: dict[str, str]) -> bool:
    """SPUBLISH/SSUBSCRIBE exist from Redis 7 (Valkey reports its Redis compatibility)."""
    try:
        return int(info.get("redis_version", "0").split(".")[0]) >= 7
    except ValueError:
        return False


class Unsent(Exception):
    """A command that surely did not reach a server: no connection could be made for it
    (refused, timed out or reset while connecting, or in the handshake before it).
    ``error`` is redis-py's error, raised as it is when the command is not sent again."""

    def __init__(self, error: RedisError) -> None:
        super().__init__(str(error))
        self.error = error


def unsent(error: BaseException) -> bool:
    """True if ``error``, raised while getting a connection for a command (connecting, the
    handshake, the pool's check of a pooled socket), means the command was not sent and
    sending it again may succeed: redis-py's ConnectionError or TimeoutError, but not an
    authentication failure (sending again does not cure it)."""
    return isinstance(error, RedisConnectionError | RedisTimeoutError) and not isinstance(
        error, AuthenticationError
    )


class _NodePool:
    """A cluster node's connections, with the pool interface the backend uses (asyncio).

    redis-py's asyncio cluster node fails with MaxConnectionsError when all its connections
    are in use; tenure's callers wait for one instead (``gate``: one permit per connection).
    A connection is connected (and a pooled one checked, as redis-py's pools check theirs)
    before it is lent: a failure to connect is then known before a command is written.
    """

    def __init__(self, node: Any, gate: asyncio.Semaphore) -> None:
        self.node = node
        self.gate = gate

    async def get_connection(self) -> Any:
        await self.gate.acquire()
        try:
            conn = self.node.acquire_connection()
        except BaseException:
            self.gate.release()
            raise
        try:
            if conn.is_connected and not await async_idle(conn):
                await conn.disconnect()  # EOF (the node died) or unread data on it
            await conn.connect()
        except BaseException:
            await self.release(conn)
            raise
        return conn

    async def release(self, conn: Any) -> None:
        self.node.release(conn)
        self.gate.release()


class _RouteBase:
    """Where a command for a key goes: the one server, or the cluster node owning its slot.

    A URL client finds out on first use whether the server runs in cluster mode (INFO
    cluster) and then builds a cluster client for the same URL by itself. Topology is
    refreshed after a connection failure (a master may have died) and on MOVED.
    """

    cluster_class: Any = None
    """The client library's cluster client class (sync or asyncio)."""
    sentinel_pool_class: Any = None
    """The client library's Sentinel connection pool class (sync or asyncio)."""
    mutex_class: Any = None
    """Its mutex: one topology refresh at a time."""

    def __init__(
        self, client: Any, url: str | None, timeout: float | None, connect: float | None
    ) -> None:
        self.client = client
        self.cluster = isinstance(client, self.cluster_class)
        if self.cluster:
            require_cluster_support()
        self.sharded = False
        """Release publishes with SPUBLISH and waiters SSUBSCRIBE (cluster on Redis >= 7)."""
        self._url, self._timeout, self._connect = url, timeout, connect
        self._ready = False
        self._stale = False
        self.built: Any = None
        """The cluster client this route built from a URL (closed by :meth:`close`)."""
        self._mutex = self.mutex_class()
        self._gates: dict[str, Any] = {}
        """Cluster node -> semaphore bounding its connections (asyncio: redis-py's async
        cluster pools raise when full instead of waiting)."""

    def slot(self, key: str) -> int:
        return slot_of(key)

    @property
    def follows_failover(self) -> bool:
        """True when the server behind a key can change: the slot owner in a cluster (the
        slot map is refreshed after a failed connection), the master under Sentinel (which
        redis-py asks on each connect). A command that surely did not reach a server is
        then worth sending again within the caller's wait; on one server it is not."""
        return self.cluster or isinstance(
            getattr(self.client, "connection_pool", None), self.sentinel_pool_class
        )

    def failed(self) -> None:
        """A connection failed: refresh the topology before the next command."""
        if self.cluster:
            self._stale = True


class AsyncRoute(_RouteBase):
    """:class:`_RouteBase` for redis.asyncio clients."""

    cluster_class = AsyncRedisCluster
    sentinel_pool_class = redis.asyncio.sentinel.SentinelConnectionPool
    mutex_class = AsyncMutex

    async def prepare(self) -> None:
        """Detect cluster mode and sharded pub/sub once (first use)."""
        if self._ready:
            return
        async with self._mutex:
            if self._ready:
                return
            if self._url is not None and not self.cluster:
                info = await self._info(self.client.connection_pool, "cluster")
                if info.get("cluster_enabled") == "1":
                    require_cluster_support()
                    self.built = cluster_from_url(
                        AsyncRedisCluster, self._url, self._timeout, self._connect
                    )
                    self.client, self.cluster = self.built, True
            if self.cluster:
                await self.client.initialize()
                info = await self._info(self._pool(self.client.get_default_node()), "server")
                self.sharded = _sharded_pubsub(info)
            self._ready = True

    @property
    def ready(self) -> bool:
        """True once :meth:`prepare` ran (cluster mode known)."""
        return self._ready

    async def _info(self, pool: Any, section: str) -> dict[str, str]:
        conn = await pool.get_connection()
        try:
            await conn.send_command("INFO", section)
            return _parse_info(await conn.read_response())
        except BaseException:
            await conn.disconnect()
            raise
        finally:
            await pool.release(conn)

    async def _refresh(self) -> None:
        if not self._stale:
            return
        async with self._mutex:  # one refresh at a time
            if self._stale:
                self._stale = False
                try:
                    await self.client.nodes_manager.initialize()
                except RedisError:
                    self._stale = True

    async def node_for(self, key: str) -> Any:
        await self.prepare()
        await self._refresh()
        return self.client.nodes_manager.get_node_from_slot(slot_of(key))

    async def pool_for(self, key: str | None) -> Any:
        """The connection pool for a command on ``key``."""
        await self.prepare()
        if not self.cluster:
            return self.client.connection_pool
        if key is None:
            return self._pool(self.client.get_default_node())
        return self._pool(await self.node_for(key))

    def _pool(self, node: Any) -> _NodePool:
        gate = self._gates.get(node.name)
        if gate is None:
            gate = self._gates[node.name] = asyncio.Semaphore(node.max_connections)
        return _NodePool(node, gate)

    async def moved(self, error: MovedError) -> None:
        """The slot has a new owner: remember it (refresh the whole map if that fails)."""
        try:
            await self.client.nodes_manager.move_slot(error)
        except Exception:
            self._stale = True

    async def pool_at(self, host: str, port: int) -> Any:
        """The pool of the node at ``host:port`` (ASK redirection)."""
        node = self.client.get_node(host=host, port=port)
        if node is None:
            self._stale = True
            await self._refresh()
            node = self.client.get_node(host=host, port=port)
        if node is None:
            raise BackendError(f"ASK redirection to an unknown node {host}:{port}")
        return self._pool(node)

    async def listener_target(
        self, channel: str, sharded: bool
    ) -> tuple[str, Callable[[], Any], bool]:
        """(name of the server that carries ``channel``, a factory of pub/sub connections to
        it, True for sharded pub/sub): the shard owning the channel's slot with sharded
        pub/sub (a cluster on Redis >= 7, for a channel that is ``sharded``), else the one
        server (in a cluster, any node: a plain PUBLISH reaches every node)."""
        await self.prepare()
        if not self.cluster:
            return "", lambda: listener_connection(self.client), False
        sharded = sharded and self.sharded
        node = await self.node_for(channel) if sharded else self.client.get_default_node()
        name = node.name if sharded else f"plain:{node.name}"
        return (
            name,
            lambda: _node_listener_connection(node.connection_class, node.connection_kwargs),
            sharded,
        )

    async def close(self) -> None:
        if self.built is not None:
            await self.built.aclose()


class Route(_RouteBase):
    """:class:`_RouteBase` for redis-py's sync clients."""

    cluster_class = RedisCluster
    sentinel_pool_class = redis.sentinel.SentinelConnectionPool
    mutex_class = Mutex

    def prepare(self) -> None:
        """Detect cluster mode and sharded pub/sub once (first use)."""
        if self._ready:
            return
        with self._mutex:
            if self._ready:
                return
            if self._url is not None and not self.cluster:
                info = self._info(self.client.connection_pool, "cluster")
                if info.get("cluster_enabled") == "1":
                    require_cluster_support()
                    self.built = cluster_from_url(
                        RedisCluster, self._url, self._timeout, self._connect
                    )
                    self.client, self.cluster = self.built, True
            if self.cluster:
                node = self.client.get_default_node()
                info = self._info(self.client.get_redis_connection(node).connection_pool, "server")
                self.sharded = _sharded_pubsub(info)
            self._ready = True

    @property
    def ready(self) -> bool:
        """True once :meth:`prepare` ran (cluster mode known)."""
        return self._ready

    def _info(self, pool: Any, section: str) -> dict[str, str]:
        conn = pool.get_connection()
        try:
            conn.send_command("INFO", section)
            return _parse_info(conn.read_response())
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    def _refresh(self) -> None:
        if not self._stale:
            return
        with self._mutex:  # one refresh at a time
            if self._stale:
                self._stale = False
                try:
                    # Leave the nodes' pools alone: other threads' commands are in flight.
                    self.client.nodes_manager.initialize(disconnect_startup_nodes_pools=False)
                except RedisError:
                    self._stale = True

    def node_for(self, key: str) -> Any:
        self.prepare()
        self._refresh()
        return self.client.nodes_manager.get_node_from_slot(slot_of(key))

    def _pool(self, node: Any) -> Any:
        return self.client.get_redis_connection(node).connection_pool

    def pool_for(self, key: str | None) -> Any:
        """The connection pool for a command on ``key``."""
        self.prepare()
        if not self.cluster:
            return self.client.connection_pool
        if key is None:
            return self._pool(self.client.get_default_node())
        return self._pool(self.node_for(key))

    def moved(self, error: MovedError) -> None:
        """The slot has a new owner: remember it (refresh the whole map if that fails)."""
        try:
            self.client.nodes_manager.move_slot(error)
        except Exception:
            self._stale = True

    def pool_at(self, host: str, port: int) -> Any:
        """The pool of the node at ``host:port`` (ASK redirection)."""
        node = self.client.get_node(host=host, port=port)
        if node is None:
            self._stale = True
            self._refresh()
            node = self.client.get_node(host=host, port=port)
        if node is None:
            raise BackendError(f"ASK redirection to an unknown node {host}:{port}")
        return self._pool(node)

    def listener_target(self, channel: str, sharded: bool) -> tuple[str, Callable[[], Any], bool]:
        """(name of the server that carries ``channel``, a factory of pub/sub connections to
        it, True for sharded pub/sub): the shard owning the channel's slot with sharded
        pub/sub (a cluster on Redis >= 7, for a channel that is ``sharded``), else the one
        server (in a cluster, any node: a plain PUBLISH reaches every node)."""
        self.prepare()
        if not self.cluster:
            return "", lambda: listener_connection(self.client), False
        sharded = sharded and self.sharded
        node = self.node_for(channel) if sharded else self.client.get_default_node()
        redis_node = self.client.get_redis_connection(node)
        name = node.name if sharded else f"plain:{node.name}"
        return name, lambda: listener_connection(redis_node), sharded

    def close(self) -> None:
        if self.built is not None:
            self.built.close()


KIND_ERROR = "TENURE_KIND "
"""Start of a script's error reply refusing a key of another kind (``scripts/_kinds.lua``)."""


def backend_error(error: Exception) -> LockError:
    """A redis-py error as tenure's :class:`BackendError`, the original chained as cause;
    a script's refusal of a key of another kind as :class:`LockKindError`; a refusal that
    retrying cannot cure (:func:`tenure.errors.refusal`) as :class:`ServerError`."""
    wrapped: LockError
    message = str(error)
    if isinstance(error, ResponseError) and KIND_ERROR in message:
        detail = message[message.index(KIND_ERROR) + len(KIND_ERROR) :]
        wrapped = LockKindError(detail.split(" script: ")[0])
    elif (refused := refusal(error)) is not None:  # retrying cannot cure it
        wrapped = ServerError(refused)
    else:
        wrapped = BackendError(f"{type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


def text(value: Any) -> str:
    """``value`` as text; bytes that are not UTF-8 (another publisher's message) are
    replaced, never an error."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def listener_connection(client: Any) -> Any:
    """A new connection for pub/sub, made like the client pool's connections but in RESP2
    (messages arrive as plain replies; RESP3 routes them to push handlers), without
    health checks (the listener PINGs itself) and without redis-py's maintenance
    notifications, which need RESP3 or hiredis."""
    pool = client.connection_pool
    return _node_listener_connection(pool.connection_class, pool.connection_kwargs)


def _node_listener_connection(
    connection_class: type[Any], connection_kwargs: dict[str, Any]
) -> Any:
    kwargs = {k: v for k, v in connection_kwargs.items() if not k.startswith("maint_notifications")}
    kwargs.update(health_check_interval=0, protocol=2)
    return connection_class(**kwargs)


async def async_send_command(conn: Any, *args: Any) -> None:
    """``conn.send_command(*args)``, bounded by the connection's socket timeout as redis-py
    bounds it, but without the task that ``asyncio.wait_for`` creates for every write on
    Python 3.11 (redis-py's way of applying that timeout).

    A write waits only when the transport's buffer is above its high-water mark (64 KiB by
    default): a command smaller than :data:`QUICK_WRITE` into an empty buffer cannot wait,
    so it needs no timer at all; any other write gets a deadline on the current task
    (``asyncio.timeout``). A write that times out disconnects the socket (redis-py does so
    for any interrupted write) and raises redis-py's ``TimeoutError``."""
    timeout = conn.socket_timeout
    if not timeout or not conn.is_connected:
        await conn.send_command(*args)
        return
    packed = conn.pack_command(*args)
    transport = getattr(getattr(conn, "_writer", None), "transport", None)
    conn.socket_timeout = None  # the connection is ours until released: no other reader
    try:
        if (
            transport is not None
            and not transport.get_write_buffer_size()
            and sum(map(len, packed)) < QUICK_WRITE
        ):
            await conn.send_packed_command(packed)
            return
        async with asyncio.timeout(timeout):
            await conn.send_packed_command(packed)
    except TimeoutError:
        raise RedisTimeoutError("Timeout writing to socket") from None
    finally:
        conn.socket_timeout = timeout


QUICK_WRITE = 16384
"""Bytes below which a command written into an empty transport buffer cannot wait."""


def send_command(conn: Any, *args: Any) -> None:
    """``conn.send_command(*args)`` (the twin of :func:`async_send_command`)."""
    conn.send_command(*args)


async def _async_can_read(conn: Any) -> bool:
    """True if a reply is waiting on ``conn`` (redis-py before 6 names it
    ``can_read_destructive``: it may move the bytes into the parser's buffer, where the
    next read finds them)."""
    can_read = getattr(conn, "can_read", None) or conn.can_read_destructive
    return bool(await can_read())


async def async_idle(conn: Any) -> bool:
    """True if ``conn`` is connected with nothing waiting to be read: safe to send on (as
    the pool checks before lending a connection; here without a system call)."""
    try:
        return bool(conn.is_connected) and not await _async_can_read(conn)
    except (RedisError, OSError):
        return False


def idle(conn: Any) -> bool:
    """True if ``conn`` is connected with nothing waiting to be read: safe to send on.

    One ``select`` on its socket (redis-py's ``can_read`` costs a few system calls more);
    its own check when the socket is not where redis-py has kept it."""
    sock = getattr(conn, "_sock", None)
    buffer = getattr(getattr(conn, "_parser", None), "_buffer", None)
    try:
        # redis-py's Python parser keeps a SocketBuffer; hiredis's keeps a plain bytearray.
        unread = getattr(buffer, "unread_bytes", None)
        if isinstance(sock, socket.socket) and unread is not None:
            return not unread() and not select.select([sock], [], [], 0)[0]
        return not conn.can_read(0)
    except (RedisError, OSError, ValueError):
        return False


class NotReady(Exception):
    """No reply on the connection yet (:func:`async_read_reply` with ``timeout=0``): it
    stays unread, for a later read."""


async def async_read_reply(conn: Any, timeout: float | None) -> Any:
    """The reply to the command last sent on ``conn``.

    ``timeout``: None waits up to the socket timeout (redis-py's own); 0 reads only a reply
    already received, else raises :class:`NotReady` and leaves the connection as it was;
    above 0, a reply not there within that many seconds raises redis-py's ``TimeoutError``
    (the caller must then drop the connection: the reply may still come)."""
    if timeout is None:
        return await conn.read_response()
    if timeout <= 0:
        if not await _async_can_read(conn):
            raise NotReady
        return await conn.read_response()
    try:
        async with asyncio.timeout(timeout):
            return await conn.read_response()
    except TimeoutError:
        raise RedisTimeoutError("Timeout reading from socket") from None


def read_reply(conn: Any, timeout: float | None) -> Any:
    """The reply to the command last sent on ``conn`` (see :func:`async_read_reply`)."""
    if timeout is None:
        return conn.read_response()
    if timeout <= 0:
        if not conn.can_read(0):
            raise NotReady
        return conn.read_response()
    if _READ_TAKES_TIMEOUT:
        return conn.read_response(timeout=timeout)  # redis-py disconnects when it runs out
    if not conn.can_read(timeout):  # older redis-py: no timeout on read_response
        raise RedisTimeoutError("Timeout reading from socket")
    return conn.read_response()


_READ_TAKES_TIMEOUT = "timeout" in inspect.signature(
    redis.connection.Connection.read_response
).parameters
"""redis-py's sync ``read_response`` takes a ``timeout`` (not in 5.3.0, the floor)."""


class PubSubLost(Exception):
    """The pub/sub connection failed under a read (:func:`read_push`): ``error`` says how."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def async_read_push(conn: Any, timeout: float) -> Any:
    """The next reply on a pub/sub connection, or None when nothing came within ``timeout``.

    A waiting task reads it (:mod:`tenure.aio.listener`): when that task is cancelled
    mid-reply, redis-py's parser keeps what it read for the next read, so the connection
    shared by the other waiters is not dropped (the CancelledError goes on as it is).

    Raises:
        ResponseError: the server answered a command with an error (e.g. MOVED).
        PubSubLost: the connection failed (a socket closed under a read fails in many ways).
    """
    try:
        return await conn.read_response(timeout=timeout, disconnect_on_error=False)
    except ResponseError:
        raise
    except Exception as error:
        raise PubSubLost(error) from error


def async_connected(conn: Any) -> bool:
    """True if redis-py has not dropped ``conn``'s socket (it does on some errors)."""
    return bool(conn.is_connected)


def connected(conn: Any) -> bool:
    """True if redis-py has not dropped ``conn``'s socket (it does on some errors: a
    KeyboardInterrupt in a read, and its next use would connect a new socket silently)."""
    return getattr(conn, "_sock", None) is not None


def read_push(conn: Any, timeout: float) -> Any:
    """The next reply on a pub/sub connection, or None when nothing came within ``timeout``.

    A waiting thread reads it (:mod:`tenure.sync.listener`) and may get a signal whose
    handler raises. The wait for the socket is this function's own ``select``, outside
    redis-py: an exception raised there reaches the caller as it is, nothing read, the
    connection intact for the other waiters (redis-py would take an ``OSError``, such as a
    handler's ``TimeoutError``, for a broken connection, and drop it). Only a reply that
    has begun to arrive is read through redis-py.

    Raises:
        ResponseError: the server answered a command with an error (e.g. MOVED).
        PubSubLost: the connection failed.
    """
    sock = getattr(conn, "_sock", None)
    if sock is None:
        raise PubSubLost(RedisConnectionError("the pub/sub connection is closed"))
    try:
        ready = conn.can_read(timeout=0)  # a reply already buffered, or bytes waiting
    except ResponseError:
        raise
    except Exception as error:
        raise PubSubLost(error) from error
    if not ready:
        if not select.select([sock], [], [], max(timeout, 0.0))[0]:
            return None
    try:
        return conn.read_response()
    except ResponseError:
        raise
    except Exception as error:
        raise PubSubLost(error) from error
