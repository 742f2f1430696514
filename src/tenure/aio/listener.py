"""asyncio twin of :mod:`tenure.sync.listener`: one pub/sub connection per client.

Same rules: a channel is subscribed while any task of this client waits on it; an unlock
message wakes one waiter (a ``wake_all`` payload all of them); a waiter leaving abnormally
passes its wake-up on; a reconnect resubscribes and wakes everyone. A reader task dispatches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio

from tenure.errors import BackendError
from tenure.sync.listener import HEALTH_INTERVAL, listener_kwargs, text

log = logging.getLogger("tenure")


@dataclass(eq=False)
class _Channel:
    wake_all: frozenset[str]
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)
    refs: int = 0
    permits: int = 0
    confirmed: bool = False


class AsyncListener:
    """The shared subscription of one :class:`tenure.AsyncClient`."""

    def __init__(self, client: redis.asyncio.Redis, timeout: float | None) -> None:
        pool = client.connection_pool
        self._conn = pool.connection_class(**listener_kwargs(pool.connection_kwargs))
        self._timeout = timeout if timeout is not None else 5.0
        self._send_lock = asyncio.Lock()
        self._channels: dict[str, _Channel] = {}
        self._connected = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    async def subscribe(self, channel: str, wake_all: frozenset[str]) -> None:
        """Count the caller on ``channel``; return once the server confirmed the subscription."""
        if self._closed:
            raise BackendError("the client is closed")
        entry = self._channels.get(channel)
        if entry is None:
            entry = self._channels[channel] = _Channel(wake_all)
            if self._connected:
                await self._send("SUBSCRIBE", channel)
        entry.refs += 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="tenure-listener")
        try:
            async with entry.cond, asyncio.timeout(self._timeout):
                await entry.cond.wait_for(lambda: entry.confirmed or self._closed)
        except BaseException as error:
            await self._leave(channel, entry, pass_on=False)
            if isinstance(error, TimeoutError):
                raise BackendError(
                    f"no confirmation of SUBSCRIBE {channel} in {self._timeout} s"
                ) from None
            raise

    async def wait(self, channel: str, seconds: float) -> bool:
        """Sleep until woken on ``channel`` (True) or ``seconds`` pass (False)."""
        entry = self._channels[channel]
        async with entry.cond:
            try:
                async with asyncio.timeout(None if math.isinf(seconds) else seconds):
                    await entry.cond.wait_for(lambda: entry.permits > 0 or self._closed)
            except TimeoutError:
                return False
            if self._closed:
                raise BackendError("the client is closed")
            entry.permits -= 1
            return True

    async def unsubscribe(self, channel: str, pass_on: bool) -> None:
        """The caller stops waiting on ``channel``."""
        entry = self._channels.get(channel)
        if entry is not None:
            await self._leave(channel, entry, pass_on)

    async def _leave(self, channel: str, entry: _Channel, pass_on: bool) -> None:
        entry.refs -= 1
        if entry.refs == 0:
            del self._channels[channel]
            if self._connected:
                await self._send("UNSUBSCRIBE", channel)
            return
        entry.permits = min(entry.permits + pass_on, entry.refs)
        if pass_on:
            async with entry.cond:
                entry.cond.notify_all()

    async def _send(self, *args: str) -> None:
        # FIFO lock: the server sees SUBSCRIBE/UNSUBSCRIBE in the order the table changed.
        # A failure is the reader's to repair (reconnect, resubscribe everything).
        async with self._send_lock:
            try:
                await self._conn.send_command(*args)
            except (redis.RedisError, OSError) as error:
                log.debug("pub/sub send failed: %s", error)

    async def _run(self) -> None:
        delay = 0.05
        while not self._closed:
            try:
                await self._conn.connect()
                self._connected = True
                if self._channels:
                    await self._send("SUBSCRIBE", *self._channels)
                delay = 0.05
                await self._read()
            except Exception as error:  # a socket closed under a read fails in many ways
                if self._closed:
                    break
                log.warning("tenure pub/sub connection lost (%s); reconnecting", error)
            self._connected = False
            for entry in list(self._channels.values()):
                entry.permits = entry.refs
                async with entry.cond:
                    entry.cond.notify_all()
            await self._conn.disconnect()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _read(self) -> None:
        pinged = False
        while not self._closed:
            reply = await self._conn.read_response(
                timeout=self._timeout if pinged else HEALTH_INTERVAL
            )
            if reply is None:  # nothing within the timeout
                if pinged:
                    raise redis.ConnectionError("no answer to PING on the pub/sub connection")
                await self._send("PING")
                pinged = True
                continue
            pinged = False
            await self._dispatch(reply)

    async def _dispatch(self, reply: Any) -> None:
        if not isinstance(reply, list) or len(reply) < 3:
            return
        kind, channel = text(reply[0]), text(reply[1])
        entry = self._channels.get(channel)
        if entry is None:
            return
        if kind in ("message", "smessage"):
            if text(reply[2]) in entry.wake_all:
                entry.permits = entry.refs
            else:
                entry.permits = min(entry.permits + 1, entry.refs)
        elif kind in ("subscribe", "ssubscribe"):
            entry.confirmed = True
        else:
            return
        async with entry.cond:
            entry.cond.notify_all()

    async def close(self) -> None:
        """Stop the reader and wake every waiter (they raise BackendError)."""
        if self._closed:
            return
        self._closed = True
        for entry in list(self._channels.values()):
            async with entry.cond:
                entry.cond.notify_all()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):  # its end is expected here
                await self._task
        await self._conn.disconnect()
