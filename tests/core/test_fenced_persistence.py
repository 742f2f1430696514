"""A FencedLock's first acquire per client checks the server's persistence (issue 9 item 18):
tokens go backwards after a restart of a server that persists nothing."""

from __future__ import annotations

import logging

import pytest

from tenure.core.context import Context
from tenure.core.effects import Command
from tenure.core.fenced import FencedLockCore
from tenure.errors import BackendError

from .scripted import Step, drive

NO_AOF = b"# Persistence\r\nloading:0\r\naof_enabled:0\r\n"
AOF = b"# Persistence\r\nloading:0\r\naof_enabled:1\r\n"


@pytest.mark.parametrize(
    ("info", "save", "warns"),
    [
        (NO_AOF, [b"save", b""], True),
        (NO_AOF, {b"save": b""}, True),  # RESP3
        (NO_AOF, [b"save", b"3600 1 300 100"], False),
        (AOF, [b"save", b""], False),
    ],
)
def test_warns_when_nothing_is_persisted(
    ctx: Context,
    owner: str,
    caplog: pytest.LogCaptureFixture,
    info: object,
    save: object,
    warns: bool,
) -> None:
    ctx.persistence_checked = False
    caplog.set_level(logging.WARNING, logger="tenure")
    core = FencedLockCore(ctx, "ledger")
    steps: list[Step] = [(Command, info), (Command, save), ("fenced_acquire", [1, 7])]
    run = drive(core.acquire(owner, True, None, 5.0), steps)
    assert run.result is True
    assert run.effects[1].args == ("CONFIG", "GET", "save")
    assert bool(caplog.records) is warns
    # once per client: the next acquire goes straight to its script
    run = drive(core.acquire(owner, True, None, 5.0), [("fenced_acquire", [1, 8])])
    assert run.result is True


def test_a_refused_check_is_skipped(ctx: Context, owner: str) -> None:
    ctx.persistence_checked = False
    core = FencedLockCore(ctx, "ledger")
    steps: list[Step] = [(Command, BackendError("NOPERM")), ("fenced_acquire", [1, 7])]
    assert drive(core.acquire(owner, True, None, 5.0), steps).result is True
