"""``tenure elect``: campaign and hold, run a command while leading, observe. The real entry
point in subprocesses."""

from __future__ import annotations

import json
import signal
import sys
import time

import pytest

from support.twins import wait_until
from tenure.core.election import election_keys

from .runner import ended_after, reaped, tenure_cmd, tenure_popen

LEADER, TERM, QUEUE, _, _, _ = election_keys("sched")
SHOW = "import os; print(os.environ['TENURE_ELECTION_TERM'], os.environ['TENURE_ELECTION_VALUE'])"


def stop(proc, sig: int = signal.SIGINT, timeout: float = 30) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(sig)
    with reaped(proc):
        return proc.communicate(timeout=timeout)


def test_elect_runs_the_command_while_leading(server, r):
    done = tenure_cmd(
        "elect", "sched", "--value", "host-a", "--", sys.executable, "-c", SHOW, url=server.url
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 host-a\n"
    assert not r.exists(LEADER)  # resigned when the command exited
    again = tenure_cmd(
        "elect", "--value=host-b", "sched", "--", sys.executable, "-c", SHOW, url=server.url
    )
    assert again.stdout == "2 host-b\n"
    status = tenure_cmd(
        "elect", "sched", "--", sys.executable, "-c", "raise SystemExit(3)", url=server.url
    )
    assert status.returncode == 3


def test_elect_holds_until_interrupted_then_steps_down(server, r):
    proc = tenure_popen("elect", "sched", "--value", "host-a", "--json", url=server.url)
    with reaped(proc):
        assert wait_until(lambda: r.hget(LEADER, "value") == b"host-a", timeout=30)
        waiting = tenure_cmd("elect", "--timeout", "0.3", "sched", url=server.url)
        assert waiting.returncode == 75
        assert "host-a" in waiting.stderr
        out, err = stop(proc)
    assert proc.returncode == 0, err
    data = json.loads(out.splitlines()[0])
    assert data["name"] == "sched"
    assert data["leader"]["value"] == "host-a"
    assert data["leader"]["term"] == 1
    assert not r.exists(LEADER)


def test_elect_waits_its_turn_and_hands_over_on_exit(server, r):
    first = tenure_popen("elect", "sched", "--value", "a", url=server.url)
    with reaped(first):
        assert wait_until(lambda: r.exists(LEADER), timeout=30)
        second = tenure_popen(
            "elect", "sched", "--value", "b", "--", sys.executable, "-c", SHOW, url=server.url
        )
        with reaped(second):
            assert wait_until(lambda: r.llen(QUEUE) == 1, timeout=30)
            out, _ = stop(first, signal.SIGTERM)
            assert first.returncode == 0
            assert out.startswith("sched: a (term 1")
            out, err = second.communicate(timeout=30)
            assert second.returncode == 0, err
            assert out == "2 b\n"


def test_lost_leadership_terminates_the_command(server, r, tmp_path):
    pid_file = tmp_path / "pid"
    proc = tenure_popen(
        "elect",
        "--watchdog-timeout",
        "1.5",
        "sched",
        "--",
        sys.executable,
        "-c",
        "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)",
        str(pid_file),
        url=server.url,
    )
    with reaped(proc):
        assert wait_until(lambda: r.exists(LEADER) and pid_file.exists(), timeout=30)
        assert wait_until(lambda: pid_file.read_text() != "", timeout=30)
        time.sleep(0.3)
        elapsed = ended_after(int(pid_file.read_text()), lambda: r.delete(LEADER))
        _, err = proc.communicate(timeout=30)
    print(f"loss -> the command ended after {elapsed:.3f} s")
    assert proc.returncode == 1
    assert "leadership was lost" in err
    assert elapsed < 2 * 1.5 / 3 + 0.5, elapsed


@pytest.mark.parametrize("as_json", [False, True])
def test_observe_prints_each_change(server, r, make_client, as_json):
    proc = tenure_popen(
        "elect", "--observe", "sched", *(["--json"] if as_json else []), url=server.url
    )
    with reaped(proc):
        c = make_client()
        election = c.election("sched")
        time.sleep(1.0)
        election.campaign("host-a")
        time.sleep(0.5)
        election.proclaim("host-a2")
        time.sleep(0.5)
        election.resign()
        time.sleep(0.5)
        out, err = stop(proc)
    got = out.splitlines()
    assert len(got) == 4, (got, err)
    if as_json:
        items = [json.loads(line) for line in got]
        assert [i["leader"] and (i["leader"]["value"], i["leader"]["term"]) for i in items] == [
            None,
            ("host-a", 1),
            ("host-a2", 1),
            None,
        ]
    else:
        assert got[0] == "sched: vacant"
        assert got[3] == "sched: vacant"
        assert got[1].startswith("sched: host-a (term 1")
        assert "host-a2 (term 1" in got[2]


@pytest.mark.parametrize(
    "args",
    [
        ("--observe", "sched", "--", "true"),
        ("--observe", "--value", "x", "sched"),
        ("sched", "extra"),
        ("--vlaue", "x", "sched"),
        ("--grace", "-1", "sched", "--", "true"),
    ],
)
def test_usage_errors_exit_2(server, r, args):
    done = tenure_cmd("elect", *args, url=server.url)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert r.dbsize() == 0
