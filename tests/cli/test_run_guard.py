"""COMMAND's process group dies with ``tenure run`` / ``tenure elect -- CMD`` however tenure
ends (cli/guard.py): SIGKILLed, tenure cannot stop COMMAND itself, and COMMAND must not run
on past the hold beside the next holder. The real entry point in subprocesses, real
servers."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from contextlib import suppress
from pathlib import Path

import pytest

from support.twins import wait_until

from .runner import reaped, stderr, tenure_cmd, tenure_popen

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads process states from /proc"
)

COMMAND = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    log, mode = sys.argv[1], sys.argv[2]

    def write(text):
        with open(log, "a") as f:
            f.write(text + "\\n")

    if len(sys.argv) == 3:  # COMMAND: start the grandchild, then wait (or exit: 'leave')
        null = subprocess.DEVNULL  # the grandchild must not hold tenure's output open
        subprocess.Popen(
            [sys.executable, __file__, log, mode, "grandchild"],
            stdin=null, stdout=null, stderr=null,
        )
        write(f"child {os.getpid()}")
        if mode == "leave":
            sys.exit(0)
    else:  # the grandchild beats into the log ('stubborn': it ignores SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn" else signal.SIG_DFL)
        write(f"grandchild {os.getpid()}")
        while True:
            write("beat")
            time.sleep(0.05)
    while True:
        time.sleep(0.05)
    """
)


@pytest.fixture
def command(tmp_path: Path) -> tuple[list[str], Path]:
    """(COMMAND as argv without its mode, the log it appends to)."""
    program = tmp_path / "command.py"
    program.write_text(COMMAND)
    log = tmp_path / "log"
    return [sys.executable, str(program), str(log)], log


def pid_of(log: Path, who: str) -> int | None:
    """The pid that ``who`` ("child", "grandchild") wrote in the log, once it did."""
    text = log.read_text() if log.exists() else ""
    for line in text.splitlines():
        if line.startswith(f"{who} ") and line.split()[1].isdigit():
            return int(line.split()[1])
    return None


def beats(log: Path) -> int:
    return log.read_text().count("beat") if log.exists() else 0


def gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie, or reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def reapers(log: Path) -> list[int]:
    """Live guard processes (the reaper) of the command that writes ``log``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        pid = int(cmdline.parent.name)
        ours = any(a.endswith(b"guard.py") for a in args) and os.fsencode(log) in args
        if ours and not gone(pid):
            found.append(pid)
    return found


def started(log: Path) -> tuple[int, int]:
    """The child's and the grandchild's pids, once the grandchild beats."""
    assert wait_until(lambda: beats(log) > 0 and pid_of(log, "child") is not None, timeout=30)
    child, grandchild = pid_of(log, "child"), pid_of(log, "grandchild")
    assert child is not None
    assert grandchild is not None
    return child, grandchild


@pytest.mark.parametrize(
    ("verb", "mode", "grace"),
    [("run", "obedient", 30.0), ("elect", "obedient", 30.0), ("run", "stubborn", 1.0)],
)
def test_a_killed_tenure_takes_the_commands_group_with_it(server, r, command, verb, mode, grace):
    """'obedient': the group ends on SIGTERM, long before the 30 s grace; 'stubborn': the
    grandchild ignores SIGTERM and gets SIGKILL once the 1 s grace is over."""
    argv, log = command
    args = (verb, "--grace", str(grace), "job", "--", *argv, mode)
    with reaped(tenure_popen(*args, url=server.url)) as proc:
        child, grandchild = started(log)
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proc.wait(timeout=10)
        try:
            bound = 2.0 if mode == "obedient" else grace + 2.0
            ended = wait_until(lambda: gone(child) and gone(grandchild), timeout=bound)
            elapsed = time.monotonic() - killed
            print(f"{verb} SIGKILLed ({mode}): child and grandchild gone after {elapsed:.2f} s")
            assert ended, f"still running {bound} s after tenure was SIGKILLed"
            assert wait_until(lambda: not reapers(log), timeout=5), "the reaper stays"
        finally:
            for pid in (child, grandchild):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_command_that_exits_leaves_its_children_and_no_reaper(server, r, command):
    """Once COMMAND has exited, tenure disarms the reaper: the children COMMAND left
    running run on (as with flock(1)), and nothing of the guard stays behind."""
    argv, log = command
    with reaped(tenure_popen("run", "job", "--", *argv, "leave", url=server.url)) as proc:
        _, grandchild = started(log)
        try:
            assert proc.wait(timeout=30) == 0, stderr(proc)
            assert wait_until(lambda: not reapers(log), timeout=5), "the reaper stays"
            assert not gone(grandchild)  # nothing is left that could stop it
            counted = beats(log)
            assert wait_until(lambda: beats(log) > counted, timeout=5)
        finally:
            with suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)


def test_a_command_that_cannot_be_run_is_reported_as_before(server, r, tmp_path):
    """The guard execs COMMAND: it reports a command not found (127) or not executable
    (126) in tenure's words, and the lock is released."""
    plain = tmp_path / "plain"
    plain.write_text("not a program\n")
    for command, status, text in [
        (str(tmp_path / "missing"), 127, "command not found"),
        (str(plain), 126, "permission denied"),
    ]:
        done = tenure_cmd("run", "job", "--", command, url=server.url)
        assert done.returncode == status, done.stderr
        assert done.stderr.strip() == f"tenure: {text}: {command}"
        assert not r.exists("job")
