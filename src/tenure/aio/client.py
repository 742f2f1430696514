# Source of tenure.sync.client: run python tools/unasync.py after editing.
"""The client: the entry point of the API, and the factory of lock objects."""

from __future__ import annotations

from tenure._concurrency import AsyncEvent
from tenure._redis import (
    AsyncBlockingPool,
    AsyncRedis,
    AsyncRedisCluster,
    AsyncRoute,
    resolve_redis,
)
from tenure.aio.composite import AsyncMultiLock, AsyncRedLock
from tenure.aio.election import AsyncElection
from tenure.aio.fair import AsyncFairLock
from tenure.aio.fenced import AsyncFencedLock
from tenure.aio.latch import AsyncCountDownLatch
from tenure.aio.lock import AsyncLock
from tenure.aio.runner import AsyncRunner
from tenure.aio.rwlock import AsyncReadWriteLock
from tenure.aio.semaphore import (
    AsyncPermitExpirableSemaphore,
    AsyncSemaphore,
    OnPermitLost,
)
from tenure.aio.spin import AsyncSpinLock
from tenure.core.args import check_name
from tenure.core.composite import DEFAULT_NODE_TIMEOUT
from tenure.core.holds import OnLost
from tenure.core.inspect import LockInfo, inspect
from tenure.core.options import check_replica_timeout, check_timeouts, make_context
from tenure.core.watchdog import registration


class AsyncClient:
    """Entry point: makes lock objects bound to one Redis/Valkey deployment.

    The sync client (``tenure.Client``: owners are threads) and the asyncio one (owners are
    tasks; its methods are coroutines) take the same arguments.

    Args:
        url_or_redis: a ``redis://`` / ``rediss://`` / ``unix://`` URL, or a redis-py client
            (``redis.Redis`` for the sync client, ``redis.asyncio.Redis`` for the asyncio one, a
            Sentinel-managed one from ``Sentinel.master_for(...)`` too) whose connection pool
            tenure borrows; its own timeouts and retries then apply (see below to turn its
            connect retries off). A cluster client
            (``redis.cluster.RedisCluster`` / ``redis.asyncio.cluster.RedisCluster``) is
            used for its topology: tenure sends each script to the node owning its keys
            itself, once, following MOVED/ASK. A URL of a cluster-mode server (found out
            on first use with ``INFO cluster``) gives a cluster client by itself.
        watchdog_timeout: lease in seconds (float, above 0.1) of holds taken without
            ``lease_time``; the watchdog renews them every ``watchdog_timeout / 3`` seconds.
            Default 30.
        name_prefix: prepended to every lock name on the wire.
        socket_timeout: seconds any one command may take (URL clients only). Default 5.
        socket_connect_timeout: seconds to connect (URL clients only). Default 5.
        wait_for_replicas: after each lock change, wait for this many replicas to
            acknowledge it (0: don't wait); too few raises ``ReplicationError``.
        replica_timeout: seconds to wait for those replicas. Default 1. With
            ``wait_for_replicas`` on it must be below the command timeout (the
            ``socket_timeout`` given, or a passed-in client's): else ValueError.
        name: who this client is, shown with its holders and queued waiters by
            ``inspect()``, ``tenure status`` and ``tenure list`` (with its host and pid).
            Default ``"<hostname>:<pid>"``. The renewal loop registers it (key
            ``tenure:client:<client uuid>``, docs/wire.md) while the client holds or
            queues: no command on the acquire/release path.

    One client serves any number of threads or tasks. It holds one pub/sub connection shared
    by all waiters and one renewal loop (a thread, or a task of the event loop that first
    needs it; use an ``AsyncClient`` from that loop only), both started on first use. After
    ``os.fork()`` the child is a new owner with no holds.

    Every time in seconds is at most 1e12 (its milliseconds stay exact on the wire).

    A passed-in redis-py client keeps its own settings, retries included. tenure sends each
    lock command once itself, but redis-py still retries *connecting* with the client's
    ``retry`` policy (by default retries with exponential backoff and jitter; redis-py 8.1:
    10 retries, 10 ms doubling up to 1 s): against a server that does not answer, one call
    can then take many connect timeouts plus backoff (seen: 8.7 s and 11 connections with
    ``socket_timeout=0.5``) before ``BackendError``. Turn it off as tenure does for URL
    clients: build the client with ``retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0)``,
    or call
    ``r.set_retry(Retry(NoBackoff(), 0))`` on an existing one (it also updates the pool's
    connections); give it a ``socket_timeout`` and ``socket_connect_timeout`` too.

    Raises:
        TypeError, ValueError: for a bad argument, before any I/O.

    Example:
        ```python
        async with tenure.AsyncClient("redis://127.0.0.1:6379/0") as client:
            async with client.lock("orders:42"):
                ...
        ```
    """

    def __init__(
        self,
        url_or_redis: str | AsyncRedis | AsyncRedisCluster,
        *,
        watchdog_timeout: float = 30.0,
        name_prefix: str = "",
        socket_timeout: float | None = 5.0,
        socket_connect_timeout: float | None = 5.0,
        wait_for_replicas: int = 0,
        replica_timeout: float = 1.0,
        name: str | None = None,
    ) -> None:
        ctx = make_context(
            watchdog_timeout=watchdog_timeout,
            name_prefix=name_prefix,
            wait_for_replicas=wait_for_replicas,
            replica_timeout=replica_timeout,
        )
        ctx.client_name = None if name is None else check_name(name, "name")
        check_timeouts(socket_timeout, socket_connect_timeout)
        self.redis: AsyncRedis | AsyncRedisCluster
        self.redis, self._owns_redis, timeout = resolve_redis(
            url_or_redis, AsyncRedis, AsyncBlockingPool, socket_timeout, socket_connect_timeout
        )
        check_replica_timeout(ctx, timeout)
        url = url_or_redis if isinstance(url_or_redis, str) else None
        self._route = AsyncRoute(self.redis, url, socket_timeout, socket_connect_timeout)
        # Spare connections only from a pool tenure made: a borrowed pool may be small.
        self._runner = AsyncRunner(self._route, ctx, timeout, park=self._owns_redis)
        self._closing: AsyncEvent | None = None
        """Set once `close()` has closed everything; None until a `close()` starts."""

    @property
    def name(self) -> str:
        """The name this client's holders and waiters are shown with (``name=``, default
        ``"<hostname>:<pid>"``)."""
        return str(registration(self._runner.ctx)["name"])

    @property
    def client_id(self) -> str:
        """This client's uuid, the first part of every owner field it writes."""
        return self._runner.ctx.identity.client_id

    @property
    def watchdog_timeout(self) -> float:
        """Lease in seconds of holds renewed by the watchdog."""
        return self._runner.ctx.watchdog_timeout

    def lock(
        self, name: str, *, on_lost: OnLost | None = None, on_doubt: OnLost | None = None
    ) -> AsyncLock:
        """A reentrant [`tenure.Lock`][tenure.Lock] named ``name`` (Redisson ``getLock``).

        ``on_lost(lock)`` is called when a hold of this lock is found lost: by a renewal
        that found it gone, or on the client's monotonic clock at the moment its lease
        surely ran out (whatever the network does), or by the releasing caller. It runs
        apart from the renewal loop — its own thread for ``Client``, its own task for
        ``AsyncClient`` (where it must not block the event loop) — so a slow callback
        never delays the renewal of other holds. ``on_doubt(lock)``, called the same way,
        once per episode of jeopardy: a renewal of the hold failed while it is still valid
        on the local clock (``lock.in_doubt``). Raises TypeError/ValueError for a bad name,
        ``on_lost`` or ``on_doubt``.
        """
        return AsyncLock(self._runner, name, on_lost, on_doubt)

    def fenced_lock(
        self, name: str, *, on_lost: OnLost | None = None, on_doubt: OnLost | None = None
    ) -> AsyncFencedLock:
        """A [`tenure.FencedLock`][tenure.FencedLock] named ``name`` (Redisson ``getFencedLock``).

        Arguments and errors as [`lock()`][tenure.AsyncClient.lock]. Fencing tokens go backwards
        after a restart
        of a server without persistence (no RDB save points, AOF off): the first fenced
        acquire of this client logs a WARNING then (see [`tenure.FencedLock`][tenure.FencedLock]).
        """
        return AsyncFencedLock(self._runner, name, on_lost, on_doubt)

    def fair_lock(
        self, name: str, *, on_lost: OnLost | None = None, on_doubt: OnLost | None = None
    ) -> AsyncFairLock:
        """A reentrant lock granted in request order: [`tenure.FairLock`][tenure.FairLock] named
        ``name``
        (Redisson ``getFairLock``). Arguments and errors as [`lock()`][tenure.AsyncClient.lock]."""
        return AsyncFairLock(self._runner, name, on_lost, on_doubt)

    def spin_lock(
        self, name: str, *, on_lost: OnLost | None = None, on_doubt: OnLost | None = None
    ) -> AsyncSpinLock:
        """A reentrant lock whose waiters retry on a back-off instead of pub/sub:
        [`tenure.SpinLock`][tenure.SpinLock] named ``name`` (Redisson ``getSpinLock``). Arguments
        and
        errors as [`lock()`][tenure.AsyncClient.lock]."""
        return AsyncSpinLock(self._runner, name, on_lost, on_doubt)

    def read_write_lock(
        self, name: str, *, on_lost: OnLost | None = None, on_doubt: OnLost | None = None
    ) -> AsyncReadWriteLock:
        """Many readers or one writer: [`tenure.ReadWriteLock`][tenure.ReadWriteLock] named ``name``
        (Redisson
        ``getReadWriteLock``); ``.read_lock()`` / ``.write_lock()`` are its lock objects.
        ``on_lost(side)`` as for [`lock()`][tenure.AsyncClient.lock], called with the side whose
        hold was lost.

        Raises TypeError/ValueError for a bad name or ``on_lost``.
        """
        return AsyncReadWriteLock(self._runner, name, on_lost, on_doubt)

    def multi_lock(
        self, *locks: AsyncLock, on_lost: OnLost | None = None, on_doubt: OnLost | None = None
    ) -> AsyncMultiLock:
        """A [`tenure.MultiLock`][tenure.MultiLock] over ``locks`` (Redisson ``getMultiLock``).

        Members may come from any clients. Raises ValueError with no member, TypeError for a
        member that is not a lock object of this API (sync or asyncio).
        """
        return AsyncMultiLock(locks, on_lost=on_lost, on_doubt=on_doubt)

    def red_lock(
        self,
        *locks: AsyncLock,
        node_timeout: float = DEFAULT_NODE_TIMEOUT,
        on_lost: OnLost | None = None,
        on_doubt: OnLost | None = None,
    ) -> AsyncRedLock:
        """A [`tenure.RedLock`][tenure.RedLock] over ``locks``, each on an independent master.

        ``node_timeout``: seconds to wait for each member's answer in an attempt (default
        0.1; keep it small next to the lease). Raises ValueError with no member or a bad
        ``node_timeout``, TypeError for a member that is not a lock object of this API.
        """
        return AsyncRedLock(locks, node_timeout=node_timeout, on_lost=on_lost, on_doubt=on_doubt)

    def election(self, name: str, *, on_lost: OnLost | None = None) -> AsyncElection:
        """A leader [`tenure.Election`][tenure.Election] named ``name`` (etcd
        ``concurrency.Election``;
        Redisson has none): campaign, lead, resign, observe.

        ``on_lost(election)`` is called, as for [`lock()`][tenure.AsyncClient.lock], when this
        candidate's
        leadership is found lost. Raises TypeError/ValueError for a bad name or ``on_lost``.
        """
        return AsyncElection(self._runner, name, on_lost)

    def semaphore(self, name: str) -> AsyncSemaphore:
        """A counting [`tenure.Semaphore`][tenure.Semaphore] named ``name`` (Redisson
        ``getSemaphore``).

        Raises TypeError/ValueError for a bad name.
        """
        return AsyncSemaphore(self._runner, name)

    def permit_expirable_semaphore(
        self, name: str, *, on_lost: OnPermitLost | None = None
    ) -> AsyncPermitExpirableSemaphore:
        """A [`tenure.PermitExpirableSemaphore`][tenure.PermitExpirableSemaphore] named ``name``
        (Redisson
        ``getPermitExpirableSemaphore``): permits with ids and leases.

        ``on_lost(semaphore, permit_id)`` is called from the renewal loop (or the releasing
        caller) when a permit this client took is found gone. Raises TypeError/ValueError
        for a bad name or ``on_lost``.
        """
        return AsyncPermitExpirableSemaphore(self._runner, name, on_lost)

    def count_down_latch(self, name: str) -> AsyncCountDownLatch:
        """A [`tenure.CountDownLatch`][tenure.CountDownLatch] named ``name`` (Redisson
        ``getCountDownLatch``).

        Raises TypeError/ValueError for a bad name.
        """
        return AsyncCountDownLatch(self._runner, name)

    async def inspect(self, name: str) -> LockInfo:
        """What the server holds under ``name``, read without changing anything.

        Args:
            name: a lock or synchronizer name, as given to the factories (this client's
                ``name_prefix`` is prepended on the wire).

        Returns:
            A `tenure.LockInfo`: kind (``lock``, ``fair``, ``rw``, ``fenced``,
                ``semaphore``, ``permit_expirable_semaphore``, ``latch``, ``free``, ``unknown``),
                holders with owner field, client id, thread/task number and hold count, remaining
                lease, fair queue with deadlines, read-write mode, fencing token, permits, latch
                count and the number of waiting clients.

        Raises:
            TypeError, ValueError: a bad name, before any I/O.
            BackendError: the server failed or did not answer.
        """
        return await self._runner.run(inspect(self._runner.ctx, name))

    async def close(self) -> None:
        """Stop the watchdog and the listener. Holds are not released: they expire.

        Waiters wake with ClientClosedError (a BackendError) and leave their queues first
        (a FairLock's, an election's), for up to the socket timeout. Closes the connection
        pool when the client was made from a URL. Called again, or from another task or
        thread meanwhile, it returns once the client is closed.
        """
        while (closing := self._closing) is not None:
            # Closing or closed: return once that call has closed everything (its waiters'
            # give-ups still use the connections it is about to close), or close here if
            # it was cut short (it took itself back).
            await closing.wait()
            if self._closing is closing:
                return
        self._closing = closing = AsyncEvent()
        try:
            await self._runner.close()
            await self._route.close()
            if self._owns_redis:
                await self.redis.aclose()
        except BaseException:
            self._closing = None
            raise
        finally:
            closing.set()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
