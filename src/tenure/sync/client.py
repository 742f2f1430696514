"""``tenure.Client``: the sync entry point, and the driver that runs core flows."""

from __future__ import annotations

import logging
import threading
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tenure.core.composite import DEFAULT_NODE_TIMEOUT
from tenure.core.effects import Call, Command, Effect, Flow, Subscribe, Unsubscribe, Wait
from tenure.core.fair import FairLockCore
from tenure.core.fenced import FencedLockCore
from tenure.core.holds import OnLost
from tenure.core.lock import LockCore
from tenure.core.options import backend_error, check_timeouts, make_context, resolve_redis
from tenure.core.watchdog import renew
from tenure.sync.backend import Backend
from tenure.sync.composite import MultiLock, RedLock
from tenure.sync.fair import FairLock
from tenure.sync.fenced import FencedLock
from tenure.sync.listener import Listener
from tenure.sync.lock import Lock
from tenure.sync.rwlock import ReadWriteLock

T = TypeVar("T")
log = logging.getLogger("tenure")


class Client:
    """Entry point of the sync API: makes lock objects bound to one Redis/Valkey deployment.

    Args:
        url_or_redis: a ``redis://`` / ``rediss://`` / ``unix://`` URL, or a ``redis.Redis``
            whose connection pool tenure borrows (its own timeouts then apply).
        watchdog_timeout: lease in seconds of holds taken without ``lease_time``; the
            watchdog renews them every ``watchdog_timeout / 3`` seconds. Default 30.
        name_prefix: prepended to every lock name on the wire.
        socket_timeout: seconds any one command may take (URL clients only). Default 5.
        socket_connect_timeout: seconds to connect (URL clients only). Default 5.
        wait_for_replicas: after each lock change, wait for this many replicas to
            acknowledge it (0: don't wait).
        replica_timeout: seconds to wait for those replicas.

    One client serves any number of threads. It holds one pub/sub connection shared by all
    waiting threads and one watchdog thread, both started on first use. Each thread is a
    separate owner. After ``os.fork()`` the child is a new owner with no holds.

    Raises:
        TypeError, ValueError: for a bad argument, before any I/O.
    """

    def __init__(
        self,
        url_or_redis: str | redis.Redis,
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
        self.redis: redis.Redis
        self.redis, self._owns_redis, self._timeout = resolve_redis(
            url_or_redis,
            redis.Redis,
            redis.BlockingConnectionPool,
            Retry(NoBackoff(), 0),
            socket_timeout,
            socket_connect_timeout,
        )
        self._backend = Backend(self.redis, self._ctx)
        self._listener = Listener(self.redis, self._timeout)
        self._watchdog = _Watchdog(self)
        self._closed = False

    @property
    def client_id(self) -> str:
        """This client's uuid, the first part of every owner field it writes."""
        return self._ctx.identity.client_id

    @property
    def watchdog_timeout(self) -> float:
        return self._ctx.watchdog_timeout

    def lock(self, name: str, *, on_lost: OnLost | None = None) -> Lock:
        """A reentrant :class:`tenure.Lock` named ``name`` (Redisson ``getLock``).

        ``on_lost(lock)`` is called from the watchdog thread (or the releasing thread) when
        a hold of this lock is found lost. Raises TypeError/ValueError for a bad name.
        """
        return Lock(self, LockCore(self._ctx, name, on_lost))

    def fenced_lock(self, name: str, *, on_lost: OnLost | None = None) -> FencedLock:
        """A :class:`tenure.FencedLock` named ``name`` (Redisson ``getFencedLock``).

        Arguments and errors as :meth:`lock`.
        """
        return FencedLock(self, FencedLockCore(self._ctx, name, on_lost))

    def multi_lock(self, *locks: Lock, on_lost: OnLost | None = None) -> MultiLock:
        """A :class:`tenure.MultiLock` over ``locks`` (Redisson ``getMultiLock``).

        Members may come from any clients. Raises ValueError with no member, TypeError for a
        member that is not a sync lock object.
        """
        return MultiLock(locks, on_lost=on_lost)

    def red_lock(
        self,
        *locks: Lock,
        node_timeout: float = DEFAULT_NODE_TIMEOUT,
        on_lost: OnLost | None = None,
    ) -> RedLock:
        """A :class:`tenure.RedLock` over ``locks``, each on an independent master.

        ``node_timeout``: seconds to wait for each member's answer in an attempt (default
        0.1; keep it small next to the lease). Raises ValueError with no member or a bad
        ``node_timeout``, TypeError for a member that is not a sync lock object.
        """
        return RedLock(locks, node_timeout=node_timeout, on_lost=on_lost)

    def fair_lock(self, name: str, *, on_lost: OnLost | None = None) -> FairLock:
        """A reentrant lock granted in request order: :class:`tenure.FairLock` named ``name``
        (Redisson ``getFairLock``). ``on_lost`` as for :meth:`lock`.

        Raises TypeError/ValueError for a bad name or ``on_lost``.
        """
        return FairLock(self, FairLockCore(self._ctx, name, on_lost))

    def read_write_lock(self, name: str, *, on_lost: OnLost | None = None) -> ReadWriteLock:
        """Many readers or one writer: :class:`tenure.ReadWriteLock` named ``name`` (Redisson
        ``getReadWriteLock``); ``.read_lock()`` / ``.write_lock()`` are its lock objects.
        ``on_lost(side)`` as for :meth:`lock`, called with the side whose hold was lost.

        Raises TypeError/ValueError for a bad name or ``on_lost``.
        """
        return ReadWriteLock(self, name, on_lost)

    # -------------------------------------------------------------- driver
    def _owner(self) -> str:
        if self._ctx.forked():
            # The parent's threads and sockets are not ours: start over without closing them.
            self._listener = Listener(self.redis, self._timeout)
            self._watchdog = _Watchdog(self)
        return self._ctx.identity.thread_owner()

    def _run(self, flow: Flow[T]) -> T:
        """Drive ``flow`` to its end, performing each effect it yields."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration as stop:
                result: T = stop.value
                return result
            try:
                value, error = self._perform(effect), None
            except redis.RedisError as failure:
                value, error = None, backend_error(failure)
            except BaseException as failure:
                value, error = None, failure

    def _perform(self, effect: Effect) -> Any:
        match effect:
            case Call():
                return self._backend.call(effect)
            case Command(args=args):
                return self._backend.execute(*args)
            case Subscribe(channel=channel, wake_all=wake_all):
                return self._listener.subscribe(channel, wake_all)
            case Unsubscribe(channel=channel, pass_on=pass_on):
                return self._listener.unsubscribe(channel, pass_on)
            case Wait(channel=channel, seconds=seconds):
                return self._listener.wait(channel, seconds)
        raise TypeError(f"unknown effect {effect!r}")

    def _watch(self) -> None:
        """Make sure the watchdog runs (after a hold without lease_time was granted)."""
        self._watchdog.start()

    # ------------------------------------------------------------- closing
    def close(self) -> None:
        """Stop the watchdog and the listener. Holds are not released: they expire.

        Waiting threads wake with BackendError. Closes the connection pool when the client
        was made from a URL.
        """
        if self._closed:
            return
        self._closed = True
        self._watchdog.stop()
        self._listener.close()
        if self._owns_redis:
            self.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Watchdog:
    """The client's one renewal thread: renews every watchdog hold each timeout / 3."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    def start(self) -> None:
        if self._thread is not None:
            return
        with self._mutex:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="tenure-watchdog", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        client = self._client
        interval = client._ctx.watchdog_timeout / 3
        while not self._stop.wait(interval):
            try:
                lost = client._run(renew(client._ctx))
            except Exception:  # never let the renewal thread die
                log.exception("tenure watchdog pass failed")
                continue
            for hold in lost:
                hold.lock.hold_lost(hold.owner)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
