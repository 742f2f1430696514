# Source of tenure.sync.listener: run python tools/unasync.py after editing.
"""One pub/sub connection per client (per shard in a cluster), shared by every waiting thread
or task: the driver of `tenure.core.listening`.

Every rule (whom a message wakes, who reads the socket and who takes it over, what an
answer or a silence means, when to connect again and what a reconnect wakes) is decided by
`tenure.core.listening.Listening` and `tenure.core.parking.Parking`, under this
module's mutex; this module owns the socket, the mutex and one condition per waiter, and
does the I/O the table returns. A waiter holds no pooled connection: the waiters read the
shared socket themselves, one at a time, and a background thread or task (the janitor)
makes the connection and reads while nobody waits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

from tenure._concurrency import (
    AsyncCondition,
    AsyncMutex,
    AsyncSpawner,
    AsyncSteady,
    AsyncTask,
    AsyncUnlocked,
    async_waiter_key,
)
from tenure._redis import (
    AsyncRoute,
    PubSubLost,
    RedisError,
    ResponseError,
    async_connected,
    async_read_push,
    async_send_command,
    interrupt_of,
    text,
)
from tenure.core.listening import JANITOR, Listening, Subscriptions
from tenure.core.parking import Parked, Ticket
from tenure.errors import BackendError, ClientClosedError

log = logging.getLogger("tenure")


class AsyncListener:
    """The shared subscription of one client on one server (one shard of a cluster).

    ``sharded``: SSUBSCRIBE/SUNSUBSCRIBE instead of SUBSCRIBE/UNSUBSCRIBE. ``on_trouble`` is
    called when the server refuses a subscription or the connection cannot be made (the
    topology may have changed). Every decision is `tenure.core.listening.Listening`'s;
    this class holds the socket, the mutex and the conditions, and does the I/O.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        timeout: float | None,
        *,
        sharded: bool = False,
        on_trouble: Callable[[], None] | None = None,
        subscriptions: Subscriptions | None = None,
        relay: Callable[[Any], None] | None = None,
    ) -> None:
        self._conn = connect()
        self._on_trouble = on_trouble or (lambda: None)
        self._relay = relay or (lambda call: None)
        self._timeout = timeout if timeout is not None else 5.0
        self._table = Listening(sharded=sharded, timeout=self._timeout)
        self._subscriptions = subscriptions or Subscriptions()
        self._subscriptions.add(self._table)
        self._parking = self._table.parking
        self._mutex = AsyncMutex()
        self._janitor_wake = AsyncCondition(self._mutex)
        self._handed = AsyncCondition(self._mutex)
        """Notified when the reader lets go of the socket after `close()`."""
        self._spawner = AsyncSpawner("tenure-listener")
        self._janitor: AsyncTask | None = None
        self._inbox: list[Any] = []
        """The reply read from the socket that the table has not had yet (see
        `_read_once()`)."""

    @property
    def down(self) -> bool:
        """The last connection attempt failed (the server may be gone)."""
        return self._table.down

    def _condition(self) -> AsyncCondition:
        return AsyncCondition(self._mutex)

    def _notify(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            ticket.cond.notify_all()
        for call in self._table.take_relays():  # wake-ups to pass on to other clients
            self._relay(call)

    async def _subscribe_send(self, channels: list[str]) -> None:
        # Under the mutex: the table counts it and remembers the question. An interrupt
        # once it is counted, before or while it is sent, gives the connection up.
        try:
            if self._table.subscribing(channels):
                await self._send(self._table.subscribe_command, *channels)
        except BaseException as error:
            await self._interrupted(error)
            raise

    async def _interrupted(self, error: BaseException) -> None:
        """Under the mutex: an interrupt cut short a send the table counted (whether the
        server got it is unknown): the connection is made again at once, from the table
        (`tenure.core.listening.Listening.lost()`, ``interrupted``)."""
        if self._table.connected:
            await self._lost(error, interrupted=True)
            self._start_janitor()

    def _start_janitor(self) -> None:
        if self._janitor is None:
            self._janitor = self._spawner.spawn(self._sweep)
        else:
            self._janitor_wake.notify_all()  # a new channel: sweeps are due again

    # ------------------------------------------------------------- waiters
    async def subscribe(
        self,
        channel: str,
        wake_all: frozenset[str],
        since: float | None = None,
        alias: str | None = None,
        relay: Any = None,
    ) -> bool:
        """Count the caller on ``channel`` (and ``alias``: see `tenure.core.parking`);
        return once the server confirmed the subscription: True if it is fresh for an attempt
        sent at ``since`` (monotonic; see `tenure.core.parking.Parked.fresh()`). On a
        channel with fences, ``since`` is when the caller's call began
        (`tenure.core.parking.Parking.fence()`)."""
        key = async_waiter_key()
        async with self._mutex:
            if self._table.closed:
                raise ClientClosedError("the client is closed")
            try:
                # From the join on: an interrupt right after any call below (a signal
                # handler runs as a call returns) must not leave the ticket behind.
                entry, ticket, first = self._parking.join(
                    channel, wake_all, key, self._condition, alias, relay
                )
                if first:
                    await self._subscribe_send(self._parking.names(channel))
                    self._start_janitor()
                elif self._parking.fence(channel, ticket, since):
                    await self._subscribe_send([channel])  # its fence (tenure.core.parking)
                end = time.monotonic() + self._timeout
                while not (entry.confirmed or self._table.closed):
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    await self._pause(key, ticket.cond, left)
            except BaseException:
                await self._leave(channel, key, pass_on=False)
                self._parking.drop_unasked(channel)  # cut short before its SUBSCRIBE
                raise
            finally:
                self._hand_on(key)
            if not (entry.confirmed or self._table.closed):
                await self._leave(channel, key, pass_on=False)
                unconfirmed = BackendError(
                    f"no confirmation of SUBSCRIBE {channel} in {self._timeout} s"
                )
                if self._table.connected:
                    # A server that does not answer, or an answer lost: either way the
                    # table would wait for it in vain, and the channel's later waiters
                    # with it. The connection is made again, as after an unanswered PING
                    # (the janitor subscribes every channel of the table anew).
                    await self._lost(unconfirmed)
                raise unconfirmed
            if entry.refusal is not None:
                await self._leave(channel, key, pass_on=False)
                raise BackendError(entry.refusal)
            return since is not None and entry.fresh(since)

    async def wait(
        self, channel: str, seconds: float, patience: float | None = None
    ) -> bool | str:
        """Sleep until woken on ``channel`` (True, or the payload of the message that woke
        it: `tenure.core.parking.Parking.take_word`) or ``seconds`` pass (False).

        ``patience`` (see `tenure.core.effects.Wait`): ``seconds`` is the holder's
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
                await self._wake(entry.expires(now + seconds, ticket))
                seconds = patience
            end = now + seconds
            try:
                while not ticket.permit and not self._table.closed:
                    if self._parking.channels.get(channel) is not entry:  # moved meanwhile
                        return True
                    left = entry.sleep_until(ticket, end, shared) - time.monotonic()
                    if left <= 0:
                        return False
                    await self._pause(key, ticket.cond, left)
            finally:
                self._hand_on(key)
            if self._parking.channels.get(channel) is not entry:
                return True
            if self._table.closed:
                raise ClientClosedError("the client is closed")
            if entry.refusal is not None:
                raise BackendError(entry.refusal)
            return self._parking.take_word(ticket)

    async def unsubscribe(self, channel: str, pass_on: bool, lease: float | None = None) -> None:
        """The caller stops waiting on ``channel`` (``lease``: see
        `tenure.core.effects.Unsubscribe`). Often a clean-up after a cancellation or an
        interrupt: another one landing while it waits for the mutex is raised once the
        caller has left (else its ticket, and the channel's subscription, would stay)."""
        key = async_waiter_key()
        async with AsyncSteady(self._mutex) as steady:
            await self._leave(channel, key, pass_on, lease)
            steady.rethrow()

    def waits_on(self, channel: str, key: Hashable) -> int:
        """How many times waiter ``key`` is counted on ``channel`` here, 0 if it has no
        ticket (no lock taken: only the waiter itself adds or removes its ticket, or moves
        it with its channel)."""
        entry = self._parking.channels.get(channel)
        ticket = entry.tickets.get(key) if entry is not None else None
        return ticket.depth if ticket is not None else 0

    async def drain(self) -> None:
        """Read and apply what has come on the socket, without blocking, unless a waiter
        reads it now (see `tenure.core.effects.Drain`)."""
        async with self._mutex:
            if self._table.may_drain():
                await self._drain(async_waiter_key())

    async def _leave(
        self, channel: str, key: Any, pass_on: bool, lease: float | None = None
    ) -> None:
        notify, last = self._parking.leave(channel, key, pass_on, lease)
        if last:
            await self._send(self._table.unsubscribe_command, *self._table.letting_go(channel))
        elif self._table.left(channel, lease is not None):  # lingers: see Listening.left()
            self._janitor_wake.notify_all()
        for alias in self._table.take_alias_off():
            await self._send(self._table.unsubscribe_command, alias)
        await self._wake(notify)

    async def _pause(self, key: Hashable, cond: AsyncCondition, seconds: float) -> None:
        """One step of a waiter's sleep, under the mutex: read and hand on one reply if
        the table makes it the reader, else sleep on ``cond`` until notified or ``seconds``
        pass. The caller checks again what it waits for, and calls `_hand_on()` once
        it stops waiting."""
        if self._table.role(key) == "read":
            self._table.reader_cond = cond
            try:
                await self._read_once(seconds)
            finally:
                self._table.reader_cond = None
            return
        self._table.sleeping(key, cond)
        try:
            await cond.wait(seconds)
        finally:
            self._table.awake(key)

    def _hand_on(self, key: Hashable) -> None:
        """``key`` stops waiting (under the mutex): the sleeper the table names takes the
        socket over, else the janitor is woken if its relay reads are due (skipped while
        ``key`` read: `tenure.core.listening.Listening.relay_due()`); after `close()`, the
        closer learns that nobody reads."""
        cond = self._table.hand_on(key)
        if cond is not None:
            cond.notify_all()
        elif self._table.relay_due():
            self._janitor_wake.notify_all()
        if self._table.closed and self._table.reader is None:
            self._handed.notify_all()

    async def _wake(self, tickets: list[Ticket]) -> None:
        """Notify ``tickets``, under the mutex, from a waiter that is not reading: a
        notify for the reader blocked on the socket comes back to it as a PING's reply (a
        notify would reach it only when its read times out)."""
        self._notify(tickets)
        try:
            if self._table.poke(tickets):
                await self._send("PING")
        except BaseException as error:  # counted as sent (`poked`): see `_subscribe_send`
            await self._interrupted(error)
            raise

    # ------------------------------------------- moving channels (cluster topology)
    def lost(self, channel: str) -> bool:
        """True when ``channel``'s subscription is gone here: dropped by the server (its slot
        moved) or the connection is down."""
        return self._table.down or channel in self._parking.dropped

    def idle(self) -> bool:
        # Not under this listener's mutex: list() copies the table in one step (GIL).
        return not any(entry.tickets for entry in list(self._parking.channels.values()))

    def hears(self, channel: str) -> bool:
        """True if this connection is subscribed to ``channel`` now (no lock taken: a
        moment's answer, for a guess that may be off by a message in flight)."""
        return self._table.hears(channel)

    async def evict(self, channel: str) -> Parked | None:
        """Remove ``channel`` and its waiters (they move to another shard's listener): wakes
        every one of them here to re-check; its entry in this table, if it had one."""
        async with self._mutex:
            dropped = channel in self._parking.dropped
            entry = self._parking.evict(channel)
            if entry is None:
                return None
            names = self._table.letting_go(channel)
            if not dropped:
                await self._send(self._table.unsubscribe_command, *names)
            await self._wake(list(entry.tickets.values()))
            return entry

    async def adopt(self, channel: str, entry: Parked) -> None:
        """Take over the waiters of ``channel`` (its entry in another listener's table) and
        subscribe."""
        async with self._mutex:
            if self._table.closed:
                return
            first = channel not in self._parking.channels
            waiters = [k for k, t in entry.tickets.items() for _ in range(t.depth)]
            self._parking.adopt(
                channel, entry.wake_all, waiters, self._condition, entry.alias, entry.relay
            )
            if first:
                await self._subscribe_send(self._parking.names(channel))
                self._start_janitor()

    async def resubscribe(self, channel: str) -> None:
        """Subscribe ``channel`` again after the server dropped it (its slot came back or the
        topology was stale)."""
        async with self._mutex:
            if channel in self._parking.dropped and self._table.connected:
                self._parking.dropped.discard(channel)
                await self._subscribe_send(self._parking.names(channel))

    async def _send(self, *args: str) -> None:
        # Under the mutex, so the server sees SUBSCRIBE/UNSUBSCRIBE in the order the
        # channel table changed. Nothing while the connection is down (redis-py would
        # connect on its own, under our mutex): making it again subscribes every channel
        # in the table. A failure is the reader's to repair likewise.
        if not self._table.connected:
            return
        try:
            # Not redis-py's send_command: on Python 3.11 it writes through wait_for, which
            # returns, not raises, when the caller is cancelled as the write completes (an
            # acquire cancelled as it PINGs the reader returned its grant).
            await async_send_command(self._conn, *args)
        except (RedisError, OSError) as error:
            interrupt = interrupt_of(error)
            if interrupt is not None:  # a signal handler's, which redis-py wrapped
                await self._interrupted(interrupt)
                raise
            log.debug("pub/sub send failed: %s", error)
        except BaseException as error:  # the caller's cancellation or signal handler
            await self._interrupted(error)
            raise

    # ------------------------------------------------------ the reader's role
    async def _read_once(self, seconds: float) -> bool:
        """Under the mutex, by the reader, connected: read one reply for up to ``seconds``
        (the mutex let go meanwhile) and hand it to the table. True if a reply came.

        The reply goes into `_inbox` as it is read and leaves it only once the table has
        it: an interrupt landing once it is read (a signal handler's exception as the
        mutex is taken back, a cancellation while the task waits for it) hands it on
        first, then goes on to the caller. Lost, a SUBSCRIBE's confirmation would leave
        every later waiter on that channel waiting for it in vain."""
        if self._inbox:  # left by a reader a second interrupt cut short: the table first
            await self._hand_in()
            return True
        plan = self._table.plan_read(seconds)  # lets no channel go: the janitor does
        unlocked = AsyncUnlocked(self._mutex)
        try:
            try:
                async with unlocked:
                    await async_read_push(self._conn, plan.timeout, self._inbox)
            finally:
                await unlocked.retake()  # see AsyncUnlocked
            if self._inbox:
                await self._hand_in()
                return True
        except PubSubLost as failure:
            if self._table.connected:
                await self._lost(failure.error)
            else:  # given up meanwhile (an interrupted send): that was the loss, no other
                log.debug("tenure pub/sub: a read ended with the given-up socket: %s", failure)
            return False
        except BaseException as error:
            # The caller's own: cancelled, or a signal handler raised while it waited for
            # the socket or for the mutex. It goes on to the caller as it is, once the
            # table has the reply read before it (a second interrupt meanwhile is held
            # back, then raised in its place); the connection stays for the other
            # waiters unless redis-py dropped it mid-reply.
            interrupt = error
            for _attempt in range(3):
                try:
                    if self._inbox:
                        await self._hand_in()
                    break
                except BaseException as again:
                    interrupt = again
            if self._table.connected and not async_connected(self._conn):
                await self._lost(interrupt, interrupted=True)  # make it again
            if interrupt is error:
                raise
            raise interrupt from error
        # Nothing within the timeout.
        silence = self._table.silent()
        if silence == "ping":
            await self._send("PING")
        elif silence == "lost":
            await self._lost(ConnectionError("no answer to PING on the pub/sub connection"))
        return False

    async def _hand_in(self) -> None:
        """Under the mutex: the table gets the reply in `_inbox`, which keeps it until
        the table has it (a handler raising once the table changed, before it is taken
        out, may give the table a reply twice: a confirmation counts once, a message
        wakes one more waiter)."""
        reply = self._inbox[0]
        if not self._table.connected:  # given up while it read: the reply is not for now
            self._inbox.clear()
        elif isinstance(reply, ResponseError):  # MOVED for a slot this shard no longer owns
            self._inbox.clear()
            await self._refused(reply)
        elif isinstance(reply, list) and len(reply) >= 3:
            kind, channel, payload = text(reply[0]), text(reply[1]), text(reply[2])
            tickets = self._table.received(kind, channel, payload)
            self._inbox.clear()
            self._notify(tickets)
        else:
            self._table.other_reply()
            self._inbox.clear()

    async def _connect(self) -> None:
        # Under the mutex, by the janitor holding the reader's role (the mutex let go
        # while connecting).
        unlocked = AsyncUnlocked(self._mutex)
        try:
            try:
                async with unlocked:
                    # A fresh socket, always: one a loss left open (its disconnect cut
                    # short) may still carry subscriptions the table has let go, and
                    # redis-py's connect() would keep it.
                    await self._conn.disconnect()
                    await self._conn.connect()
            finally:
                await unlocked.retake()  # see AsyncUnlocked
        except Exception as error:
            self._on_trouble()
            await self._lost(error, connecting=True)
            return
        for batch in self._table.connected_now():
            await self._send(self._table.subscribe_command, *batch)

    async def _lost(
        self, error: BaseException, connecting: bool = False, interrupted: bool = False
    ) -> None:
        # Under the mutex, by the reader: the table decides whom to wake (nobody until the
        # new subscriptions are confirmed) and when to connect again. ``interrupted``: the
        # reader's own cancellation or signal made redis-py drop the socket, which is not
        # the server's nor the network's doing: no connection loss to warn of.
        self._inbox.clear()  # read from the socket given up: not for the new one
        if interrupted:
            log.debug("tenure pub/sub: an interrupt (%r) cut I/O short; reconnecting", error)
        elif not self._table.closed:
            log.warning("tenure pub/sub connection lost (%s); reconnecting", error)
        self._notify(
            self._table.connect_failed() if connecting else self._table.lost(interrupted)
        )
        self._janitor_wake.notify_all()
        unlocked = AsyncUnlocked(self._mutex)
        try:
            async with unlocked:
                await self._conn.disconnect()
        finally:
            await unlocked.retake()  # see AsyncUnlocked

    async def _refused(self, error: ResponseError) -> None:
        # Under the mutex.
        no_permission = (
            str(error).startswith("NOPERM") or type(error).__name__ == "NoPermissionError"
        )
        notify, trouble, reason, again = self._table.refused(str(error), no_permission)
        if again:
            log.info("tenure pub/sub: %s; waiting on the lock channels alone", reason)
        elif no_permission:
            log.warning("tenure pub/sub: %s", reason)
        else:
            log.info("tenure pub/sub subscription refused (%s)", error)
        for batch in again:
            await self._send(self._table.subscribe_command, *batch)
        self._notify(notify)
        if trouble:
            self._on_trouble()

    async def _sweep(self) -> None:
        """The janitor: makes the connection while channels are waited on (again after a
        loss, once the back-off is over); while nobody reads, reads what came without
        blocking (a PING after the health interval of silence) and lets lingering
        channels go (`tenure.core.listening.Listening.janitor_step()`)."""
        async with self._mutex:
            while not self._table.closed:
                step = self._table.janitor_step()
                if step == "drain":
                    await self._drain(JANITOR)
                elif step == "connect":
                    try:
                        await self._connect()
                    finally:
                        self._hand_on(JANITOR)
                if self._table.closed:
                    break
                gone, due = self._table.janitor_plan()
                for channel in gone:
                    await self._send(
                        self._table.unsubscribe_command, *self._table.letting_go(channel)
                    )
                await self._janitor_wake.wait(due)

    async def _drain(self, key: Hashable) -> None:
        # Under the mutex, with nobody reading: ``key`` reads what came, without blocking,
        # until a waiter wants the socket.
        self._table.reader = key
        try:
            while self._table.draining(key) and await self._read_once(0.0):
                pass
        finally:
            self._hand_on(key)

    async def close(self) -> None:
        """Stop reading and wake every waiter (they raise BackendError)."""
        async with self._mutex:
            if self._table.closed:
                return
            self._notify(self._table.close())
            self._janitor_wake.notify_all()
            if self._table.reader is not None:
                if self._table.connected:
                    # The reply wakes a reader blocked on the socket. Closing the socket
                    # under it is not enough: a poll() that starts on a just-closed socket
                    # ignores it and sleeps for its whole timeout.
                    await self._send("PING")
                await self._handed.wait_for(lambda: self._table.reader is None, self._timeout)
        self._subscriptions.remove(self._table)
        if self._janitor is not None:
            await self._janitor.stop(self._timeout)
        await self._conn.disconnect()


class AsyncListeners:
    """Every subscription of one client: one `AsyncListener` per server that carries
    its channels. On one server (or Sentinel) that is one listener; in a cluster with sharded
    pub/sub, one per shard, each channel on the shard owning its slot.

    When a shard's subscription is lost (the slot moved, the master died), the next
    `wait()` on the channel moves it with all its waiters to the owner the refreshed
    topology names and returns True: the waiter re-checks the lock at once.
    """

    def __init__(
        self,
        route: AsyncRoute,
        timeout: float | None,
        subscriptions: Subscriptions | None = None,
        relay: Callable[[Any], None] | None = None,
    ) -> None:
        self._route = route
        self._timeout = timeout
        self._subscriptions = subscriptions or Subscriptions()
        self._relay = relay
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
                subscriptions=self._subscriptions,
                relay=self._relay,
            )
        return listener

    async def subscribe(
        self,
        channel: str,
        wake_all: frozenset[str],
        sharded: bool = True,
        since: float | None = None,
        alias: str | None = None,
        relay: Any = None,
    ) -> bool:
        """Count the caller on ``channel``; return once the server confirmed the subscription
        (True if fresh for an attempt sent at ``since``: see `AsyncListener.subscribe()`;
        ``alias``, ``relay``: `tenure.core.effects.Subscribe`).

        ``sharded``: the channel is in its key's slot (see `tenure.core.effects.Subscribe`).
        """
        async with self._mutex:
            if self._closed:
                raise ClientClosedError("the client is closed")
            listener = self._by_channel.get(channel)
            if listener is None:
                listener = self._by_channel[channel] = await self._target(channel, sharded)
                self._sharded[channel] = sharded
            self._refs[channel] = self._refs.get(channel, 0) + 1
        try:
            return await listener.subscribe(channel, wake_all, since, alias, relay)
        except BaseException:
            # With its ticket still there, the subscription was made and an interrupt came
            # after: the flow's Unsubscribe leaves (and forgets) it.
            if not listener.waits_on(channel, async_waiter_key()):
                await self._forget(channel)
            raise

    async def wait(
        self, channel: str, seconds: float, patience: float | None = None
    ) -> bool | str:
        """Sleep until woken on ``channel`` (True or a message's payload) or ``seconds``
        pass (False); see
        `AsyncListener.wait()`."""
        listener = self._by_channel[channel]
        if listener.lost(channel) and await self._move(channel, listener):
            return True
        return await listener.wait(channel, seconds, patience)

    async def unsubscribe(self, channel: str, pass_on: bool, lease: float | None = None) -> None:
        """The caller stops waiting on ``channel``. Nothing to do if it has no ticket there:
        its subscribe failed (and cleaned up after itself) and the flow, which cannot tell
        that from an interrupt landing once the subscription was made, leaves anyway."""
        listener = self._by_channel.get(channel)
        key = async_waiter_key()
        counted = listener.waits_on(channel, key) if listener is not None else 0
        if listener is None or not counted:
            return
        try:
            await listener.unsubscribe(channel, pass_on, lease)
        finally:
            # Interrupted before its ticket left, the caller keeps its reference: the
            # flow's next Unsubscribe (see tenure.core.waiting.leaving) finds both.
            if listener.waits_on(channel, key) < counted:
                await self._forget(channel)

    async def _forget(self, channel: str) -> None:
        # A clean-up as well (see AsyncListener.unsubscribe): an interrupt waits for it.
        async with AsyncSteady(self._mutex) as steady:
            refs = self._refs.get(channel, 0) - 1
            if refs > 0:
                self._refs[channel] = refs
            else:
                self._refs.pop(channel, None)
                self._by_channel.pop(channel, None)
                self._sharded.pop(channel, None)
            steady.rethrow()

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
            entry = await old.evict(channel)
            if entry is not None and entry.tickets:
                await new.adopt(channel, entry)
            self._by_channel[channel] = new
            if old.idle():
                for name, listener in list(self._by_node.items()):
                    if listener is old:
                        del self._by_node[name]
                await old.close()
            return True

    async def drain(self, channel: str) -> None:
        """Read what the connection subscribed to ``channel`` has received, unless one of
        its waiters reads it now (`tenure.core.effects.Drain`)."""
        for listener in list(self._by_node.values()):
            if listener.hears(channel):
                await listener.drain()

    def hears(self, channel: str) -> bool:
        """True if one of this client's pub/sub connections is subscribed to ``channel``
        now (`AsyncListener.hears()`)."""
        return any(listener.hears(channel) for listener in list(self._by_node.values()))

    async def close(self) -> None:
        """Stop every reader and wake every waiter (they raise BackendError)."""
        async with self._mutex:
            self._closed = True
            listeners = list(self._by_node.values())
            self._by_node.clear()
        for listener in listeners:
            await listener.close()
