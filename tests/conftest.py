"""Fixtures: one real server per kind for the session, a clean database and clients per test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

import tenure
from servers import Server, binaries

KINDS = binaries()


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
def make_client(server: Server, r: redis.Redis) -> Iterator[object]:
    """Factory of tenure clients on the session server, closed at the end of the test."""
    made: list[tenure.Client] = []

    def make(**kwargs: object) -> tenure.Client:
        c = tenure.Client(server.url, **kwargs)  # type: ignore[arg-type]
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def client(make_client: object) -> tenure.Client:
    return make_client()  # type: ignore[operator,no-any-return]
