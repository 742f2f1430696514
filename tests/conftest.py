"""Fixtures for every folder: one real server per kind for the session, a clean database and
clients per test (sync ``client``/``make_client``, asyncio ``async_client``/``async_make_client``:
the names ``tools/unasync.py`` turns one into the other), and sets of independent servers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis

import tenure
from support.servers import Server, binaries, start_servers, stop_servers

KINDS = binaries()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The signal tests (test_*interrupt*.py, test_signal*.py) run under pytest-timeout's
    thread method. Its default, the signal method, is one SIGALRM timer: these tests put
    their own SIGALRM handler in its place (which takes its one alarm: a retried clean-up
    then blocks on) or set and cancel the process's one ITIMER_REAL, and a wait no handler
    can cut short (a thread waiting to take back a mutex held elsewhere) never lets it run.
    The thread method's own thread dumps every thread's stack at the timeout and ends the
    run: a hang is bounded whatever the test did with signals."""
    for item in items:
        name = item.path.name
        if "interrupt" in name or name.startswith("test_signal"):
            marker = item.get_closest_marker("timeout")
            seconds = marker.args[0] if marker is not None and marker.args else None
            if marker is not None and seconds is None:
                seconds = marker.kwargs.get("timeout")
            item.add_marker(pytest.mark.timeout(seconds, method="thread"), append=False)


@pytest.fixture(scope="session", params=[k for k, _ in KINDS])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    binary = dict(KINDS)[request.param]
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(f"{request.param}-server is required in CI")
        pytest.skip(f"{request.param}-server not installed")
    srv = Server(binary).start()
    yield srv
    srv.stop()


@pytest.fixture
def r(server: Server) -> Iterator[redis.Redis]:
    conn = server.client()
    conn.flushall()
    yield conn
    conn.close()


@pytest.fixture
def make_client(server: Server, r: redis.Redis) -> Iterator[Callable[..., tenure.Client]]:
    """Factory of tenure clients on the session server, closed at the end of the test."""
    made: list[tenure.Client] = []

    def make(**kwargs: Any) -> tenure.Client:
        c = tenure.Client(server.url, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def client(make_client: Callable[..., tenure.Client]) -> tenure.Client:
    return make_client()


@pytest.fixture
async def async_make_client(
    server: Server, r: redis.Redis
) -> AsyncIterator[Callable[..., tenure.AsyncClient]]:
    """Factory of asyncio tenure clients on the session server, closed at the end."""
    made: list[tenure.AsyncClient] = []

    def make(**kwargs: Any) -> tenure.AsyncClient:
        c = tenure.AsyncClient(server.url, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        await c.close()


@pytest.fixture
async def async_client(
    async_make_client: Callable[..., tenure.AsyncClient],
) -> tenure.AsyncClient:
    return async_make_client()


@pytest.fixture(scope="module")
def three() -> Iterator[list[Server]]:
    """Three independent valkey servers (MultiLock members on different servers)."""
    servers = start_servers(3)
    yield servers
    stop_servers(servers)


@pytest.fixture(scope="module")
def five() -> Iterator[list[Server]]:
    """Five independent valkey servers (RedLock nodes)."""
    servers = start_servers(5)
    yield servers
    stop_servers(servers)


@pytest.fixture
def nodes(five: list[Server]) -> Iterator[list[Server]]:
    """The five servers, each running (restarted if a test killed it) and flushed; resumed
    after the test if it paused one."""
    for s in five:
        if s.proc is None or s.proc.poll() is not None:
            s.start()
        with s.client() as raw:
            raw.flushall()
    yield five
    for s in five:
        if s.proc is not None and s.proc.poll() is None:
            s.resume()
