"""Run the real ``tenure`` entry point (the console script of this environment)."""

from __future__ import annotations

import os
import subprocess
import sys
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
