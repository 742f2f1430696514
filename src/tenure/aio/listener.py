# Source of tenure.sync.listener: run python tools/unasync.py after editing.
"""One pub/sub connection per client (per shard in a cluster), shared by every waiting thread
or task.

The rules (who is subscribed, whom a message wakes, passing a wake-up on, waking all after a
reconnect) are :mod:`tenure.core.parking`'s; this module owns the socket, the mutex and one
condition per channel, and a reader (a thread, or a task) that dispatches replies. A waiter
holds no pooled connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tenure._concurrency import (
    AsyncCondition,
    AsyncEvent,
    AsyncMutex,
    AsyncSpawner,
    AsyncTask,
)
from tenure._redis import AsyncRoute, RedisError, ResponseError, async_read_push, text
from tenure.core.parking import Parked, Parking
from tenure.errors import BackendError

log = logging.getLogger("tenure")

HEALTH_INTERVAL = 30.0
"""Seconds of silence after which the reader PINGs the server to notice a dead connection."""


class AsyncListener:
    """The shared subscription of one client on one server (one shard of a cluster).

    ``sharded``: SSUBSCRIBE/SUNSUBSCRIBE instead of SUBSCRIBE/UNSUBSCRIBE. ``on_trouble`` is
    called when the server refuses a subscription or the connection cannot be made (the
    topology may have changed).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        timeout: float | None,
        *,
        sharded: bool = False,
        on_trouble: Callable[[], None] | None = None,
    ) -> None:
        self._conn = connect()
        self._sub, self._unsub = (
            ("SSUBSCRIBE", "SUNSUBSCRIBE") if sharded else ("SUBSCRIBE", "UNSUBSCRIBE")
        )
        self._sharded = sharded
        self._on_trouble = on_trouble or (lambda: None)
        self.down = False
        """The last connection attempt failed (the server may be gone)."""
        self._timeout = timeout if timeout is not None else 5.0
        self._mutex = AsyncMutex()
        self._parking = Parking()
        self._connected = False
        self._closed = False
        self._stopping = AsyncEvent()
        self._spawner = AsyncSpawner("tenure-listener")
        self._reader: AsyncTask | None = None

    def _condition(self) -> AsyncCondition:
        return AsyncCondition(self._mutex)

    # ------------------------------------------------------------- waiters
    async def subscribe(self, channel: str, wake_all: frozenset[str]) -> None:
        """Count the caller on ``channel``; return once the server confirmed the subscription."""
        async with self._mutex:
            if self._closed:
                raise BackendError("the client is closed")
            entry, first = self._parking.join(channel, wake_all, self._condition)
            if first and self._connected:
                self._parking.subscribing([channel])
                await self._send(self._sub, channel)
            if self._reader is None:
                self._reader = self._spawner.spawn(self._run)
            try:
                confirmed = await entry.cond.wait_for(
                    lambda: entry.confirmed or self._closed, self._timeout
                )
            except BaseException:
                await self._leave(channel, pass_on=False)
                raise
            if not confirmed:
                await self._leave(channel, pass_on=False)
                raise BackendError(f"no confirmation of SUBSCRIBE {channel} in {self._timeout} s")

    async def wait(self, channel: str, seconds: float) -> bool:
        """Sleep until woken on ``channel`` (True) or ``seconds`` pass (False)."""
        async with self._mutex:
            entry = self._parking.channels.get(channel)
            if entry is None:  # moved to another shard's listener: re-check at once
                return True
            await entry.cond.wait_for(lambda: entry.permits > 0 or self._closed, seconds)
            if self._parking.channels.get(channel) is not entry:  # moved while asleep
                return True
            if self._closed:
                raise BackendError("the client is closed")
            return self._parking.take(entry)

    async def unsubscribe(self, channel: str, pass_on: bool) -> None:
        """The caller stops waiting on ``channel``."""
        async with self._mutex:
            await self._leave(channel, pass_on)

    async def _leave(self, channel: str, pass_on: bool) -> None:
        entry, last = self._parking.leave(channel, pass_on)
        if last and self._connected:
            await self._send(self._unsub, channel)
        if entry is not None:
            entry.cond.notify_all()

    # ------------------------------------------- moving channels (cluster topology)
    def lost(self, channel: str) -> bool:
        """True when ``channel``'s subscription is gone here: dropped by the server (its slot
        moved) or the connection is down."""
        return self.down or channel in self._parking.dropped

    def idle(self) -> bool:
        return not self._parking.channels

    async def evict(self, channel: str) -> tuple[frozenset[str], int]:
        """Remove ``channel`` and its waiters (they move to another shard's listener): wakes
        every one of them here to re-check; (wake_all, number of waiters)."""
        async with self._mutex:
            dropped = channel in self._parking.dropped
            entry = self._parking.evict(channel)
            if entry is None:
                return frozenset(), 0
            if self._connected and not dropped:
                await self._send(self._unsub, channel)
            entry.cond.notify_all()
            return entry.wake_all, entry.refs

    async def adopt(self, channel: str, wake_all: frozenset[str], refs: int) -> None:
        """Take over ``refs`` waiters of ``channel`` from another listener and subscribe."""
        async with self._mutex:
            if self._closed:
                return
            first = channel not in self._parking.channels
            self._parking.adopt(channel, wake_all, refs, self._condition())
            if first and self._connected:
                self._parking.subscribing([channel])
                await self._send(self._sub, channel)
            if self._reader is None:
                self._reader = self._spawner.spawn(self._run)

    async def resubscribe(self, channel: str) -> None:
        """Subscribe ``channel`` again after the server dropped it (its slot came back or the
        topology was stale)."""
        async with self._mutex:
            if channel in self._parking.dropped and self._connected:
                self._parking.resubscribing(channel)
                await self._send(self._sub, channel)

    async def _send(self, *args: str) -> None:
        # Under the mutex, so the server sees SUBSCRIBE/UNSUBSCRIBE in the order the
        # channel table changed. A failure is the reader's to repair: it reconnects and
        # subscribes every channel in the table again.
        try:
            await self._conn.send_command(*args)
        except (RedisError, OSError) as error:
            log.debug("pub/sub send failed: %s", error)

    # --------------------------------------------------------------- reader
    async def _run(self) -> None:
        delay = 0.05
        while not self._closed:
            try:
                try:
                    await self._conn.connect()
                except Exception:
                    self.down = True
                    self._on_trouble()
                    raise
                async with self._mutex:
                    self.down = False
                    self._connected = True
                    self._parking.dropped.clear()
                    self._parking.leaving.clear()
                    if self._parking.channels:
                        self._parking.subscribing(self._parking.channels)
                        if self._sharded:  # one slot per SSUBSCRIBE (else CROSSSLOT)
                            for channel in self._parking.channels:
                                await self._send(self._sub, channel)
                        else:
                            await self._send(self._sub, *self._parking.channels)
                delay = 0.05
                await self._read()
            except Exception as error:  # a socket closed under a read fails in many ways
                if self._closed:
                    break
                log.warning("tenure pub/sub connection lost (%s); reconnecting", error)
            async with self._mutex:
                self._connected = False
                for entry in self._parking.disconnected():
                    entry.cond.notify_all()
            await self._conn.disconnect()
            await self._stopping.wait(delay)
            delay = min(delay * 2, 1.0)

    async def _read(self) -> None:
        pinged = False
        while not self._closed:
            try:
                reply = await async_read_push(
                    self._conn, self._timeout if pinged else HEALTH_INTERVAL
                )
            except ResponseError as refused:  # MOVED for a slot this shard no longer owns
                await self._refused(refused)
                continue
            if reply is None:  # nothing within the timeout
                if pinged:
                    raise ConnectionError("no answer to PING on the pub/sub connection")
                async with self._mutex:
                    await self._send("PING")
                pinged = True
                continue
            pinged = False
            if isinstance(reply, list) and len(reply) >= 3:
                await self._dispatch(text(reply[0]), text(reply[1]), text(reply[2]))

    async def _refused(self, error: ResponseError) -> None:
        # The reply does not say which channel: every one still unconfirmed is re-checked
        # by its waiters, who move it to the owner the refreshed topology names.
        log.info("tenure pub/sub subscription refused (%s)", error)
        self._on_trouble()
        async with self._mutex:
            for entry in self._parking.refused():
                entry.cond.notify_all()

    async def _dispatch(self, kind: str, channel: str, payload: str) -> None:
        async with self._mutex:
            entry: Parked | None = self._parking.received(kind, channel, payload)
            if entry is not None:
                # notify_all: the condition is shared with subscribe confirmations, and the
                # permit count (not the notify) decides how many waiters proceed.
                entry.cond.notify_all()

    async def close(self) -> None:
        """Stop the reader and wake every waiter (they raise BackendError)."""
        async with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._stopping.set()
            for entry in self._parking.channels.values():
                entry.cond.notify_all()
            if self._connected:
                # The reply wakes a reader thread, which sees _closed and stops. Closing the
                # socket under it is not enough: a poll() that starts on a just-closed socket
                # ignores it and sleeps for its whole timeout.
                await self._send("PING")
        if self._reader is not None:
            await self._reader.stop(self._timeout)
        await self._conn.disconnect()


class AsyncListeners:
    """Every subscription of one client: one :class:`AsyncListener` per server that carries
    its channels. On one server (or Sentinel) that is one listener; in a cluster with sharded
    pub/sub, one per shard, each channel on the shard owning its slot.

    When a shard's subscription is lost (the slot moved, the master died), the next
    :meth:`wait` on the channel moves it with all its waiters to the owner the refreshed
    topology names and returns True: the waiter re-checks the lock at once.
    """

    def __init__(self, route: AsyncRoute, timeout: float | None) -> None:
        self._route = route
        self._timeout = timeout
        self._mutex = AsyncMutex()
        self._by_node: dict[str, AsyncListener] = {}
        self._by_channel: dict[str, AsyncListener] = {}
        self._refs: dict[str, int] = {}
        self._sharded: dict[str, bool] = {}
        self._closed = False

    async def _target(self, channel: str, sharded: bool) -> AsyncListener:
        # Under self._mutex.
        name, connect, sharded = await self._route.listener_target(channel, sharded)
        listener = self._by_node.get(name)
        if listener is None:
            listener = self._by_node[name] = AsyncListener(
                connect,
                self._timeout,
                sharded=sharded,
                on_trouble=self._route.failed,
            )
        return listener

    async def subscribe(self, channel: str, wake_all: frozenset[str], sharded: bool = True) -> None:
        """Count the caller on ``channel``; return once the server confirmed the subscription.

        ``sharded``: the channel is in its key's slot (see :class:`tenure.core.effects.Subscribe`).
        """
        async with self._mutex:
            if self._closed:
                raise BackendError("the client is closed")
            listener = self._by_channel.get(channel)
            if listener is None:
                listener = self._by_channel[channel] = await self._target(channel, sharded)
                self._sharded[channel] = sharded
            self._refs[channel] = self._refs.get(channel, 0) + 1
        try:
            await listener.subscribe(channel, wake_all)
        except BaseException:
            await self._forget(channel)
            raise

    async def wait(self, channel: str, seconds: float) -> bool:
        """Sleep until woken on ``channel`` (True) or ``seconds`` pass (False)."""
        listener = self._by_channel[channel]
        if listener.lost(channel) and await self._move(channel, listener):
            return True
        return await listener.wait(channel, seconds)

    async def unsubscribe(self, channel: str, pass_on: bool) -> None:
        """The caller stops waiting on ``channel``."""
        listener = self._by_channel.get(channel)
        if listener is not None:
            await listener.unsubscribe(channel, pass_on)
        await self._forget(channel)

    async def _forget(self, channel: str) -> None:
        async with self._mutex:
            refs = self._refs.get(channel, 0) - 1
            if refs > 0:
                self._refs[channel] = refs
                return
            self._refs.pop(channel, None)
            self._by_channel.pop(channel, None)
            self._sharded.pop(channel, None)

    async def _move(self, channel: str, old: AsyncListener) -> bool:
        """Move ``channel`` to the listener of its current owner; True if it moved (or was
        moved by another waiter meanwhile)."""
        async with self._mutex:
            if self._closed or self._by_channel.get(channel) is not old:
                return True
            try:
                new = await self._target(channel, self._sharded.get(channel, True))
            except (RedisError, OSError) as error:  # no topology now: wait as things are
                log.debug("tenure: no route for %s yet: %s", channel, error)
                return False
            if new is old:
                await old.resubscribe(channel)
                return False
            wake_all, refs = await old.evict(channel)
            if refs:
                await new.adopt(channel, wake_all, refs)
            self._by_channel[channel] = new
            if old.idle():
                for name, listener in list(self._by_node.items()):
                    if listener is old:
                        del self._by_node[name]
                await old.close()
            return True

    async def close(self) -> None:
        """Stop every reader and wake every waiter (they raise BackendError)."""
        async with self._mutex:
            self._closed = True
            listeners = list(self._by_node.values())
            self._by_node.clear()
        for listener in listeners:
            await listener.close()
