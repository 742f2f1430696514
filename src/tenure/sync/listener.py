"""One pub/sub connection per client, shared by every waiting thread.

Waiters count themselves on a channel (SUBSCRIBE on the first, UNSUBSCRIBE after the last);
a reader thread dispatches messages. An unlock message wakes one waiter of this client (a
``wake_all`` payload wakes all): the others stay asleep instead of racing for the lock. A
waiter that leaves without using its wake-up passes it on. After a reconnect every channel is
subscribed again and every waiter woken, since messages may have been missed meanwhile.
A waiting thread holds no pooled connection.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

import redis

from tenure.errors import BackendError

log = logging.getLogger("tenure")

HEALTH_INTERVAL = 30.0
"""Seconds of silence after which the reader PINGs the server to notice a dead connection."""


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def listener_kwargs(pool_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Connection arguments of the pub/sub connection, from those of the client's pool.

    RESP2, so messages arrive as plain replies (RESP3 routes them to push handlers), and
    without redis-py's maintenance notifications, which need RESP3 (or hiredis).
    """
    kwargs = {k: v for k, v in pool_kwargs.items() if not k.startswith("maint_notifications")}
    kwargs.update(health_check_interval=0, protocol=2)
    return kwargs


@dataclass(eq=False)
class _Channel:
    cond: threading.Condition
    wake_all: frozenset[str]
    refs: int = 0
    permits: int = 0
    confirmed: bool = False


class Listener:
    """The shared subscription of one :class:`tenure.Client`."""

    def __init__(self, client: redis.Redis, timeout: float | None) -> None:
        pool = client.connection_pool
        self._conn = pool.connection_class(**listener_kwargs(pool.connection_kwargs))
        self._timeout = timeout if timeout is not None else 5.0
        self._mutex = threading.Lock()
        self._channels: dict[str, _Channel] = {}
        self._connected = False
        self._closed = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------- waiters
    def subscribe(self, channel: str, wake_all: frozenset[str]) -> None:
        """Count the caller on ``channel``; return once the server confirmed the subscription."""
        with self._mutex:
            if self._closed:
                raise BackendError("the client is closed")
            entry = self._channels.get(channel)
            if entry is None:
                entry = _Channel(threading.Condition(self._mutex), wake_all)
                self._channels[channel] = entry
                if self._connected:
                    self._send("SUBSCRIBE", channel)
            entry.refs += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tenure-listener", daemon=True
                )
                self._thread.start()
            if not entry.cond.wait_for(lambda: entry.confirmed or self._closed, self._timeout):
                self._leave(channel, entry, pass_on=False)
                raise BackendError(f"no confirmation of SUBSCRIBE {channel} in {self._timeout} s")

    def wait(self, channel: str, seconds: float) -> bool:
        """Sleep until woken on ``channel`` (True) or ``seconds`` pass (False)."""
        with self._mutex:
            entry = self._channels[channel]
            timeout = None if math.isinf(seconds) else seconds
            entry.cond.wait_for(lambda: entry.permits > 0 or self._closed, timeout)
            if self._closed:
                raise BackendError("the client is closed")
            if entry.permits > 0:
                entry.permits -= 1
                return True
            return False

    def unsubscribe(self, channel: str, pass_on: bool) -> None:
        """The caller stops waiting on ``channel``."""
        with self._mutex:
            entry = self._channels.get(channel)
            if entry is not None:
                self._leave(channel, entry, pass_on)

    def _leave(self, channel: str, entry: _Channel, pass_on: bool) -> None:
        entry.refs -= 1
        if entry.refs == 0:
            del self._channels[channel]
            if self._connected:
                self._send("UNSUBSCRIBE", channel)
            return
        entry.permits = min(entry.permits + pass_on, entry.refs)
        if pass_on:
            entry.cond.notify_all()

    def _send(self, *args: str) -> None:
        # Under the mutex, so the server sees SUBSCRIBE/UNSUBSCRIBE in the order the
        # channel table changed. A failure is the reader's to repair: it reconnects and
        # subscribes every channel in the table again.
        try:
            self._conn.send_command(*args)
        except (redis.RedisError, OSError) as error:
            log.debug("pub/sub send failed: %s", error)

    # --------------------------------------------------------------- reader
    def _run(self) -> None:
        delay = 0.05
        while not self._closed:
            try:
                self._conn.connect()
                with self._mutex:
                    self._connected = True
                    if self._channels:
                        self._send("SUBSCRIBE", *self._channels)
                delay = 0.05
                self._read()
            except Exception as error:  # a socket closed under a read fails in many ways
                if self._closed:
                    break
                log.warning("tenure pub/sub connection lost (%s); reconnecting", error)
            with self._mutex:
                self._connected = False
                for entry in self._channels.values():
                    entry.permits = entry.refs
                    entry.cond.notify_all()
            self._conn.disconnect()
            self._stopped.wait(delay)
            delay = min(delay * 2, 1.0)

    def _read(self) -> None:
        pinged = False
        while not self._closed:
            if not self._conn.can_read(timeout=self._timeout if pinged else HEALTH_INTERVAL):
                if pinged:
                    raise redis.ConnectionError("no answer to PING on the pub/sub connection")
                with self._mutex:
                    self._send("PING")
                pinged = True
                continue
            pinged = False
            self._dispatch(self._conn.read_response())

    def _dispatch(self, reply: Any) -> None:
        if not isinstance(reply, list) or len(reply) < 3:
            return
        kind, channel = text(reply[0]), text(reply[1])
        with self._mutex:
            entry = self._channels.get(channel)
            if entry is None:
                return
            if kind in ("message", "smessage"):
                if text(reply[2]) in entry.wake_all:
                    entry.permits = entry.refs
                else:
                    entry.permits = min(entry.permits + 1, entry.refs)
                # notify_all: the condition is shared with subscribe confirmations, and the
                # permit count (not the notify) decides how many waiters proceed.
                entry.cond.notify_all()
            elif kind in ("subscribe", "ssubscribe") and not entry.confirmed:
                entry.confirmed = True
                entry.cond.notify_all()

    def close(self) -> None:
        """Stop the reader and wake every waiter (they raise BackendError)."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            for entry in self._channels.values():
                entry.cond.notify_all()
            if self._connected:
                # The reply wakes the reader, which sees _closed and stops. Closing the socket
                # under it is not enough: a poll() that starts on a just-closed socket
                # ignores it and sleeps for its whole timeout.
                self._send("PING")
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._timeout)
        self._conn.disconnect()
