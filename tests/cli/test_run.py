"""``tenure run NAME -- CMD``: exclusion across processes, fencing tokens, exit statuses, the
child terminated on loss, signals forwarded. The real entry point in subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import ExitStack, closing
from pathlib import Path

import pytest
from redis.client import PubSub

from support.twins import wait_until
from support.wire import overlaps
from tenure import keys

from .runner import ended_after, reaped, stderr, tenure_cmd, tenure_popen

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    log = sys.argv[1]
    mode = sys.argv[2]

    def write(text):
        with open(log, "a") as f:
            f.write(text + "\\n")

    if mode == "span":  # one critical section: record when it ran
        start = time.monotonic()
        time.sleep(0.2)
        write(f"span {start} {time.monotonic()}")
    elif mode == "env":
        write(f"env {os.environ['TENURE_LOCK_NAME']} {os.environ.get('TENURE_FENCING_TOKEN')}")
    elif mode == "exit":
        sys.exit(int(sys.argv[3]))
    elif mode == "killself":
        os.kill(os.getpid(), signal.SIGKILL)
    else:  # run until told: 'polite' exits on SIGTERM, 'stubborn' ignores it
        def on_term(signum, frame):
            write("term")
            sys.exit(42)

        signal.signal(signal.SIGUSR1, lambda s, f: write("usr1"))
        signal.signal(signal.SIGINT, lambda s, f: write("int"))
        if mode == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, on_term)
        write(f"ready {os.getpid()}")
        while True:
            time.sleep(0.05)
    """
)


@pytest.fixture
def child(tmp_path: Path) -> tuple[Path, Path]:
    """(the child program, the log it appends to)."""
    program = tmp_path / "child.py"
    program.write_text(CHILD)
    return program, tmp_path / "log"


def lines(log: Path, word: str) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split()[1:] for line in log.read_text().splitlines() if line.startswith(word)]


def cmd(child: tuple[Path, Path], mode: str, *extra: str) -> list[str]:
    program, log = child
    return [sys.executable, str(program), str(log), mode, *extra]


def test_two_runs_of_one_name_never_overlap(server, r, child):
    with ExitStack() as stack:
        procs = [
            stack.enter_context(
                reaped(tenure_popen("run", "job", "--", *cmd(child, "span"), url=server.url))
            )
            for _ in range(4)
        ]
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    spans = [(float(a), float(b)) for a, b in lines(child[1], "span")]
    assert len(spans) == 4
    assert overlaps(spans) == 0, spans
    assert not r.exists("job")  # released after each child


def test_fencing_token_passed_and_increasing(server, r, child):
    for _ in range(3):
        done = tenure_cmd("run", "ledger", "--fenced", "--", *cmd(child, "env"), url=server.url)
        assert done.returncode == 0, done.stderr
    seen = lines(child[1], "env")
    assert [name for name, _ in seen] == ["ledger"] * 3
    tokens = [int(token) for _, token in seen]
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 3


def test_persistence_warning_can_be_acknowledged(server, r, child):
    """The test server persists nothing: each fenced run warns once, until the operator
    acknowledges it (TENURE_ACCEPT_NO_PERSISTENCE=1, e.g. in a crontab); then it is silent."""
    warned = tenure_cmd("run", "ack", "--fenced", "--", *cmd(child, "env"), url=server.url)
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.count("persists nothing") == 1, warned.stderr
    assert "TENURE_ACCEPT_NO_PERSISTENCE=1" in warned.stderr
    quiet = tenure_cmd(
        "run",
        "ack",
        "--fenced",
        "--",
        *cmd(child, "env"),
        url=server.url,
        extra_env={"TENURE_ACCEPT_NO_PERSISTENCE": "1"},
    )
    assert quiet.returncode == 0, quiet.stderr
    assert "persists nothing" not in quiet.stderr, quiet.stderr


def test_lock_name_without_token_when_not_fenced(server, r, child):
    done = tenure_cmd("run", "plain", "--", *cmd(child, "env"), url=server.url)
    assert done.returncode == 0
    assert lines(child[1], "env") == [["plain", "None"]]


def test_exit_statuses(server, r, make_client, child):
    assert tenure_cmd("run", "e", "--", *cmd(child, "exit", "3"), url=server.url).returncode == 3
    killed = tenure_cmd("run", "e", "--", *cmd(child, "killself"), url=server.url)
    assert killed.returncode == 128 + signal.SIGKILL
    holder = make_client()
    assert holder.lock("busy").acquire(lease_time=60)
    waited = tenure_cmd("run", "busy", "--timeout", "0.3", "--", "true", url=server.url)
    assert waited.returncode == 75
    assert holder.client_id in waited.stderr
    down = tenure_cmd("run", "e", "--", "true", url="redis://127.0.0.1:1/0")
    assert down.returncode == 1
    assert "Traceback" not in down.stderr
    assert len(down.stderr.strip().splitlines()) == 1
    missing = tenure_cmd("run", "e", "--", "/nonexistent/cmd", url=server.url)
    assert missing.returncode == 127
    assert not r.exists("e")


@pytest.mark.parametrize("how", ["delete", "force-release"])
def test_loss_terminates_the_child_within_two_renewal_periods(server, r, child, how):
    watchdog = 3.0  # renewal every 1 s
    proc = tenure_popen(
        "run",
        "lossy",
        "--watchdog-timeout",
        str(watchdog),
        "--",
        *cmd(child, "polite"),
        url=server.url,
    )
    with ExitStack() as stack:
        stack.enter_context(reaped(proc))
        unlocks = stack.enter_context(closing(r.pubsub()))
        forced: list[subprocess.Popen[str]] = []

        def lose() -> None:
            if how == "delete":
                assert r.delete("lossy") == 1
                return
            # The force-release script publishes the unlock as it deletes the hold: the loss
            # is counted from that message, not from the CLI's end (a Python start-up later,
            # by when the command has often ended already). A pattern: not counted among the
            # channel's listeners, so it changes nothing.
            unlocks.psubscribe(keys.lock_channel("lossy"))
            assert unlocks.get_message(timeout=5) is not None  # the subscription confirmed
            forcing = tenure_popen("force-release", "lossy", "--yes", url=server.url)
            forced.append(stack.enter_context(reaped(forcing)))
            assert unlocked(unlocks, 30), "no unlock published"

        assert wait_until(lambda: lines(child[1], "ready"), timeout=30)
        (pid,) = lines(child[1], "ready")[0]
        elapsed = ended_after(int(pid), lose)
        proc.wait(timeout=30)
        err = stderr(proc)
        for forcing in forced:
            assert forcing.wait(timeout=30) == 0
    print(f"loss ({how}) -> the command ended after {elapsed:.3f} s")
    assert proc.returncode == 1
    assert "lost" in err
    assert lines(child[1], "term") == [[]]  # the child got SIGTERM
    # The next renewal pass finds the hold gone (one period, plus a round trip) and the
    # command is terminated at once (docs/stopping-work.md, "Failure timeline").
    assert elapsed < 2 * watchdog / 3, elapsed


def unlocked(messages: PubSub, timeout: float) -> bool:
    """True as an unlock comes on the lock channel ``messages`` is psubscribed to (the
    renewals published there, ``-<lease ms>``, skipped); False after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        message = messages.get_message(timeout=left)
        if message is not None and message["type"] == "pmessage":
            payload, channel = message["data"].decode(), message["channel"].decode()
            if keys.renewed_lease(payload, channel) is None:
                return True
    return False


def test_child_ignoring_sigterm_is_killed_after_grace(server, r, child):
    proc = tenure_popen(
        "run",
        "stub",
        "--lease",
        "1",
        "--grace",
        "0.5",
        "--",
        *cmd(child, "stubborn"),
        url=server.url,
    )
    with reaped(proc):
        assert wait_until(lambda: lines(child[1], "ready"), timeout=30)
        (pid,) = lines(child[1], "ready")[0]
        proc.wait(timeout=30)
        err = stderr(proc)
    assert proc.returncode == 1
    assert "lease" in err
    assert "SIGKILL" in err
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)


def test_signals_are_forwarded(server, r, child):
    proc = tenure_popen("run", "sig", "--", *cmd(child, "polite"), url=server.url)
    with reaped(proc):
        assert wait_until(lambda: lines(child[1], "ready"), timeout=30)
        proc.send_signal(signal.SIGUSR1)
        assert wait_until(lambda: lines(child[1], "usr1"), timeout=10)
        proc.send_signal(signal.SIGINT)
        assert wait_until(lambda: lines(child[1], "int"), timeout=10)
        assert r.exists("sig")  # still held while the child runs
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 42  # the child's own status
    assert lines(child[1], "term") == [[]]
    assert not r.exists("sig")  # released when the child exited


def test_sigterm_while_waiting_leaves_nothing_behind(server, r, make_client):
    holder = make_client()
    assert holder.lock("w").acquire(lease_time=60)
    proc = tenure_popen("run", "w", "--", "true", url=server.url)
    with reaped(proc):
        channel = "redisson_lock__channel:{w}"
        assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1, timeout=30)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    (field,) = r.hkeys("w")  # only the holder: the interrupted wait left no hold
    assert field.decode().startswith(holder.client_id)


# ------------------------------------------------------------------ parsing (flock/consul)
def test_everything_after_name_belongs_to_the_command(server, r):
    done = tenure_cmd("run", "job", "echo", "a", "--timeout", "5", "--fair", "b", url=server.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a --timeout 5 --fair b\n"  # the flags are echo's
    assert not r.exists("redisson_lock_queue:{job}")  # a plain Lock, not a FairLock


def test_options_before_name_or_before_dashes(server, r, make_client):
    holder = make_client()
    assert holder.lock("busy").acquire(lease_time=60)
    before = tenure_cmd("run", "--timeout", "0.2", "busy", "true", url=server.url)
    assert before.returncode == 75, before.stderr
    after = tenure_cmd("run", "busy", "--timeout", "0.2", "--", "true", url=server.url)
    assert after.returncode == 75, after.stderr
    joined = tenure_cmd("run", "--timeout=0.2", "busy", "true", url=server.url)
    assert joined.returncode == 75, joined.stderr
    ok = tenure_cmd("run", "--timeout", "5", "free", "--", "echo", "--", "x", url=server.url)
    assert ok.returncode == 0
    assert ok.stdout == "-- x\n"  # only the first -- separates


@pytest.mark.parametrize(
    "args",
    [
        ("--jsn", "job", "--", "touch", "ran"),  # a mistyped option is not a lock name
        ("--jsn", "job", "touch", "ran"),
        ("job", "--jsn", "--", "touch", "ran"),  # before --: an option of tenure's
        ("job", "extra", "--", "touch", "ran"),  # one NAME only
        ("job",),  # no command
        ("--permits", "0", "job", "touch", "ran"),
        ("--permits", "2", "--fair", "job", "touch", "ran"),
    ],
)
def test_usage_errors_exit_2_and_run_nothing(server, r, args, tmp_path):
    marker = tmp_path / "ran"
    done = tenure_cmd("run", *args, url=server.url, cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Usage:" in done.stderr
    assert not marker.exists()
    assert r.dbsize() == 0  # nothing acquired


def test_permits_let_n_commands_run_at_once(server, r, child):
    _, log = child
    with ExitStack() as stack:
        procs = [
            stack.enter_context(
                reaped(
                    tenure_popen(
                        "run", "--permits", "2", "pool", *cmd(child, "span"), url=server.url
                    )
                )
            )
            for _ in range(4)
        ]
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    spans = sorted((float(a), float(b)) for a, b in lines(log, "span"))
    assert len(spans) == 4
    most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert most <= 2, spans  # never three at once
    assert r.get("pool") == b"2"  # every permit back
    env = tenure_cmd(
        "run",
        "--permits",
        "2",
        "pool",
        sys.executable,
        "-c",
        "import os; print(len(os.environ['TENURE_PERMIT_ID']))",
        url=server.url,
    )
    assert env.returncode == 0
    assert env.stdout == "32\n"


def test_permits_timeout_when_all_are_taken(server, r, make_client):
    holder = make_client()
    sem = holder.permit_expirable_semaphore("full")
    assert sem.try_set_permits(1)
    assert sem.acquire(lease_time=60) is not None
    waited = tenure_cmd("run", "--permits", "1", "--timeout", "0.3", "full", "true", url=server.url)
    assert waited.returncode == 75, waited.stderr
