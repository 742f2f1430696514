# Source of tenure.sync.route: run python tools/unasync.py after editing.
"""Where a command for a key goes: the one server, or the cluster node owning its slot.

A URL client finds out on first use whether the server runs in cluster mode (INFO cluster)
and then builds a cluster client for the same URL by itself. The topology is refreshed after
a connection failure (a master may have died) and on MOVED. What differs between redis-py's
asyncio and sync cluster clients is behind twin helpers of `tenure._redis` (an
``async_`` name and its plain twin, as for every redis-py call of the drivers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenure._concurrency import AsyncMutex
from tenure._redis import (
    AsyncRedisCluster,
    AsyncSentinelPool,
    MovedError,
    RedisError,
    async_cluster_ready,
    async_move_slot,
    async_node_listener,
    async_node_pool,
    async_refresh_slots,
    cluster_from_url,
    listener_connection,
    parse_info,
    require_cluster_support,
    sharded_pubsub,
    slot_of,
)
from tenure.errors import BackendError


class AsyncRoute:
    """Where a command for a key goes (see the module docstring), for one client."""

    def __init__(
        self, client: Any, url: str | None, timeout: float | None, connect: float | None
    ) -> None:
        self.client = client
        self.cluster = isinstance(client, AsyncRedisCluster)
        if self.cluster:
            require_cluster_support()
        self.sharded = False
        """Release publishes with SPUBLISH and waiters SSUBSCRIBE (cluster on Redis >= 7)."""
        self._url, self._timeout, self._connect = url, timeout, connect
        self._ready = False
        self._stale = False
        self.built: Any = None
        """The cluster client this route built from a URL (closed by `close()`)."""
        self._mutex = AsyncMutex()
        """One topology refresh at a time."""
        self._gates: dict[str, Any] = {}
        """Cluster node -> semaphore bounding its connections (asyncio: redis-py's async
        cluster pools raise when full instead of waiting)."""

    @property
    def resend_window(self) -> float:
        """Seconds a script that surely did not reach a server, and whose caller set no
        wait of its own (a release, a renewal), is sent again while a failover may be
        under way: the client's socket timeout (5 s when none is known)."""
        return self._timeout if self._timeout else 5.0

    def slot(self, key: str) -> int:
        return slot_of(key)

    @property
    def follows_failover(self) -> bool:
        """True when the server behind a key can change: the slot owner in a cluster (the
        slot map is refreshed after a failed connection), the master under Sentinel (which
        redis-py asks on each connect). A command that surely did not reach a server is
        then worth sending again within the caller's wait; on one server it is not."""
        return self.cluster or isinstance(
            getattr(self.client, "connection_pool", None), AsyncSentinelPool
        )

    def failed(self) -> None:
        """A connection failed: refresh the topology before the next command."""
        if self.cluster:
            self._stale = True

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
                await async_cluster_ready(self.client)
                info = await self._info(self._pool(self.client.get_default_node()), "server")
                self.sharded = sharded_pubsub(info)
            self._ready = True

    @property
    def ready(self) -> bool:
        """True once `prepare()` ran (cluster mode known)."""
        return self._ready

    async def _info(self, pool: Any, section: str) -> dict[str, str]:
        conn = await pool.get_connection()
        try:
            await conn.send_command("INFO", section)
            return parse_info(await conn.read_response())
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
                    await async_refresh_slots(self.client)
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

    def _pool(self, node: Any) -> Any:
        return async_node_pool(self.client, node, self._gates)

    async def moved(self, error: MovedError) -> None:
        """The slot has a new owner: remember it (refresh the whole map if that fails)."""
        try:
            await async_move_slot(self.client, error)
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
        return name, async_node_listener(self.client, node), sharded

    async def close(self) -> None:
        if self.built is not None:
            await self.built.aclose()
