"""The guard of ``tenure run`` / ``tenure elect -- CMD``: COMMAND's process group dies with
tenure, however tenure ends (SIGKILL, a crash), so that it never runs on past the hold
beside the next holder.

tenure starts ``python -I -S guard.py FD GRACE COMMAND...`` (`argv()`) as its child, the
leader of a new process group, with the read end of a pipe whose write end only tenure
holds. The guard forks a reaper out of the command's tree (a session of its own: no
terminal, no job-control signal reaches it, no ``wait`` in COMMAND waits for it), then
execs COMMAND in its own place: COMMAND keeps the pid tenure started, so its exit status,
its stops and the signals tenure forwards stay tenure's business alone.

The reaper reads the pipe. tenure writes a byte once COMMAND has exited (`disarm`): the
reaper exits. End of file without that byte means that tenure is gone while COMMAND may
still run: the reaper sends the group SIGTERM (and SIGCONT: a stopped process acts on it
once continued), then SIGKILL once GRACE seconds have passed with a member left.

The reaper exists before COMMAND runs, so there is no moment when COMMAND runs unguarded.
A pipe's end of file is POSIX (no parent-death signal needed); a reaper killed by hand
leaves the group unguarded.

Standard library only, run by path without ``site``: the interpreter start-up is the
cost (see docs/operations.md).
"""

from __future__ import annotations

import os
import signal
import sys
import time

DISARM = b"d"
"""What tenure writes once COMMAND has exited: the reaper leaves the group alone."""
POLL = 0.05
"""Seconds between looks at the group while it gets its grace (no event says it emptied)."""


def argv(fd: int, grace: float, command: tuple[str, ...]) -> list[str]:
    """The guard's argv, ``fd`` being the pipe's read end (passed to it)."""
    script = os.path.abspath(__file__)
    return [sys.executable, "-I", "-S", script, str(fd), repr(grace), *command]


def disarm(fd: int) -> None:
    """tenure's side: COMMAND has exited; the reaper is to leave its group alone."""
    try:
        os.write(fd, DISARM)
    except OSError:  # the reaper is gone (killed by hand): nothing to disarm
        pass
    finally:
        os.close(fd)


def reap(fd: int, group: int, grace: float) -> None:
    """The reaper: wait for tenure's word or its end, then stop the group if it ended."""
    if os.read(fd, 1) == DISARM:
        return
    for signum in (signal.SIGTERM, signal.SIGCONT):
        if not _signal(group, signum):
            return
    ends = time.monotonic() + grace
    while time.monotonic() < ends:
        if not _signal(group, 0):
            return
        time.sleep(POLL)
    _signal(group, signal.SIGKILL)


def _signal(group: int, signum: int) -> bool:
    """Send ``signum`` to the process group; False once it has no member."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed user (setuid): still there
        return True
    return True


def _detach(fd: int) -> int:
    """Leave the command's tree for a session of its own, holding only the pipe: its
    descriptor now."""
    import fcntl  # here: the reaper's alone, after the fork

    os.setsid()  # not a group leader (the guard is): this succeeds
    if os.fork() != 0:
        os._exit(0)  # the guard reaps this one at once; the reaper is init's child
    os.chdir("/")
    # Above the standard streams, replaced next (tenure started with stdin closed got the
    # pipe as its descriptor 0).
    fd = fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):  # COMMAND's terminal or pipes must not stay open here
        os.dup2(null, std)
    if null > 2:
        os.close(null)
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    return fd


def main(args: list[str]) -> None:
    fd, grace, command = int(args[0]), float(args[1]), args[2:]
    group = os.getpgrp()  # tenure made the guard its group's leader: COMMAND's group
    # Python ignores SIGPIPE and SIGXFSZ for itself, and exec keeps an ignored signal
    # ignored: COMMAND gets them at their default, as Popen's restore_signals gives them.
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C now: as to COMMAND
    first = os.fork()
    if first == 0:
        try:
            reap(_detach(fd), group, grace)
        finally:
            os._exit(0)
    os.waitpid(first, 0)  # it exits once the reaper, its child, is detached
    os.close(fd)
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        _fail(127, f"command not found: {command[0]}")
    except PermissionError:
        _fail(126, f"permission denied: {command[0]}")
    except OSError as error:
        _fail(126, f"cannot run {command[0]}: {error.strerror}")


def _fail(status: int, text: str) -> None:
    """COMMAND cannot be run: say why, as tenure would, and exit with ``status``."""
    sys.stderr.write(f"tenure: {text}\n")
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main(sys.argv[1:])
