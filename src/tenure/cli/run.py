"""``tenure run [OPTIONS] NAME [--] CMD ...``: flock(1) for a fleet.

Options come before NAME, or anywhere before a ``--`` that separates CMD (as flock(1) and
``consul lock``): without ``--`` everything after NAME is CMD, its own flags included, and a
mistyped option is a usage error (exit 2), never a lock name.

Acquire the lock (the watchdog renews it unless ``--lease`` is given), run CMD with
``TENURE_LOCK_NAME`` (and ``TENURE_FENCING_TOKEN`` with ``--fenced``) in its environment,
forward signals to it, release when it exits and exit with its status. When the lock is lost
while CMD runs (the watchdog finds the hold gone, or a ``--lease`` runs out), CMD is
terminated, its children too (its process group): SIGTERM, then SIGKILL after ``--grace``
seconds. From a terminal, CMD runs in its foreground (Ctrl-C reaches CMD). If tenure dies
(SIGKILL, a crash), CMD's process group dies with it (cli/guard.py).

Exit statuses: CMD's own (128 + N when a signal N ended it); 75 (EX_TEMPFAIL) when the wait
ran out; 1 with a one-line message for a server error or a lost lock; 126/127 when CMD
cannot be run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import nullcontext, suppress
from types import FrameType
from typing import Any

import click
from rich.console import Console

import tenure
from tenure.cli import guard
from tenure.cli.common import (
    client,
    grace_option,
    is_tty,
    one_line,
    positive,
    timeout_option,
    url_option,
    watchdog_option,
)
from tenure.core.clock import drift

EXIT_TIMEOUT = 75
"""EX_TEMPFAIL: the lock stayed held by someone else for the whole --timeout."""
EXIT_ERROR = 1
JOB_CONTROL_STOPS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
"""What stops a command for job control: Ctrl-Z, a read or write from the background."""
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


class CommandAfterName(click.Command):
    """A command parsed as flock(1) and ``consul lock`` parse theirs: ``[OPTIONS] NAME
    [--] COMMAND...``. Options come before NAME, or anywhere before a ``--``; without
    ``--``, everything after NAME belongs to COMMAND (``tenure run job rsync --timeout 30``
    keeps rsync's flag). An unknown option before the command is a usage error (exit 2).
    Its params end with the ``name`` argument and a ``command`` argument (``nargs=-1``).

    ``dashes_only``: COMMAND comes only after ``--`` (``tenure elect NAME [--value V] [--
    CMD ...]``, whose COMMAND is optional): without ``--`` options may also follow NAME.
    """

    dashes_only = False

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = list(args)
        if "--" in args:
            at = args.index("--")
            head, tail = args[:at], args[at + 1 :]
        elif self.dashes_only:
            head, tail = args, []
        else:
            found = self._name_at(ctx, args)
            head, tail = (args, []) if found is None else (args[: found + 1], args[found + 1 :])
        rest = super().parse_args(ctx, [*head, "--", *tail])
        given = tuple(ctx.params.get("command") or ())
        if given != tuple(tail):
            extra = given[: len(given) - len(tail)]
            where = "after --" if self.dashes_only else "after NAME, or after --"
            raise click.UsageError(
                f"unexpected argument {extra[0]!r} (the command goes {where})", ctx
            )
        return rest

    def _name_at(self, ctx: click.Context, args: list[str]) -> int | None:
        """Index of NAME in ``args``: the first argument that is neither an option nor an
        option's value; None if there is none."""
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                for opt in [*param.opts, *param.secondary_opts]:
                    takes_value[opt] = not (param.is_flag or param.count)
        at = 0
        while at < len(args):
            arg = args[at]
            if arg.startswith("-") and arg != "-":
                at += 2 if "=" not in arg and takes_value.get(arg, False) else 1
                continue
            return at
        return None


@click.command(cls=CommandAfterName)
@click.argument("name")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@timeout_option("for the lock")
@click.option(
    "--lease",
    type=float,
    default=None,
    metavar="S",
    callback=positive,
    help="Fixed lease in seconds instead of the watchdog; CMD is terminated when it runs out.",
)
@watchdog_option(
    "Watchdog lease in seconds; renewed every third of it. A loss is noticed "
    "within one renewal period."
)
@click.option(
    "--max-hold",
    type=float,
    default=None,
    metavar="S",
    callback=positive,
    help="Hold cap: the watchdog stops renewing S seconds after the grant, so COMMAND is "
    "terminated at most S + the watchdog lease after it started, whatever it does.",
)
@click.option("--fair", is_flag=True, help="Use a FairLock (first come, first served).")
@click.option(
    "--permits",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Hold one of N permits instead of the lock, so that up to N such COMMANDs run at "
    "once (as consul lock -n): a PermitExpirableSemaphore whose permits are renewed by the "
    "watchdog and expire when the process dies. The first run sets N.",
)
@click.option(
    "--fenced", is_flag=True, help="Use a FencedLock; CMD gets the token in TENURE_FENCING_TOKEN."
)
@grace_option("the lock")
@url_option
def run(**options: Any) -> None:
    """Run COMMAND while holding the lock NAME; at most one such COMMAND runs at a time
    across every host using the same server.

    COMMAND gets TENURE_LOCK_NAME (and TENURE_FENCING_TOKEN with --fenced,
    TENURE_PERMIT_ID with --permits) in its environment; SIGINT, SIGTERM, SIGHUP,
    SIGQUIT, SIGUSR1/2 are forwarded to it. If the lock is lost while it runs, it and its
    children get SIGTERM, then SIGKILL after --grace seconds. From a terminal it runs in
    the foreground (Ctrl-C reaches it). While renewal fails but the lease still
    runs, "in doubt" is printed on stderr (once per episode).
    Exit status: COMMAND's (128+N if signal N ended it), 75 when --timeout ran out, 1 for a
    server error or a lost lock, 2 for a usage error.

    Options go before NAME, or anywhere before a -- that separates COMMAND; without --,
    everything after NAME is COMMAND (its own flags included).

    \b
    Examples:
      tenure run --timeout 60 --fenced nightly-backup ./backup.sh --full
      tenure run nightly-backup --timeout 60 -- ./backup.sh --full
      tenure run --permits 3 encoder -- ffmpeg -i in.mp4 out.webm
    """
    # The options arrive by name, as Runner takes them (one list of them: Runner's).
    if options["fair"] and options["fenced"]:
        raise click.UsageError("--fair and --fenced cannot be combined (no fair fenced lock)")
    if options["permits"] is not None and (options["fair"] or options["fenced"]):
        raise click.UsageError("--permits cannot be combined with --fair or --fenced")
    if options["permits"] is not None and options["max_hold"] is not None:
        raise click.UsageError("--max-hold cannot be combined with --permits")
    if options["grace"] < 0:
        raise click.BadParameter("must be 0 or more seconds", param_hint="--grace")
    sys.exit(Runner(**options).main())


class Runner:
    """One ``tenure run``: acquire, supervise the child, release."""

    def __init__(
        self,
        *,
        name: str,
        command: tuple[str, ...],
        timeout: float | None,
        lease: float | None,
        watchdog_timeout: float,
        fair: bool = False,
        fenced: bool = False,
        permits: int | None = None,
        max_hold: float | None = None,
        grace: float,
        url: str,
    ) -> None:
        self.name, self.command, self.timeout, self.lease = name, command, timeout, lease
        self.max_hold = max_hold
        self.grace, self.fair, self.fenced, self.permits = grace, fair, fenced, permits
        self.client = client(url, watchdog_timeout=watchdog_timeout)
        self.stop = threading.Event()  # the child exited, or the lock was lost
        self.job_stopped = threading.Event()
        """Job control stopped the child: tenure is to stop too (`_suspend`)."""
        self.wake = threading.Event()  # set after stop or job_stopped: `_watch` looks again
        self.lost_reason: str | None = None
        self.lease_ends: float | None = None
        """With --lease: monotonic time by which the hold's lease ends (the grant was sent
        before _acquire returned)."""
        self.child: subprocess.Popen[bytes] | None = None
        self.terminal: int | None = None
        """tenure's controlling terminal, if it has one (see `_supervise`)."""
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def say(self, text: str) -> None:
        self.err.print(f"tenure: {text}", markup=False)

    # ---------------------------------------------------------------- main
    def main(self) -> int:
        self.terminal = controlling_terminal()
        try:
            with self.client:
                return self._main()
        finally:
            if self.terminal is not None:
                os.close(self.terminal)

    def _make(self) -> Any:
        """The object whose hold guards the command."""
        if self.permits is not None:
            return self.client.permit_expirable_semaphore(self.name, on_lost=self._on_lost)
        reports = {"on_lost": self._on_lost, "on_doubt": self._on_doubt}
        if self.fenced:
            return self.client.fenced_lock(self.name, **reports)
        if self.fair:
            return self.client.fair_lock(self.name, **reports)
        return self.client.lock(self.name, **reports)

    def _main(self) -> int:
        lock = self._make()
        started = time.monotonic()
        try:
            token = self._wait_for(lock)
        except tenure.BackendError as error:
            self.say(f"error: {one_line(error)}")
            return EXIT_ERROR
        if token is None:
            holder = self._holder()
            self.say(f"timed out after {self.timeout} s waiting for {self.name!r}{holder}")
            return EXIT_TIMEOUT
        if self.lease is not None:  # the hold ends at its lease: so must the child
            self.lease_ends = time.monotonic() + self.lease
            ends = started + self.lease
            timer = threading.Timer(ends - time.monotonic(), self._lease_ran_out)
            timer.daemon = True
            timer.start()
        try:
            status = self._supervise(token)
        finally:
            released_ok = self._release(lock, token)
        if self.lost_reason is not None or not released_ok:
            return EXIT_ERROR
        return status

    def _wait_for(self, lock: Any) -> Any:
        """`_acquire()`, where SIGTERM ends the wait (exit 128 + 15; the wait cleans up
        after itself). Raises BackendError."""
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            return self._acquire(lock)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _acquire(self, lock: Any) -> Any:
        """What `_take()` returns (None when the wait ran out). On a TTY a
        spinner shows who holds the lock meanwhile (read with ``inspect`` each second)."""
        waited = threading.Event()
        spinner = self.err.status(f"waiting for {self.name!r}") if is_tty() else nullcontext()
        with spinner as status:
            if status is not None:
                threading.Thread(
                    target=self._show_holder, args=(status, waited), daemon=True
                ).start()
            try:
                return self._take(lock)
            finally:
                waited.set()

    def _take(self, lock: Any) -> Any:
        """Acquire: a fencing token, a permit id or True once held; None when the wait ran
        out."""
        if self.permits is not None:
            lock.try_set_permits(self.permits)  # the first run sets N; later ones share it
            return lock.acquire(timeout=self.timeout, lease_time=self.lease)
        cap = {"max_hold": self.max_hold}
        if self.fenced:
            return lock.acquire_token(timeout=self.timeout, lease_time=self.lease, **cap)
        return lock.acquire(timeout=self.timeout, lease_time=self.lease, **cap) or None

    def _env(self, token: Any) -> dict[str, str]:
        """What the command finds in its environment."""
        env = {"TENURE_LOCK_NAME": self.name}
        if self.fenced:
            env["TENURE_FENCING_TOKEN"] = str(token)
        if self.permits is not None:
            env["TENURE_PERMIT_ID"] = str(token)
        return env

    def _give(self, lock: Any, token: Any) -> None:
        """Release what `_take()` took (LockLostError/NotOwnedError when it is gone)."""
        if self.permits is None:
            lock.release()
            return
        try:
            lock.release(token)
        except tenure.LockLostError:
            raise
        except tenure.NotOwnedError as error:  # the permit expired or was taken back
            raise tenure.LockLostError(str(error)) from error

    def _show_holder(self, status: Any, waited: threading.Event) -> None:
        while not waited.is_set():
            status.update(f"waiting for {self.name!r}{self._holder()}")
            waited.wait(1.0)

    def _holder(self) -> str:
        try:
            info = self.client.inspect(self.name)
        except tenure.LockError:
            return ""
        if not info.holders:
            return ""
        owners = ", ".join(
            f"{h.client_name} ({h.owner})" if h.client_name else h.owner for h in info.holders
        )
        return f" (held by {owners})"

    # ---------------------------------------------------------------- child
    def _supervise(self, token: Any) -> int:
        """Run the command in a process group of its own, so that a loss stops its whole
        tree (its children too, which must not work on without the lock). Started in the
        foreground of a terminal, that group gets the foreground while it runs, as a shell
        gives it to a job: Ctrl-C, Ctrl-\\ and reads reach the command; when Ctrl-Z (or a
        read from the background) stops it, tenure stops too (`_suspend`)."""
        env = dict(os.environ, **self._env(token))
        handlers = {sig: signal.signal(sig, self._forward) for sig in FORWARDED}
        armed = -1
        try:
            # The guard (cli/guard.py) becomes COMMAND in the same process, having left a
            # reaper that stops COMMAND's group if tenure ends (SIGKILL, a crash) while
            # ``armed``, the pipe's write end, is open and not `disarm`ed. It says when
            # COMMAND cannot be run (126, 127).
            watched, armed = os.pipe()
            try:
                self.child = subprocess.Popen(
                    guard.argv(watched, self.grace, self.command),
                    env=env,
                    process_group=0,
                    pass_fds=(watched,),
                )
            finally:
                os.close(watched)
            try:
                if self._in_foreground():
                    self._set_foreground(self.child.pid)
                    # it may have read the terminal before it was its own, and stopped
                    self._signal_child(signal.SIGCONT)
                waiter = threading.Thread(target=self._wait_child, daemon=True)
                waiter.start()
                self._watch()
                if self.lost_reason is not None:
                    self.say(f"{self.name!r}: {self.lost_reason}")
                    if self.child.poll() is None:
                        self._terminate()
                code = self.child.wait()
                guard.disarm(armed)  # the group is done with, or left to run on (flock(1))
                armed = -1
            finally:
                self._take_terminal_back()
        finally:
            if armed >= 0:  # tenure leaves without having seen COMMAND exit: so must it
                os.close(armed)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        return 128 - code if code < 0 else code

    def _watch(self) -> None:
        """Return once the child exited or the hold was lost; meanwhile, each time job
        control stops the child, `_suspend()`. In the main thread: it alone may change a
        signal's disposition, and waits interruptibly (the forwarding handlers run)."""
        while True:
            self.wake.wait()
            self.wake.clear()  # before looking: a later set() is seen on the next turn
            if self.stop.is_set():
                return
            if self.job_stopped.is_set():
                self.job_stopped.clear()
                self._suspend()

    def _wait_child(self) -> None:
        child = self.child
        assert child is not None
        if self.terminal is not None:
            self._follow_stops(child.pid)
        child.wait()
        self.stop.set()
        self.wake.set()

    def _follow_stops(self, pid: int) -> None:
        """Return once the child has exited (left for Popen to reap); each time job control
        stops it in the meantime (Ctrl-Z; a read or write from the background), have
        `_watch` suspend tenure. A SIGSTOP sent to it is its sender's business."""
        while True:
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WSTOPPED | os.WNOWAIT)
                if info is None or info.si_code != os.CLD_STOPPED:
                    return
                os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG)  # seen: consume it
            except ChildProcessError:  # reaped meanwhile (by _terminate's wait)
                return
            if info.si_status in JOB_CONTROL_STOPS:
                self.job_stopped.set()
                self.wake.set()

    def _suspend(self) -> None:
        """The command stopped (Ctrl-Z): take the terminal back and stop tenure's own process
        group, as the terminal would have had the command been in it, so that the shell
        sees its job stopped. Once continued (fg: the group is in the foreground again; bg:
        it is not), give the terminal back to the command and continue it. While stopped,
        tenure renews nothing: a lease that runs out meanwhile is a loss, found on return.
        (In an orphaned process group, with no shell to continue it, the kernel discards
        the stop: the command goes on at once.)

        tenure stops by raise(): the signal goes to the calling thread, which stops before
        raise() returns. A SIGTSTP sent to the process (kill, killpg) may be taken by another
        of its threads, and the caller runs on for a while: it saw the terminal still the
        shell's, continued the command, which read in the background and stopped again, and
        tenure stopped a second time after fg. The rest of tenure's process group (a
        pipeline's other members) gets killpg meanwhile, SIGTSTP ignored by tenure itself."""
        self._take_terminal_back()
        disposition = signal.signal(signal.SIGTSTP, signal.SIG_IGN)
        try:
            with suppress(ProcessLookupError):
                os.killpg(os.getpgrp(), signal.SIGTSTP)
        finally:
            signal.signal(signal.SIGTSTP, disposition)
        signal.raise_signal(signal.SIGTSTP)  # returns once continued (fg or bg)
        if self._in_foreground() and self.child is not None:
            self._set_foreground(self.child.pid)
        self._signal_child(signal.SIGCONT)

    def _in_foreground(self) -> bool:
        """True if tenure's process group is its terminal's foreground."""
        if self.terminal is None:
            return False
        try:
            return os.tcgetpgrp(self.terminal) == os.getpgrp()
        except OSError:
            return False

    def _set_foreground(self, pgid: int) -> None:
        """Make ``pgid`` the terminal's foreground process group. SIGTTOU is blocked
        meanwhile: tenure may be in the background itself when it takes the terminal back."""
        assert self.terminal is not None
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
        try:
            with suppress(OSError):
                os.tcsetpgrp(self.terminal, pgid)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _take_terminal_back(self) -> None:
        """Make tenure's process group the foreground again, if the command's still is (not
        if the shell took the terminal meanwhile: after a Ctrl-Z and bg)."""
        if self.terminal is None or self.child is None:
            return
        with suppress(OSError):
            if os.tcgetpgrp(self.terminal) == self.child.pid:
                self._set_foreground(os.getpgrp())

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        """Pass a signal sent to tenure on to the command (a terminal's Ctrl-C goes to the
        command's process group directly: tenure is not in the foreground meanwhile)."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        child.send_signal(signum)

    def _on_lost(self, lock: Any, *permit: str) -> None:
        ends = self.lease_ends
        # The hold keeper reports a --lease hold lost once its lease surely ended on the
        # local clock (less the drift allowance), which may come before _lease_ran_out's
        # timer: near the lease end, that is the lease running out, not a deletion.
        if ends is not None and time.monotonic() >= ends - drift(self.lease or 0.0) - 0.1:
            self._lease_ran_out()
            return
        self._lost("the lock was lost (its hold is gone from the server)")

    def _on_doubt(self, lock: Any) -> None:
        """Jeopardy: a renewal failed while the hold is still valid (once per episode)."""
        self.say(
            f"in doubt: renewing {self.name!r} failed; the hold is still valid for "
            f"{lock.valid_for():.1f} s (COMMAND is terminated if it runs out)"
        )

    def _lease_ran_out(self) -> None:
        self._lost(f"the lease of {self.lease} s ran out")

    def _lost(self, reason: str) -> None:
        if self.lost_reason is None and not self.stop.is_set():
            self.lost_reason = reason
            self.stop.set()
            self.wake.set()

    def _terminate(self) -> None:
        child = self.child
        assert child is not None
        self.say(f"terminating {self.command[0]} (pid {child.pid}): SIGTERM")
        ends = time.monotonic() + self.grace
        self._signal_child(signal.SIGTERM)
        self._signal_child(signal.SIGCONT)  # a stopped process acts on SIGTERM once continued
        with suppress(subprocess.TimeoutExpired):
            child.wait(self.grace)
        # its children get what remains of the grace (no event says that a group emptied)
        while self._group_runs() and time.monotonic() < ends:
            time.sleep(0.05)
        if child.poll() is None or self._group_runs():
            self.say(f"{self.command[0]} still running after {self.grace} s: SIGKILL")
            self._signal_child(signal.SIGKILL)

    def _group_runs(self) -> bool:
        """True while the command's process group has a member (a zombie included)."""
        assert self.child is not None
        try:
            os.killpg(self.child.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # a member changed user (setuid): still there
            return True
        return True

    def _signal_child(self, signum: int) -> None:
        """Send ``signum`` to the command's whole process group: its children too."""
        child = self.child
        assert child is not None
        with suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    # ---------------------------------------------------------------- release
    def _release(self, lock: Any, token: Any) -> bool:
        """Release; False (after saying why) when the hold was found lost."""
        if self.lost_reason is not None:
            with suppress(tenure.LockError):
                self._give(lock, token)
            return False
        try:
            self._give(lock, token)
        except tenure.LockLostError:
            self.say(
                f"{self.name!r}: the lock was lost before {self.command[0]} finished "
                "(found at release)"
            )
            return False
        except tenure.LockError as error:  # the child's work is done; the hold expires
            self.say(
                f"{self.name!r}: release failed: {one_line(error)} "
                "(the hold expires with its lease)"
            )
        return True


def controlling_terminal() -> int | None:
    """A descriptor of tenure's controlling terminal (whatever its stdin is); None without
    one."""
    try:
        return os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM while waiting: stop waiting (the wait cleans up after itself), exit 143."""
    raise SystemExit(128 + signum)
