# Source of tenure.sync.runner: run python tools/unasync.py after editing.
"""The runners: they carry out what the core's flows ask for, and nothing else.

:class:`AsyncRunner` runs one client's flows: scripts and commands on the pool, waiting on
the shared listener, and renewal — it owns the client's one renewal loop, as an etcd session
owns its lease, and starts it when a flow reports a watchdog hold (``KeepRenewed``).
:class:`AsyncCompositeRunner` runs MultiLock/RedLock flows over the members' runners.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import Any, TypeVar

from tenure._concurrency import (
    AsyncEvent,
    AsyncMutex,
    AsyncSpawner,
    AsyncTask,
    async_current_owner,
    async_join,
    async_sleep,
    async_wait_any,
)
from tenure._redis import AsyncRoute, RedisError, backend_error
from tenure.aio.backend import AsyncBackend
from tenure.aio.listener import AsyncListeners
from tenure.core.context import Context
from tenure.core.effects import (
    Call,
    Command,
    Join,
    KeepRenewed,
    OnMember,
    Sleep,
    Spawn,
    Subscribe,
    Unsubscribe,
    Wait,
    WaitAny,
)
from tenure.core.watchdog import renew
from tenure.errors import BackendError

T = TypeVar("T")
log = logging.getLogger("tenure")


class AsyncDriver:
    """Drives a flow to its end: sends each effect's result back, or throws its error in
    (redis-py errors as :class:`tenure.BackendError`) so the flow's cleanup can run."""

    closed = False

    async def run(self, flow: Generator[Any, Any, T]) -> T:
        if self.closed:  # before any I/O: a closed client neither waits nor renews
            raise BackendError("the client is closed")
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration as stop:
                result: T = stop.value
                return result
            try:
                value, error = await self.perform(effect), None
            except RedisError as failure:
                value, error = None, backend_error(failure)
            except BaseException as failure:
                value, error = None, failure

    async def perform(self, effect: Any) -> Any:
        raise NotImplementedError


class AsyncRunner(AsyncDriver):
    """Runs the flows of one client, and renews its watchdog holds."""

    def __init__(self, route: AsyncRoute, ctx: Context, timeout: float | None) -> None:
        self.ctx = ctx
        self.route = route
        self._timeout = timeout
        self._backend = AsyncBackend(route, ctx)
        self._start()
        self.closed = False

    def _start(self) -> None:
        self._listener = AsyncListeners(self.route, self._timeout)
        self._renewal: AsyncTask | None = None
        self._renewal_mutex = AsyncMutex()
        self._stopping = AsyncEvent()
        self._spawner = AsyncSpawner("tenure-watchdog")

    def owner(self) -> str:
        """The calling thread's or task's owner id on this client."""
        if self.ctx.forked():
            # The parent's threads, tasks and sockets are not ours: start over without them.
            self._start()
        return async_current_owner(self.ctx.identity)

    async def perform(self, effect: Any) -> Any:
        match effect:
            case Call():
                return await self._backend.call(effect)
            case Command(args=args):
                return await self._backend.execute(*args)
            case Wait(channel=channel, seconds=seconds):
                return await self._listener.wait(channel, seconds)
            case Subscribe(channel=channel, wake_all=wake_all, sharded=sharded):
                return await self._listener.subscribe(channel, wake_all, sharded)
            case Unsubscribe(channel=channel, pass_on=pass_on):
                return await self._listener.unsubscribe(channel, pass_on)
            case KeepRenewed():
                if self._renewal is None:
                    await self._start_renewal()
                return None
        raise TypeError(f"unknown effect {effect!r}")

    # ------------------------------------------------------------- renewal
    async def _start_renewal(self) -> None:
        async with self._renewal_mutex:
            if self._renewal is None and not self.closed:
                self._renewal = self._spawner.spawn(self._renew)

    async def _renew(self) -> None:
        """Every watchdog_timeout / 3, renew every watchdog hold (DESIGN §4 "Watchdog")."""
        interval = self.ctx.watchdog_timeout / 3
        while not await self._stopping.wait(interval):
            try:
                # In a cluster one script runs on one slot: batches never mix slots.
                lost = await self.run(renew(self.ctx, by_slot=self.route.cluster))
            except Exception:  # never let the renewal loop die
                log.exception("tenure watchdog pass failed")
                continue
            for hold in lost:
                hold.lock.hold_lost(hold.owner)

    async def close(self) -> None:
        """Stop renewal and the listener; holds are not released (they expire)."""
        if self.closed:
            return
        self.closed = True
        self._stopping.set()
        if self._renewal is not None:
            await self._renewal.stop(5.0)
        await self._listener.close()


class AsyncCompositeRunner(AsyncDriver):
    """Runs MultiLock/RedLock flows: each member flow on that member's own runner."""

    def __init__(self, runners: Sequence[AsyncRunner], workers: int) -> None:
        self._runners = list(runners)
        self._spawner = AsyncSpawner("tenure-composite", workers)

    def owners(self) -> tuple[str, ...]:
        """The caller's owner id on each member's client."""
        return tuple(runner.owner() for runner in self._runners)

    async def perform(self, effect: Any) -> Any:
        match effect:
            case OnMember(index=index, flow=flow):
                return await self._runners[index].run(flow)
            case Spawn(index=index, flow=flow):
                return self._spawner.spawn(self._runners[index].run, flow)
            case WaitAny(handles=handles, seconds=seconds):
                return (await async_wait_any(handles, seconds))[1]  # type: ignore[arg-type]
            case Join(handles=handles, seconds=seconds):
                return await async_join(handles, seconds)  # type: ignore[arg-type]
            case Sleep(seconds=seconds):
                return await async_sleep(seconds)
        raise TypeError(f"unknown effect {effect!r}")

    def close(self) -> None:
        """Stop the worker threads of the sync driver once their work is done."""
        self._spawner.close()
