"""All redis-py glue: the client classes, building a client, reading pub/sub, error mapping.

The drivers import redis-py only through this module. The asyncio names (``AsyncRedis``,
``async_read_push``) become the sync ones (``Redis``, ``read_push``) in the generated
driver, by the same substitution as everything else (``tools/unasync.py``).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import queue
import re
import select
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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

from tenure.errors import BackendError, LockError, LockKindError, ServerError, refusal
from tenure.keys import cluster_safe

if TYPE_CHECKING:  # the routes live in the drivers; still importable from here (below)
    from tenure.aio.route import AsyncRoute as AsyncRoute
    from tenure.sync.route import Route as Route

__all__ = [
    "LENDING",
    "PLACE",
    "AskError",
    "AsyncBlockingPool",
    "AsyncRedis",
    "AsyncRedisCluster",
    "AsyncSentinelPool",
    "BlockingPool",
    "MovedError",
    "NoScriptError",
    "NotReady",
    "Redis",
    "RedisCluster",
    "RedisError",
    "ResponseError",
    "SentinelPool",
    "TryAgainError",
    "Unsent",
    "async_cluster_ready",
    "async_give_back",
    "async_idle",
    "async_move_slot",
    "async_node_listener",
    "async_node_pool",
    "async_read_push",
    "async_read_reply",
    "async_refresh_slots",
    "async_send_command",
    "backend_error",
    "check_one_slot",
    "cluster_from_url",
    "cluster_ready",
    "give_back",
    "idle",
    "listener_connection",
    "move_slot",
    "node_listener",
    "node_pool",
    "parse_info",
    "read_push",
    "read_reply",
    "refresh_slots",
    "require_cluster_support",
    "resolve_redis",
    "send_command",
    "sharded_pubsub",
    "slot_of",
    "text",
    "unsent",
]

Redis = redis.Redis
AsyncRedis = redis.asyncio.Redis


class _Lending(threading.local):
    held: list[Any] | None = None


LENDING = _Lending()
"""The calling thread's slot for the connection it takes from tenure's sync pool or gives
back (`BlockingPool`; the backend sets ``LENDING.held`` around ``get_connection`` and
``release``): a one-item list the taker made before its ``try``. The pool notes the
connection there as it leaves the free list (`PLACE` for a place not made yet, the
connection once made) and clears it as it goes back, each with no call between where a
signal handler could run: the caller's clean-up gives back whatever the slot still holds,
wherever a handler's exception came (redis-py's lending, between its queue's ``get`` and
its ``try``, has several such places). Nothing reads it in asyncio (a cancellation lands
only at an await)."""


class _Place:
    def __repr__(self) -> str:
        return "PLACE"


PLACE: Any = _Place()
"""In a `LENDING` slot: a free place of the pool taken (a connection not made yet); given
back with ``pool.pool.put_nowait(None)`` (`give_back`)."""


def give_back(pool: Any, conn: Any) -> None:
    """Give ``conn`` (or a `PLACE`) back to ``pool`` (sync, or asyncio's pools, below)."""
    if conn is PLACE:
        pool.pool.put_nowait(None)
    else:
        pool.release(conn)


async def async_give_back(pool: Any, conn: Any) -> None:
    """Give ``conn`` back to ``pool`` (asyncio: no `PLACE` is ever taken)."""
    await pool.release(conn)


class _Made(list[Any]):
    """`BlockingPool`'s list of the connections it made: one made for a taker whose
    `LENDING` slot holds a `PLACE` goes there as it goes in here, with no call between."""

    def append(self, conn: Any) -> None:
        held = LENDING.held
        self += (conn,)
        if held is not None and held[0] is PLACE:
            held[0] = conn


class SignalSafeLifo:
    """The queue of free connections of tenure's sync blocking pool (`BlockingPool`), in
    place of redis-py's ``queue.LifoQueue``: a signal handler that raises in the thread using
    it cannot leave its mutex held.

    ``LifoQueue`` guards its list with ``threading.Condition`` objects whose ``__enter__`` and
    ``__exit__`` are Python functions: a handler runs as one begins or as a call in it
    returns (CPython's eval breaker), and one that raises as ``__exit__`` begins, or after
    ``__enter__`` took the lock, leaves the mutex held. Every later ``get`` and
    ``put_nowait`` of the pool then waits for it for ever: each command of the client, a
    background clean-up's, and the caller's own (uninterruptible in any other thread). Here
    the mutex is a bare lock taken and let go by the ``with`` statement's C calls, with no
    Python frame at either edge. A wake-up a handler cut short (after the put, before the
    notify) costs a waiting ``get`` at most 1 s: it looks again then.

    redis-py reads ``queue`` (the free connections; None for one not made yet)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.queue: list[Any] = []
        self._mutex = threading.Lock()
        self._waiters: collections.deque[Any] = collections.deque()

    def qsize(self) -> int:
        return len(self.queue)

    def put_nowait(self, item: Any) -> None:
        held = LENDING.held
        with self._mutex:
            if len(self.queue) >= self.maxsize:
                raise queue.Full
            # Out of the giver's `LENDING` slot as it goes in, with no call between.
            self.queue += (item,)
            if held is not None and item is not None and held[0] is item:
                held[0] = None
            if self._waiters:
                self._waiters.popleft().release()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            waiter = threading.Lock()
            waiter.acquire()
            item: Any = waiter  # none yet
            with self._mutex:
                # Taken into a local, returned after the block: nothing of the return's
                # unwinding (SWAP, the __exit__ call) runs between the take and the block's
                # end. The take is noted in the taker's `LENDING` slot with no call between
                # (where a handler could run): the connection is always in one of the two.
                if self.queue:
                    item = self.queue[-1]
                    held = LENDING.held
                    if held is not None:
                        held[0] = PLACE if item is None else item
                    del self.queue[-1]
                elif not block:
                    raise queue.Empty
                else:
                    self._waiters.append(waiter)
            if item is not waiter:
                return item
            left = 1.0 if end is None else min(1.0, end - time.monotonic())
            if left <= 0 or not waiter.acquire(timeout=left):
                with self._mutex:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                if end is not None and time.monotonic() >= end:
                    raise queue.Empty


class BlockingPool(redis.BlockingConnectionPool):
    """redis-py's blocking pool, its free connections in a `SignalSafeLifo`; a
    connection it lends or takes back moves in and out of the caller's `LENDING` slot."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("queue_class", SignalSafeLifo)
        super().__init__(*args, **kwargs)

    @property
    def _connections(self) -> list[Any]:
        return self._made

    @_connections.setter
    def _connections(self, made: list[Any]) -> None:
        # redis-py sets a plain list (reset()): kept as a `_Made`, in the same assignment.
        self._made = _Made(made)


AsyncBlockingPool = redis.asyncio.BlockingConnectionPool
RedisCluster = redis.cluster.RedisCluster
AsyncRedisCluster = redis.asyncio.cluster.RedisCluster
SentinelPool = redis.sentinel.SentinelConnectionPool
AsyncSentinelPool = redis.asyncio.sentinel.SentinelConnectionPool


def __getattr__(name: str) -> Any:
    """``AsyncRoute`` and ``Route``, now in `tenure.aio.route` (authored) and
    `tenure.sync.route` (generated), for the modules that still import them from
    here (imported on first use: those modules import this one)."""
    if name == "AsyncRoute":
        from tenure.aio.route import AsyncRoute

        return AsyncRoute
    if name == "Route":
        from tenure.sync.route import Route

        return Route
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def notifications_off(init: Callable[..., Any]) -> dict[str, Any]:
    """The keyword argument turning redis-py's maintenance notifications off, for ``init``
    (a connection's or a cluster client's ``__init__``) if it takes one (the redis-py floor,
    5.3.0, has none), for the connections tenure makes from a URL, as for its pub/sub
    connections (`listener_connection()`).

    Left at redis-py's "auto", each connection's handshake asks the server to turn them on;
    when the server refuses (Valkey, and Redis 7, in the tests) redis-py calls
    ``logging.getLogger()``, which takes the logging module's lock in a call made before its
    ``try`` (CPython before 3.13). A signal handler raising as that call returns, in the main
    thread, leaves the lock held for good: every other thread's next handshake then waits for
    ever (a keeper's, a release finished in the background). Off, a handshake takes no lock
    of logging's, and is one round trip shorter."""
    if "maint_notifications_config" not in inspect.signature(init).parameters:
        return {}
    from redis.maint_notifications import MaintNotificationsConfig

    return {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}


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
    Maintenance notifications are off (`notifications_off()`).
    A passed-in ``redis_class`` instance keeps its own pool, timeouts and retries.
    """
    if isinstance(url_or_redis, str):
        side = redis.connection if redis_class is Redis else redis.asyncio.connection
        pool = pool_class.from_url(
            url_or_redis,
            max_connections=100,
            timeout=None,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
            retry=Retry(NoBackoff(), 0),
            **notifications_off(side.AbstractConnection.__init__),
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
    """Raise `BackendError` when the installed redis-py is too old for Redis Cluster
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
    `_NodePool`)."""
    extra: dict[str, Any] = {"max_connections": 100, **notifications_off(cluster_class.__init__)}
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
    every key the script's first key (the lock's) names (`tenure.keys.cluster_safe()`)."""
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


def parse_info(raw: Any) -> dict[str, str]:
    lines = text(raw).splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line and not line.startswith("#"))


def sharded_pubsub(info: dict[str, str]) -> bool:
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


async def async_cluster_ready(client: Any) -> None:
    """Make the asyncio cluster client load its slot map (it does so on first use)."""
    await client.initialize()


def cluster_ready(client: Any) -> None:
    """Nothing to do: redis-py's sync cluster client loads its slot map when it is made."""


async def async_refresh_slots(client: Any) -> None:
    """Load the cluster's slot map again (after a connection failure or MOVED)."""
    await client.nodes_manager.initialize()


def refresh_slots(client: Any) -> None:
    """Load the cluster's slot map again, leaving the nodes' pools alone: other threads'
    commands are in flight on them."""
    client.nodes_manager.initialize(disconnect_startup_nodes_pools=False)


async def async_move_slot(client: Any, error: MovedError) -> None:
    """Record the slot's new owner that a MOVED reply named."""
    await client.nodes_manager.move_slot(error)


def move_slot(client: Any, error: MovedError) -> None:
    """Record the slot's new owner that a MOVED reply named."""
    client.nodes_manager.move_slot(error)


def async_node_pool(client: Any, node: Any, gates: dict[str, Any]) -> _NodePool:
    """The pool interface over a cluster node's connections (asyncio): ``gates`` keeps one
    semaphore per node, bounding its connections (see `_NodePool`)."""
    gate = gates.get(node.name)
    if gate is None:
        gate = gates[node.name] = asyncio.Semaphore(node.max_connections)
    return _NodePool(node, gate)


def node_pool(client: Any, node: Any, gates: dict[str, Any]) -> Any:
    """A cluster node's connection pool (redis-py's sync pools wait for a free connection
    themselves when made blocking: ``gates`` is not needed)."""
    return client.get_redis_connection(node).connection_pool


def async_node_listener(client: Any, node: Any) -> Callable[[], Any]:
    """A factory of pub/sub connections to cluster ``node`` (`listener_connection()`)."""
    return lambda: _node_listener_connection(node.connection_class, node.connection_kwargs)


def node_listener(client: Any, node: Any) -> Callable[[], Any]:
    """A factory of pub/sub connections to cluster ``node`` (`listener_connection()`)."""
    redis_node = client.get_redis_connection(node)
    return lambda: listener_connection(redis_node)


KIND_ERROR = "TENURE_KIND "
"""Start of a script's error reply refusing a key of another kind (``scripts/_kinds.lua``)."""


def backend_error(error: Exception) -> LockError:
    """A redis-py error as tenure's `BackendError`, the original chained as cause;
    a script's refusal of a key of another kind as `LockKindError`; a refusal that
    retrying cannot cure ([`tenure.errors.refusal()`][tenure.errors.refusal]) as `ServerError`."""
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
    default): a command smaller than `QUICK_WRITE` into an empty buffer cannot wait,
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
    """``conn.send_command(*args)`` (the twin of `async_send_command()`)."""
    conn.send_command(*args)


async def async_read_kept(conn: Any) -> KeptReply:
    """The reply to the command last sent on ``conn``, read so that an interrupt loses
    nothing (the twin of `read_kept()`; an asyncio task is not interrupted inside a read,
    so redis-py reads it, leaving the connection open if it is cancelled)."""
    return KeptReply(await conn.read_response(disconnect_on_error=False), 0)


def read_kept(conn: Any) -> KeptReply:
    """The reply to the command last sent on ``conn`` (a script's, after `send_kept()`),
    read so that an interrupt (a signal handler's exception) at any moment loses nothing:
    until this returns, the reply is still on the socket, whole, for a later read.

    redis-py receives a chunk into a local variable and then stores it: an exception
    raised between the two drops bytes already taken from the socket. So the reply is
    first *peeked* (``MSG_PEEK``: the bytes stay in the kernel), parsed here, and only
    then taken, in an exact length, after the caller had the reply (``taken``). Replies
    other than an integer, a simple string or a null (an error reply: the script did not
    change anything) are left to redis-py."""
    sock = getattr(conn, "_sock", None)
    timeout = conn.socket_timeout
    while isinstance(sock, socket.socket):
        if not select.select([sock], [], [], timeout)[0]:
            raise RedisTimeoutError("Timeout reading from socket")
        peeked = sock.recv(_PEEK, socket.MSG_PEEK)
        if not peeked:
            break  # closed: redis-py reports it
        end = peeked.find(b"\r\n")
        if end < 0 or peeked[:1] not in _KEPT_REPLIES:
            break  # a longer reply, or one of another kind: redis-py's parser reads it
        line = peeked[1:end]
        kind = peeked[:1]
        if kind == b":":
            reply: Any = int(line)
        elif kind == b"+":
            reply = line.decode() if conn.encoder.decode_responses else line
        else:  # "_" (RESP3 null) or "$-1" (RESP2 null bulk)
            if kind == b"$" and line != b"-1":
                break
            reply = None
        return KeptReply(reply, end + 2)
    return KeptReply(conn.read_response(disconnect_on_error=False), 0)


_PEEK = 512
"""Bytes peeked at once by `read_kept()`: a reply it parses itself is a short line."""
_KEPT_REPLIES = (b":", b"+", b"_", b"$")


class KeptReply:
    """A reply `read_kept()` parsed: ``value``, whose ``length`` bytes are still on the
    socket until `take()` (0: redis-py read it already)."""

    __slots__ = ("length", "value")

    def __init__(self, value: Any, length: int) -> None:
        self.value, self.length = value, length

    def take(self, conn: Any) -> None:
        """Take the reply's bytes off ``conn``'s socket (they are there: peeked)."""
        left = self.length
        while left > 0:
            got = conn._sock.recv(left)
            if not got:
                raise RedisConnectionError("the server closed the connection")
            left -= len(got)
        self.length = 0


async def async_send_kept(conn: Any, *args: Any) -> None:
    """`async_send_command()`: an asyncio task is cancelled only at an await, and a small
    command goes out without one (the twin of `send_kept()`)."""
    await async_send_command(conn, *args)


def send_kept(conn: Any, *args: Any) -> None:
    """Send a command whose reply the caller reads even when it is interrupted while
    sending (a signal handler's exception): the connection stays open, where redis-py
    disconnects on any interruption and so loses the reply of a command that went out
    whole. A socket error disconnects and raises redis-py's error, as redis-py does."""
    packed = conn.pack_command(*args)
    if not conn._sock:
        conn.connect()
    try:
        for item in packed:
            conn._sock.sendall(item)
    except OSError as error:
        if raised_by_handler(error):
            raise  # a signal handler's (a TimeoutError from SIGALRM, say): the caller's
        conn.disconnect()
        if isinstance(error, TimeoutError):
            raise RedisTimeoutError("Timeout writing to socket") from None
        raise RedisConnectionError(f"Error while writing to socket: {error}") from error


def raised_by_handler(error: BaseException) -> bool:
    """True if ``error`` was raised by a signal handler (its traceback runs through a
    Python handler installed with `signal.signal`): an exception such as a TimeoutError
    from a SIGALRM handler is the caller's own, not a socket's failure. Costs a look at
    the handlers: for error paths only."""
    tb = error.__traceback__
    if tb is None or tb.tb_next is None:
        return False  # raised by the call that was made there (a socket's own error)
    codes = set()
    for number in signal.valid_signals():
        try:
            handler = signal.getsignal(number)
        except (OSError, ValueError):
            continue
        handler = getattr(handler, "func", handler)  # functools.partial
        handler = getattr(handler, "__func__", handler)  # a bound method
        code = getattr(handler, "__code__", None)
        if code is not None:
            codes.add(code)
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def interrupt_of(error: BaseException) -> BaseException | None:
    """The signal handler's exception that redis-py turned into ``error`` (it maps a
    ``TimeoutError`` or ``OSError`` raised inside a socket call to its own errors), or
    None: the caller must get its handler's exception as it is (docs/internals.md,
    "Signals")."""
    context = error.__context__
    if context is not None and not isinstance(context, RedisError) and raised_by_handler(context):
        return context
    return None


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
    """No reply on the connection yet (`async_read_reply()` with ``timeout=0``): it
    stays unread, for a later read."""


async def async_read_reply(conn: Any, timeout: float | None) -> Any:
    """The reply to the command last sent on ``conn``.

    ``timeout``: None waits up to the socket timeout (redis-py's own); 0 reads only a reply
    already received, else raises `NotReady` and leaves the connection as it was;
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
    """The reply to the command last sent on ``conn`` (see `async_read_reply()`)."""
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
    """The pub/sub connection failed under a read (`read_push()`): ``error`` says how."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def async_read_push(conn: Any, timeout: float, into: list[Any]) -> bool:
    """Read the next reply on a pub/sub connection into ``into`` (appended, an error
    reply as a ``ResponseError``: e.g. MOVED); False when nothing came within ``timeout``.

    A waiting task reads it (`tenure.aio.listener`): when that task is cancelled
    mid-reply, redis-py's parser keeps what it read for the next read, so the connection
    shared by the other waiters is not dropped (the CancelledError goes on as it is). A
    reply read is in ``into`` before the task awaits again: a cancellation after the read
    loses no reply (docs/internals.md, "Signals").

    Raises:
        PubSubLost: the connection failed (a socket closed under a read fails in many ways).
    """
    try:
        reply = await conn.read_response(timeout=timeout, disconnect_on_error=False)
    except ResponseError as refused:
        reply = refused
    except Exception as error:
        raise PubSubLost(error) from error
    if reply is None:
        return False
    into.append(reply)
    return True


def async_connected(conn: Any) -> bool:
    """True if redis-py has not dropped ``conn``'s socket (it does on some errors)."""
    return bool(conn.is_connected)


def connected(conn: Any) -> bool:
    """True if redis-py has not dropped ``conn``'s socket (it does on some errors: a
    KeyboardInterrupt in a read, and its next use would connect a new socket silently)."""
    return getattr(conn, "_sock", None) is not None


def async_torn(conn: Any) -> bool:
    """Never for an asyncio connection: a cancellation lands only where redis-py awaits
    (see `torn`)."""
    return False


def torn(conn: Any) -> bool:
    """True if redis-py left ``conn`` half made or half dropped: a signal handler raised
    inside its connect() or disconnect(), between its parser's set-up (or reset) and its
    socket's. The socket is set and the parser has no buffer: the pool lends it as it is,
    and the next reply read fails with AttributeError."""
    if getattr(conn, "_sock", None) is None:
        return False
    parser = getattr(conn, "_parser", None)
    # redis-py's own parsers keep a `_buffer` (None once reset). hiredis's keeps a bytearray
    # there, so a torn hiredis connection is not seen here: redis-py's pool catches it (its
    # look for unread data raises on a reader that is gone, and it connects anew).
    for name in ("_buffer", "_reader"):
        if hasattr(parser, name):
            return getattr(parser, name) is None
    return False


def read_push(conn: Any, timeout: float, into: list[Any]) -> bool:
    """Read the next reply on a pub/sub connection into ``into`` (appended, an error
    reply as a ``ResponseError``: e.g. MOVED); False when nothing came within ``timeout``.

    A waiting thread reads it (`tenure.sync.listener`) and may get a signal whose
    handler raises. The wait for the socket is this function's own ``select``, outside
    redis-py: an exception raised there reaches the caller as it is, nothing read, the
    connection intact for the other waiters (redis-py would take an ``OSError``, such as a
    handler's ``TimeoutError``, for a broken connection, and drop it). Only a reply that
    has begun to arrive is read through redis-py. A handler's exception leaves the reply
    either unread (redis-py's parser rewound to its start: the next read finds it whole)
    or in ``into``, never taken from the socket and lost: with redis-py's own parser, the
    reply goes into ``into`` before its buffer lets the bytes go (docs/internals.md,
    "Signals").

    Raises:
        PubSubLost: the connection failed.
    """
    sock = getattr(conn, "_sock", None)
    if sock is None:
        raise PubSubLost(RedisConnectionError("the pub/sub connection is closed"))
    # redis-py's own parser: a reply it has buffered already is read at once, else the
    # socket is waited on. (Its can_read(0) costs a failed non-blocking recv, an
    # exception and two settimeout calls on every read that has to wait.)
    parser: Any = getattr(conn, "_parser", None)
    buffer: Any = getattr(parser, "_buffer", None)
    unread = getattr(buffer, "unread_bytes", None)
    if unread is not None:
        ready = unread() > 0
    else:  # hiredis's parser (its buffer a bytearray), or one reset under a loss
        try:
            ready = conn.can_read(timeout=0)  # a reply already buffered, or bytes waiting
        except ResponseError:
            ready = True  # the error reply is read below
        except Exception as error:
            _raise_handlers_own(error)
            raise PubSubLost(error) from error
    if not ready and not select.select([sock], [], [], max(timeout, 0.0))[0]:
        return False
    try:
        if unread is not None and hasattr(parser, "_read_response"):
            # redis-py's parser's read_response() in two steps, the reply stored between
            # them: it parses (a handler's exception rewinds the buffer to the reply's
            # start), then lets the bytes read go. redis-py returns the reply only after
            # that, and a handler raising as it returns would lose it.
            start = buffer.get_pos()
            try:
                into.append(parser._read_response())
            except BaseException:
                buffer.rewind(start)
                raise
            buffer.purge()
        else:
            # Not dropped on an error: a handler's exception in the middle of a reply
            # leaves redis-py's parser as it was (hiredis: nothing fed), so the next read
            # finds it whole; a real failure is PubSubLost, and the listener drops the
            # connection itself. (A handler raising as redis-py returns the reply loses it
            # here: hiredis keeps no copy.)
            into.append(conn.read_response(disconnect_on_error=False))
    except ResponseError as refused:
        into.append(refused)
    except Exception as error:
        _raise_handlers_own(error)
        raise PubSubLost(error) from error
    return True


def _raise_handlers_own(error: Exception) -> None:
    """Raise ``error``, or the exception redis-py made it from, if a signal handler raised
    it: the caller's own, not the connection's (`raised_by_handler()`)."""
    if raised_by_handler(error):
        raise error
    own = interrupt_of(error)
    if own is not None:
        raise own
