"""``tenure.AsyncClient``: the asyncio entry point, and the driver that runs core flows."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, TypeVar

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from tenure._concurrency import async_current_owner
from tenure.aio.backend import AsyncBackend
from tenure.aio.composite import AsyncMultiLock, AsyncRedLock
from tenure.aio.fair import AsyncFairLock
from tenure.aio.fenced import AsyncFencedLock
from tenure.aio.listener import AsyncListener
from tenure.aio.lock import AsyncLock
from tenure.aio.rwlock import AsyncReadWriteLock
from tenure.core.composite import DEFAULT_NODE_TIMEOUT
from tenure.core.effects import Call, Command, Effect, Flow, Subscribe, Unsubscribe, Wait
from tenure.core.fair import FairLockCore
from tenure.core.fenced import FencedLockCore
from tenure.core.holds import OnLost
from tenure.core.lock import LockCore
from tenure.core.options import backend_error, check_timeouts, make_context, resolve_redis
from tenure.core.watchdog import renew

T = TypeVar("T")
log = logging.getLogger("tenure")


class AsyncClient:
    """Entry point of the asyncio API; the twin of :class:`tenure.Client`.

    Takes the same arguments, with a ``redis.asyncio.Redis`` instead of a ``redis.Redis``.
    Each asyncio task is a separate owner. The pub/sub reader and the watchdog are tasks of
    the event loop that first needs them; use the client from that loop only.

    Raises:
        TypeError, ValueError: for a bad argument, before any I/O.
    """

    def __init__(
        self,
        url_or_redis: str | redis.asyncio.Redis,
        *,
        watchdog_timeout: float = 30.0,
        name_prefix: str = "",
        socket_timeout: float | None = 5.0,
        socket_connect_timeout: float | None = 5.0,
        wait_for_replicas: int = 0,
        replica_timeout: float = 1.0,
    ) -> None:
        self._ctx = make_context(
            watchdog_timeout=watchdog_timeout,
            name_prefix=name_prefix,
            wait_for_replicas=wait_for_replicas,
            replica_timeout=replica_timeout,
        )
        check_timeouts(socket_timeout, socket_connect_timeout)
        self.redis: redis.asyncio.Redis
        self.redis, self._owns_redis, self._timeout = resolve_redis(
            url_or_redis,
            redis.asyncio.Redis,
            redis.asyncio.BlockingConnectionPool,
            Retry(NoBackoff(), 0),
            socket_timeout,
            socket_connect_timeout,
        )
        self._backend = AsyncBackend(self.redis, self._ctx)
        self._listener = AsyncListener(self.redis, self._timeout)
        self._watchdog: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def client_id(self) -> str:
        """This client's uuid, the first part of every owner field it writes."""
        return self._ctx.identity.client_id

    @property
    def watchdog_timeout(self) -> float:
        return self._ctx.watchdog_timeout

    def lock(self, name: str, *, on_lost: OnLost | None = None) -> AsyncLock:
        """A reentrant :class:`tenure.AsyncLock` named ``name``; see :meth:`tenure.Client.lock`."""
        return AsyncLock(self, LockCore(self._ctx, name, on_lost))

    def fenced_lock(self, name: str, *, on_lost: OnLost | None = None) -> AsyncFencedLock:
        """A :class:`tenure.AsyncFencedLock`; see :meth:`tenure.Client.fenced_lock`."""
        return AsyncFencedLock(self, FencedLockCore(self._ctx, name, on_lost))

    def multi_lock(self, *locks: AsyncLock, on_lost: OnLost | None = None) -> AsyncMultiLock:
        """A :class:`tenure.AsyncMultiLock`; see :meth:`tenure.Client.multi_lock`."""
        return AsyncMultiLock(locks, on_lost=on_lost)

    def red_lock(
        self,
        *locks: AsyncLock,
        node_timeout: float = DEFAULT_NODE_TIMEOUT,
        on_lost: OnLost | None = None,
    ) -> AsyncRedLock:
        """A :class:`tenure.AsyncRedLock`; see :meth:`tenure.Client.red_lock`."""
        return AsyncRedLock(locks, node_timeout=node_timeout, on_lost=on_lost)

    def fair_lock(self, name: str, *, on_lost: OnLost | None = None) -> AsyncFairLock:
        """A FIFO :class:`tenure.AsyncFairLock`; see :meth:`tenure.Client.fair_lock`."""
        return AsyncFairLock(self, FairLockCore(self._ctx, name, on_lost))

    def read_write_lock(self, name: str, *, on_lost: OnLost | None = None) -> AsyncReadWriteLock:
        """A :class:`tenure.AsyncReadWriteLock`; see :meth:`tenure.Client.read_write_lock`."""
        return AsyncReadWriteLock(self, name, on_lost)

    # -------------------------------------------------------------- driver
    def _owner(self) -> str:
        if self._ctx.forked():
            self._listener = AsyncListener(self.redis, self._timeout)
            self._watchdog = None
        return async_current_owner(self._ctx.identity)

    async def _run(self, flow: Flow[T]) -> T:
        """Drive ``flow`` to its end, awaiting each effect it yields."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration as stop:
                result: T = stop.value
                return result
            try:
                value, error = await self._perform(effect), None
            except redis.RedisError as failure:
                value, error = None, backend_error(failure)
            except BaseException as failure:
                value, error = None, failure

    async def _perform(self, effect: Effect) -> Any:
        match effect:
            case Call():
                return await self._backend.call(effect)
            case Command(args=args):
                return await self._backend.execute(*args)
            case Subscribe(channel=channel, wake_all=wake_all):
                return await self._listener.subscribe(channel, wake_all)
            case Unsubscribe(channel=channel, pass_on=pass_on):
                return await self._listener.unsubscribe(channel, pass_on)
            case Wait(channel=channel, seconds=seconds):
                return await self._listener.wait(channel, seconds)
        raise TypeError(f"unknown effect {effect!r}")

    def _watch(self) -> None:
        """Make sure the watchdog task runs (after a hold without lease_time was granted)."""
        if self._watchdog is None and not self._closed:
            self._watchdog = asyncio.get_running_loop().create_task(
                self._renewal_loop(), name="tenure-watchdog"
            )

    async def _renewal_loop(self) -> None:
        interval = self._ctx.watchdog_timeout / 3
        while True:
            await asyncio.sleep(interval)
            try:
                lost = await self._run(renew(self._ctx))
            except Exception:  # never let the renewal task die
                log.exception("tenure watchdog pass failed")
                continue
            for hold in lost:
                hold.lock.hold_lost(hold.owner)

    # ------------------------------------------------------------- closing
    async def close(self) -> None:
        """Stop the watchdog and the listener. Holds are not released: they expire."""
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(BaseException):  # its end is expected here
                await self._watchdog
        await self._listener.close()
        if self._owns_redis:
            await self.redis.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
