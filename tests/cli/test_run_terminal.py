"""``tenure run`` / ``tenure elect -- CMD`` started at a terminal: COMMAND runs in its own
process group, in the terminal's foreground (Ctrl-C and reads reach it), and a lost hold
stops COMMAND's whole process tree, its children included. A real pseudo-terminal (``pty``)
whose session leader outlives tenure, as an interactive shell does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.twins import wait_until

from .runner import ENTRY, env

# A long fault run (real ptys, process groups stopped and killed): deselected by default,
# run by .ci/run (`pytest -m long`).
pytestmark = [
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="reads process states from /proc"
    ),
    pytest.mark.long,
]

LEADER = textwrap.dedent(
    """
    import fcntl, os, signal, subprocess, sys, termios
    events, gate, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    shell = kind in ("shell", "background")

    def event(text):
        with open(events, "a") as f:
            f.write(text + "\\n")

    def foreground(pgid):
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
        os.tcsetpgrp(0, pgid)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # stdin, a pty, becomes the controlling terminal
    signal.signal(signal.SIGINT, lambda s, f: None)  # a terminal's ^C is not ours
    job = subprocess.Popen(sys.argv[4:], process_group=0 if shell else None)
    if kind == "shell":
        foreground(job.pid)
    while True:
        _, status = os.waitpid(job.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            break
        foreground(os.getpgrp())  # the job stopped: the terminal is the shell's again
        event("stopped")
        if os.read(gate, 1) != b"f":
            os.killpg(job.pid, signal.SIGKILL)
        foreground(job.pid)  # fg
        os.killpg(job.pid, signal.SIGCONT)
    back = os.tcgetpgrp(0) == (job.pid if shell else os.getpgrp())
    event(f"exit {os.waitstatus_to_exitcode(status)} {back}")
    os.read(gate, 1)  # stay the session leader (its exit hangs the terminal up) till told
    """
)
"""The session leader of the test's terminal. ``script``: runs tenure in its own process
group, as ``script -c CMD`` or a shell script on a terminal do; ``shell``: as an interactive
shell, in a process group of its own given the terminal's foreground (``background``: not
given it, as ``tenure ... &``), and resumed in the foreground (fg) when the test says so
after it stopped. Writes its events: ``stopped``, and
``exit CODE BACK`` (BACK: whether the terminal came back to tenure's process group)."""

COMMAND = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    log, mode = sys.argv[1], sys.argv[2]

    def write(text):
        with open(log, "a") as f:
            f.write(text + "\\n")

    if mode in ("tree", "stubborn-tree"):  # a grandchild outlives its parent unless its
        if len(sys.argv) == 3:  # group is signalled ('stubborn': it ignores SIGTERM)
            subprocess.Popen([sys.executable, __file__, log, mode, "grandchild"])
            signal.signal(signal.SIGTERM, lambda s, f: os._exit(143))
        else:
            if mode == "stubborn-tree":
                signal.signal(signal.SIGTERM, lambda s, f: write("grandchild term"))
            else:
                signal.signal(signal.SIGTERM, lambda s, f: (write("grandchild term"), os._exit(0)))
            write(f"grandchild {os.getpid()}")
    elif mode == "interrupt":
        def on_int(signum, frame):
            write("int")
            sys.exit(3)
        signal.signal(signal.SIGINT, on_int)
        write(f"ready {os.getpid()}")
    elif mode == "read":
        write("ready")
        write("read " + input())
        sys.exit(0)
    while True:
        time.sleep(0.05)
    """
)


@dataclass
class Terminal:
    """tenure running at a pty: write keys with `type()`, its output in `output`."""

    master: int
    leader: subprocess.Popen[bytes]
    events: Path
    gate: int
    output: list[bytes] = field(default_factory=list)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def happened(self) -> list[str]:
        return self.events.read_text().splitlines() if self.events.exists() else []

    def fg(self) -> None:
        """Resume tenure, stopped, in the foreground (as a shell's fg)."""
        os.write(self.gate, b"f")

    def outcome(self, timeout: float = 30) -> tuple[int, bool]:
        """tenure's exit status, and whether the terminal came back to tenure's group."""
        done = wait_until(lambda: any(e.startswith("exit") for e in self.happened()), timeout)
        assert done, b"".join(self.output)
        _, code, back = self.happened()[-1].split()
        return int(code), back == "True"


@contextmanager
def at_terminal(
    tmp_path: Path, url: str, *args: str, leader_kind: str = "script"
) -> Iterator[Terminal]:
    """``tenure ARGS`` at a fresh pty, in the foreground, run by a session leader that
    outlives it (`LEADER`, of kind ``leader_kind``)."""
    leader = tmp_path / "leader.py"
    leader.write_text(LEADER)
    events = tmp_path / "events"
    master, slave = os.openpty()
    gate, release = os.pipe()
    environment = {**env(url), "TERM": "dumb"}
    proc = subprocess.Popen(
        [sys.executable, str(leader), str(events), str(gate), leader_kind, ENTRY, *args],
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True, pass_fds=(gate,),
        env=environment,
    )  # fmt: skip
    os.close(slave)
    os.close(gate)
    terminal = Terminal(master, proc, events, release)

    def drain() -> None:  # the pty's buffer must not fill up and block tenure
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every slave side is closed
                return
            if not chunk:
                return
            terminal.output.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        yield terminal
    finally:
        os.close(release)
        try:
            proc.wait(timeout=10)
        finally:
            kill_session(proc.pid)  # a failed test leaves no process behind
            proc.wait()
            reader.join(timeout=5)
            os.close(master)


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the test terminal's)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # state ppid pgrp session
            with suppress(ProcessLookupError):
                os.kill(int(stat.parent.name), signal.SIGKILL)


@pytest.fixture
def command(tmp_path: Path) -> tuple[list[str], Path]:
    """(COMMAND as argv without its mode, the log it appends to)."""
    program = tmp_path / "command.py"
    program.write_text(COMMAND)
    log = tmp_path / "log"
    return [sys.executable, str(program), str(log)], log


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie, or reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def grandchild_of(log: Path) -> int | None:
    for line in lines(log):
        if line.startswith("grandchild ") and line.split()[1].isdigit():
            return int(line.split()[1])
    return None


@pytest.mark.parametrize(
    ("verb", "leader_kind", "mode"),
    [
        ("run", "script", "tree"),
        ("run", "shell", "tree"),
        ("elect", "script", "tree"),
        ("run", "shell", "stubborn-tree"),
    ],
)
def test_a_lost_hold_stops_the_commands_children_too(
    server, r, tmp_path, command, verb, leader_kind, mode
):
    """'stubborn-tree': the command exits on SIGTERM at once, its child ignores it: the
    group gets SIGKILL at the end of the grace all the same."""
    argv, log = command
    name = "job"
    grace = "5" if mode == "tree" else "0.5"
    args = (verb, "--watchdog-timeout", "0.6", "--grace", grace, name, "--", *argv, mode)
    with at_terminal(tmp_path, server.url, *args, leader_kind=leader_kind) as terminal:
        assert wait_until(lambda: grandchild_of(log) is not None, timeout=20), lines(log)
        pid = grandchild_of(log)
        assert pid is not None
        try:
            r.delete(name if verb == "run" else f"{{{name}}}:tenure_election")  # lost
            code, back = terminal.outcome()
            assert code == 1, b"".join(terminal.output)
            stopped = wait_until(lambda: gone(pid), timeout=5)
            print(f"{verb} at a terminal, hold lost: grandchild stopped: {stopped}")
            assert stopped, "COMMAND's child still runs after the lock was lost"
            assert "grandchild term" in lines(log)
            assert back, "the terminal stayed with COMMAND's process group"
        finally:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def ready_pid(log: Path) -> int | None:
    for line in lines(log):
        if line.startswith("ready "):
            return int(line.split()[1])
    return None


def state(pid: int) -> str:
    """The process state letter of ``pid`` (R, S, T: stopped, Z...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("leader_kind", ["script", "shell"])
def test_ctrl_c_reaches_the_command_and_the_lock_is_released(
    server, r, tmp_path, command, leader_kind
):
    argv, log = command
    args = ("run", "job", "--", *argv, "interrupt")
    with at_terminal(tmp_path, server.url, *args, leader_kind=leader_kind) as terminal:
        assert wait_until(lambda: ready_pid(log), timeout=20), b"".join(terminal.output)
        terminal.type(b"\x03")
        code, back = terminal.outcome()
    assert code == 3, b"".join(terminal.output)
    assert [line.split()[0] for line in lines(log)] == ["ready", "int"]
    assert back
    assert not r.exists("job")


def test_ctrl_z_stops_the_job_and_fg_resumes_it(server, r, tmp_path, command):
    """At an interactive shell: Ctrl-Z stops the command, then tenure, so that the shell sees
    its job stopped; fg gives the terminal back to the command (a Ctrl-C then reaches it)."""
    argv, log = command
    args = ("run", "job", "--", *argv, "interrupt")
    with at_terminal(tmp_path, server.url, *args, leader_kind="shell") as terminal:
        assert wait_until(lambda: ready_pid(log), timeout=20), b"".join(terminal.output)
        pid = ready_pid(log)
        assert pid is not None
        terminal.type(b"\x1a")
        assert wait_until(lambda: "stopped" in terminal.happened(), timeout=10), terminal.output
        assert state(pid) == "T"
        terminal.fg()
        assert wait_until(lambda: state(pid) != "T", timeout=10)
        terminal.type(b"\x03")
        code, back = terminal.outcome()
    assert code == 3, b"".join(terminal.output)
    assert [line.split()[0] for line in lines(log)] == ["ready", "int"]
    assert back
    assert not r.exists("job")


def test_the_command_reads_the_terminal(server, r, tmp_path, command):
    argv, log = command
    with at_terminal(tmp_path, server.url, "run", "job", "--", *argv, "read") as terminal:
        assert wait_until(lambda: "ready" in lines(log), timeout=20), b"".join(terminal.output)
        terminal.type(b"hello\n")
        code, back = terminal.outcome()
    assert code == 0, b"".join(terminal.output)
    assert lines(log) == ["ready", "read hello"]
    assert back


def test_a_background_job_reading_the_terminal_stops_then_fg_resumes_it(
    server, r, tmp_path, command
):
    """``tenure run ... &`` whose command reads the terminal: the command stops (SIGTTIN),
    then tenure, so that the shell sees its job stopped; fg lets the command read."""
    argv, log = command
    args = ("run", "job", "--", *argv, "read")
    with at_terminal(tmp_path, server.url, *args, leader_kind="background") as terminal:
        assert wait_until(lambda: "stopped" in terminal.happened(), timeout=20), terminal.output
        assert lines(log) == ["ready"]
        terminal.fg()
        terminal.type(b"hello\n")
        code, back = terminal.outcome()
    assert code == 0, b"".join(terminal.output)
    assert lines(log) == ["ready", "read hello"]
    assert back
    assert not r.exists("job")
