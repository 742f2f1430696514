"""Run the real ``tenure`` entry point (the console script of this environment)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ENTRY = str(Path(sys.executable).with_name("tenure"))
"""The ``tenure`` script pip installed next to this interpreter."""


def env(url: str | None) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "TENURE_URL"}
    if url is not None:
        environment["TENURE_URL"] = url
    return environment


def tenure_cmd(
    *args: str,
    url: str | None = None,
    stdin: str = "",
    timeout: float = 60,
    extra_env: dict[str, str] | None = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[str]:
    """``tenure ARGS`` with ``TENURE_URL=url`` (and ``extra_env``); its exit status and output."""
    return subprocess.run(
        [ENTRY, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**env(url), **(extra_env or {})},
        **kwargs,
    )


def tenure_popen(*args: str, url: str, **kwargs: Any) -> subprocess.Popen[str]:
    """``tenure ARGS`` started in the background (stdin closed, output captured)."""
    return subprocess.Popen(
        [ENTRY, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(url),
        **kwargs,
    )


@contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc``, killed on the way out if it still runs, then waited for, its pipes closed:
    a failed test leaves no child, and no test leaves an open pipe (a ResourceWarning)."""
    with proc:  # on exit: closes stdout and stderr, waits for the child
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


def ended_after(pid: int, lose: Callable[[], object], timeout: float = 30) -> float:
    """Seconds from the loss (``lose()``'s return: it has happened by then) to the end of
    process ``pid``, the command tenure runs (a pidfd turns readable as it exits).

    Counted to the command's end, not to tenure's own exit: that adds the teardown of
    tenure's interpreter (about 500 modules, 0.1 s of CPU), which on a loaded machine took
    0.4-0.9 s more and is no part of the
    contract: the command stops within two renewal periods of the loss."""
    fd = os.pidfd_open(pid)
    try:
        lose()
        lost_at = time.monotonic()
        ended, _, _ = select.select([fd], [], [], timeout)
        assert ended, f"the command still runs {timeout} s after the loss"
        return time.monotonic() - lost_at
    finally:
        os.close(fd)


def stderr(proc: subprocess.Popen[str]) -> str:
    """What ``proc`` (exited) printed on stderr."""
    return proc.stderr.read() if proc.stderr else ""
