# GENERATED from src/tenure/aio/listener.py by tools/unasync.py: edit that file, not this one.
"""One pub/sub connection per client, shared by every waiting thread or task.

The rules (who is subscribed, whom a message wakes, passing a wake-up on, waking all after a
reconnect) are :mod:`tenure.core.parking`'s; this module owns the socket, the mutex and one
condition per channel, and a reader (a thread, or a task) that dispatches replies. A waiter
holds no pooled connection.
"""

from __future__ import annotations

import logging

from tenure._concurrency import (
    Condition,
    Event,
    Mutex,
    Spawner,
    Task,
)
from tenure._redis import Redis, RedisError, read_push, listener_connection, text
from tenure.core.parking import Parked, Parking
from tenure.errors import BackendError

log = logging.getLogger("tenure")

HEALTH_INTERVAL = 30.0
"""Seconds of silence after which the reader PINGs the server to notice a dead connection."""


class Listener:
    """The shared subscription of one client."""

    def __init__(self, client: Redis, timeout: float | None) -> None:
        self._conn = listener_connection(client)
        self._timeout = timeout if timeout is not None else 5.0
        self._mutex = Mutex()
        self._parking = Parking()
        self._connected = False
        self._closed = False
        self._stopping = Event()
        self._spawner = Spawner("tenure-listener")
        self._reader: Task | None = None

    def _condition(self) -> Condition:
        return Condition(self._mutex)

    # ------------------------------------------------------------- waiters
    def subscribe(self, channel: str, wake_all: frozenset[str]) -> None:
        """Count the caller on ``channel``; return once the server confirmed the subscription."""
        with self._mutex:
            if self._closed:
                raise BackendError("the client is closed")
            entry, first = self._parking.join(channel, wake_all, self._condition)
            if first and self._connected:
                self._parking.subscribing([channel])
                self._send("SUBSCRIBE", channel)
            if self._reader is None:
                self._reader = self._spawner.spawn(self._run)
            try:
                confirmed = entry.cond.wait_for(
                    lambda: entry.confirmed or self._closed, self._timeout
                )
            except BaseException:
                self._leave(channel, pass_on=False)
                raise
            if not confirmed:
                self._leave(channel, pass_on=False)
                raise BackendError(f"no confirmation of SUBSCRIBE {channel} in {self._timeout} s")

    def wait(self, channel: str, seconds: float) -> bool:
        """Sleep until woken on ``channel`` (True) or ``seconds`` pass (False)."""
        with self._mutex:
            entry = self._parking.channels[channel]
            entry.cond.wait_for(lambda: entry.permits > 0 or self._closed, seconds)
            if self._closed:
                raise BackendError("the client is closed")
            return self._parking.take(entry)

    def unsubscribe(self, channel: str, pass_on: bool) -> None:
        """The caller stops waiting on ``channel``."""
        with self._mutex:
            self._leave(channel, pass_on)

    def _leave(self, channel: str, pass_on: bool) -> None:
        entry, last = self._parking.leave(channel, pass_on)
        if last and self._connected:
            self._send("UNSUBSCRIBE", channel)
        if entry is not None:
            entry.cond.notify_all()

    def _send(self, *args: str) -> None:
        # Under the mutex, so the server sees SUBSCRIBE/UNSUBSCRIBE in the order the
        # channel table changed. A failure is the reader's to repair: it reconnects and
        # subscribes every channel in the table again.
        try:
            self._conn.send_command(*args)
        except (RedisError, OSError) as error:
            log.debug("pub/sub send failed: %s", error)

    # --------------------------------------------------------------- reader
    def _run(self) -> None:
        delay = 0.05
        while not self._closed:
            try:
                self._conn.connect()
                with self._mutex:
                    self._connected = True
                    if self._parking.channels:
                        self._parking.subscribing(self._parking.channels)
                        self._send("SUBSCRIBE", *self._parking.channels)
                delay = 0.05
                self._read()
            except Exception as error:  # a socket closed under a read fails in many ways
                if self._closed:
                    break
                log.warning("tenure pub/sub connection lost (%s); reconnecting", error)
            with self._mutex:
                self._connected = False
                for entry in self._parking.disconnected():
                    entry.cond.notify_all()
            self._conn.disconnect()
            self._stopping.wait(delay)
            delay = min(delay * 2, 1.0)

    def _read(self) -> None:
        pinged = False
        while not self._closed:
            reply = read_push(
                self._conn, self._timeout if pinged else HEALTH_INTERVAL
            )
            if reply is None:  # nothing within the timeout
                if pinged:
                    raise ConnectionError("no answer to PING on the pub/sub connection")
                with self._mutex:
                    self._send("PING")
                pinged = True
                continue
            pinged = False
            if isinstance(reply, list) and len(reply) >= 3:
                self._dispatch(text(reply[0]), text(reply[1]), text(reply[2]))

    def _dispatch(self, kind: str, channel: str, payload: str) -> None:
        with self._mutex:
            entry: Parked | None = self._parking.received(kind, channel, payload)
            if entry is not None:
                # notify_all: the condition is shared with subscribe confirmations, and the
                # permit count (not the notify) decides how many waiters proceed.
                entry.cond.notify_all()

    def close(self) -> None:
        """Stop the reader and wake every waiter (they raise BackendError)."""
        with self._mutex:
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
                self._send("PING")
        if self._reader is not None:
            self._reader.stop(self._timeout)
        self._conn.disconnect()
