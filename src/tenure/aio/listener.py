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
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tenure._concurrency import (
    AsyncCondition,
    AsyncEvent,
    AsyncMutex,
    AsyncSpawner,
    AsyncTask,
    async_waiter_key,
)
from tenure._redis import AsyncRoute, RedisError, ResponseError, async_read_push, text
from tenure.core.parking import Parking, Ticket
from tenure.errors import BackendError

log = logging.getLogger("tenure")

HEALTH_INTERVAL = 30.0
"""Seconds of silence after which the reader PINGs the server to notice a dead connection."""
LINGER = 0.5
"""Seconds a channel stays subscribed after its last waiter left: a lock taken again and
again (contention) costs no SUBSCRIBE/UNSUBSCRIBE per acquisition, and a waiter who joins a
quiet subscription need not try twice (:meth:`tenure.core.parking.Parked.fresh`)."""


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
        self._parking = Parking(linger=LINGER)
        self._connected = False
        self._closed = False
        self._stopping = AsyncEvent()
        self._spawner = AsyncSpawner("tenure-listener")
        self._reader: AsyncTask | None = None
        self._asked: deque[list[str]] = deque()
        """The channels of each SUBSCRIBE sent and not yet answered, in order: an error
        reply is the answer to the oldest."""

    def _condition(self) -> AsyncCondition:
        return AsyncCondition(self._mutex)

    @staticmethod
    def _notify(tickets: list[Ticket]) -> None:
        for ticket in tickets:
            ticket.cond.notify_all()

    async def _subscribe_send(self, channels: list[str]) -> None:
        # Under the mutex: the table counts it, the FIFO of questions remembers it.
        self._parking.subscribing(channels)
        self._asked.append(list(channels))
        await self._send(self._sub, *channels)

    # ------------------------------------------------------------- waiters
    async def subscribe(
        self, channel: str, wake_all: frozenset[str], since: float | None = None
    ) -> bool:
        """Count the caller on ``channel``; return once the server confirmed the subscription:
        True if it is fresh for an attempt sent at ``since`` (monotonic; see
        :meth:`tenure.core.parking.Parked.fresh`)."""
        key = async_waiter_key()
        async with self._mutex:
            if self._closed:
                raise BackendError("the client is closed")
            entry, ticket, first = self._parking.join(channel, wake_all, key, self._condition)
            if first and self._connected:
                await self._subscribe_send([channel])
            if self._reader is None:
                self._reader = self._spawner.spawn(self._run)
            try:
                confirmed = await ticket.cond.wait_for(
                    lambda: entry.confirmed or self._closed, self._timeout
                )
            except BaseException:
                await self._leave(channel, key, pass_on=False)
                raise
            if not confirmed:
                await self._leave(channel, key, pass_on=False)
                raise BackendError(f"no confirmation of SUBSCRIBE {channel} in {self._timeout} s")
            if entry.refusal is not None:
                await self._leave(channel, key, pass_on=False)
                raise BackendError(entry.refusal)
            return since is not None and entry.fresh(since)

    async def wait(self, channel: str, seconds: float, patience: float | None = None) -> bool:
        """Sleep until woken on ``channel`` (True) or ``seconds`` pass (False).

        ``patience`` (see :class:`tenure.core.effects.Wait`): ``seconds`` is the holder's
        lease end, which the waiters of the channel share: only the oldest of them wakes
        then to re-check (False); the others sleep on until a wake-up or ``patience``.
        """
        key = async_waiter_key()
        async with self._mutex:
            entry = self._parking.channels.get(channel)
            ticket = entry.tickets.get(key) if entry is not None else None
            if entry is None or ticket is None:  # moved to another shard's listener
                return True
            now = time.monotonic()
            shared = patience is not None
            if patience is not None:
                entry.expiry = now + seconds if math.isfinite(seconds) else math.inf
                seconds = patience
            end = now + seconds if math.isfinite(seconds) else math.inf
            while not ticket.permit and not self._closed:
                if self._parking.channels.get(channel) is not entry:  # moved while asleep
                    return True
                until = entry.sleep_until(ticket, end, shared)
                left = until - time.monotonic()
                if left <= 0:
                    return False
                await ticket.cond.wait(left)
            if self._parking.channels.get(channel) is not entry:
                return True
            if self._closed:
                raise BackendError("the client is closed")
            if entry.refusal is not None:
                raise BackendError(entry.refusal)
            return self._parking.take(ticket)

    async def unsubscribe(self, channel: str, pass_on: bool) -> None:
        """The caller stops waiting on ``channel``."""
        key = async_waiter_key()
        async with self._mutex:
            await self._leave(channel, key, pass_on)

    async def _leave(self, channel: str, key: Any, pass_on: bool) -> None:
        notify, last = self._parking.leave(channel, key, pass_on)
        if last and self._connected:
            await self._send(self._unsub, channel)
        self._notify(notify)

    # ------------------------------------------- moving channels (cluster topology)
    def lost(self, channel: str) -> bool:
        """True when ``channel``'s subscription is gone here: dropped by the server (its slot
        moved) or the connection is down."""
        return self.down or channel in self._parking.dropped

    def idle(self) -> bool:
        return not any(entry.tickets for entry in self._parking.channels.values())

    def hears(self, channel: str) -> bool:
        """True if this connection is subscribed to ``channel`` now (no lock taken: a
        moment's answer, for a guess that may be off by a message in flight)."""
        return self._connected and self._parking.hears(channel)

    async def evict(self, channel: str) -> tuple[frozenset[str], list[Any]]:
        """Remove ``channel`` and its waiters (they move to another shard's listener): wakes
        every one of them here to re-check; (wake_all, the waiters' keys)."""
        async with self._mutex:
            dropped = channel in self._parking.dropped
            entry = self._parking.evict(channel)
            if entry is None:
                return frozenset(), []
            if self._connected and not dropped:
                await self._send(self._unsub, channel)
            self._notify(list(entry.tickets.values()))
            return entry.wake_all, [k for k, t in entry.tickets.items() for _ in range(t.depth)]

    async def adopt(self, channel: str, wake_all: frozenset[str], waiters: list[Any]) -> None:
        """Take over ``waiters`` of ``channel`` from another listener and subscribe."""
        async with self._mutex:
            if self._closed:
                return
            first = channel not in self._parking.channels
            self._parking.adopt(channel, wake_all, waiters, self._condition)
            if first and self._connected:
                await self._subscribe_send([channel])
            if self._reader is None:
                self._reader = self._spawner.spawn(self._run)

    async def resubscribe(self, channel: str) -> None:
        """Subscribe ``channel`` again after the server dropped it (its slot came back or the
        topology was stale)."""
        async with self._mutex:
            if channel in self._parking.dropped and self._connected:
                self._parking.dropped.discard(channel)
                await self._subscribe_send([channel])

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
                    self._asked.clear()
                    # A channel refused for lack of permission stays refused: not asked again.
                    channels = [c for c, e in self._parking.channels.items() if e.refusal is None]
                    if channels:
                        if self._sharded:  # one slot per SSUBSCRIBE (else CROSSSLOT)
                            for channel in channels:
                                await self._subscribe_send([channel])
                        else:
                            await self._subscribe_send(channels)
                delay = 0.05
                await self._read()
            except Exception as error:  # a socket closed under a read fails in many ways
                if self._closed:
                    break
                log.warning("tenure pub/sub connection lost (%s); reconnecting", error)
            async with self._mutex:
                self._connected = False
                self._notify(self._parking.disconnected())
            await self._conn.disconnect()
            await self._stopping.wait(delay)
            delay = min(delay * 2, 1.0)

    async def _read(self) -> None:
        pinged = False
        heard = time.monotonic()
        while not self._closed:
            async with self._mutex:  # lingering channels whose time is up
                gone, sweep = self._parking.expired()
                for channel in gone:
                    await self._send(self._unsub, channel)
            silence = (self._timeout if pinged else HEALTH_INTERVAL) - (time.monotonic() - heard)
            try:
                reply = await async_read_push(self._conn, max(0.0, min(silence, sweep)))
            except ResponseError as refused:  # MOVED for a slot this shard no longer owns
                await self._refused(refused)
                continue
            if reply is None:  # nothing within the timeout
                if sweep < silence:  # woke to let lingering channels go
                    continue
                heard = time.monotonic()
                if pinged:
                    raise ConnectionError("no answer to PING on the pub/sub connection")
                async with self._mutex:
                    await self._send("PING")
                pinged = True
                continue
            pinged = False
            heard = time.monotonic()
            if isinstance(reply, list) and len(reply) >= 3:
                await self._dispatch(text(reply[0]), text(reply[1]), text(reply[2]))

    async def _refused(self, error: ResponseError) -> None:
        async with self._mutex:
            asked = self._asked.popleft() if self._asked else []
            if str(error).startswith("NOPERM") or type(error).__name__ == "NoPermissionError":
                # An ACL refusal is an answer, not a connection loss: the waiters of these
                # channels get it as an error; nobody reconnects, nobody else is woken.
                names = ", ".join(asked) or "?"
                reason = f"the server refused {self._sub} {names}: {error}"
                log.warning("tenure pub/sub: %s", reason)
                self._notify(self._parking.forbidden(asked, reason))
                return
            # The reply does not say which channel: every one still unconfirmed is
            # re-checked by its waiters, who move it to the owner the refreshed topology
            # names.
            log.info("tenure pub/sub subscription refused (%s)", error)
            self._notify(self._parking.refused())
            self._asked.clear()
        self._on_trouble()

    async def _dispatch(self, kind: str, channel: str, payload: str) -> None:
        async with self._mutex:
            if kind in ("subscribe", "ssubscribe") and self._asked:
                asked = self._asked[0]
                if channel in asked:
                    asked.remove(channel)
                    if not asked:
                        self._asked.popleft()
            self._notify(self._parking.received(kind, channel, payload))

    async def close(self) -> None:
        """Stop the reader and wake every waiter (they raise BackendError)."""
        async with self._mutex:
            if self._closed:
                return
            self._closed = True
            self._stopping.set()
            for entry in self._parking.channels.values():
                self._notify(list(entry.tickets.values()))
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

    async def subscribe(
        self,
        channel: str,
        wake_all: frozenset[str],
        sharded: bool = True,
        since: float | None = None,
    ) -> bool:
        """Count the caller on ``channel``; return once the server confirmed the subscription
        (True if fresh for an attempt sent at ``since``: see :meth:`AsyncListener.subscribe`).

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
            return await listener.subscribe(channel, wake_all, since)
        except BaseException:
            await self._forget(channel)
            raise

    async def wait(self, channel: str, seconds: float, patience: float | None = None) -> bool:
        """Sleep until woken on ``channel`` (True) or ``seconds`` pass (False); see
        :meth:`AsyncListener.wait`."""
        listener = self._by_channel[channel]
        if listener.lost(channel) and await self._move(channel, listener):
            return True
        return await listener.wait(channel, seconds, patience)

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
            wake_all, waiters = await old.evict(channel)
            if waiters:
                await new.adopt(channel, wake_all, waiters)
            self._by_channel[channel] = new
            if old.idle():
                for name, listener in list(self._by_node.items()):
                    if listener is old:
                        del self._by_node[name]
                await old.close()
            return True

    def hears(self, channel: str) -> bool:
        """True if one of this client's pub/sub connections is subscribed to ``channel``
        now (:meth:`AsyncListener.hears`)."""
        return any(listener.hears(channel) for listener in list(self._by_node.values()))

    async def close(self) -> None:
        """Stop every reader and wake every waiter (they raise BackendError)."""
        async with self._mutex:
            self._closed = True
            listeners = list(self._by_node.values())
            self._by_node.clear()
        for listener in listeners:
            await listener.close()
