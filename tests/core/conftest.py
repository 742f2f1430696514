"""Fixtures of the core tests: a real client context, an owner, a controllable clock.

Nothing here starts a server: these tests never request ``server``, ``r`` or ``client``.
"""

from __future__ import annotations

import importlib
import pkgutil
import time

import pytest

import tenure.core
from tenure.core.context import Context
from tenure.core.options import make_context

from .scripted import Clock

CORE_MODULES = [
    importlib.import_module(info.name)
    for info in pkgutil.walk_packages(tenure.core.__path__, "tenure.core.")
]


def new_context(**options: object) -> Context:
    settings: dict[str, object] = {
        "watchdog_timeout": 30.0,
        "name_prefix": "",
        "wait_for_replicas": 0,
        "replica_timeout": 1.0,
    }
    settings.update(options)
    ctx = make_context(**settings)
    # A FencedLock's first acquire checks the server's persistence first; that check has
    # its own tests (test_fenced_persistence.py), the other flows start at their script.
    ctx.persistence_checked = True
    return ctx


@pytest.fixture
def ctx() -> Context:
    return new_context()


@pytest.fixture
def owner(ctx: Context) -> str:
    return ctx.identity.thread_owner()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Every ``time.monotonic()`` of ``tenure.core`` reads this clock instead.

    Patched per module (``module.time`` or a ``from time import monotonic`` name), never the
    ``time`` module itself, so pytest and hypothesis keep the real clock.
    """
    fake = Clock()
    shim = fake.time_module()
    for module in CORE_MODULES:
        if getattr(module, "time", None) is time:
            monkeypatch.setattr(module, "time", shim)
        if getattr(module, "monotonic", None) is time.monotonic:
            monkeypatch.setattr(module, "monotonic", fake)
    return fake
