"""A renewal pass held back between its two batches (a hook on the runner's ``perform``).

A pass of the watchdog renews Lock-family holds in its first batch and read holds in its
second, and reports what it found lost once both replies are in. Holding the second batch
back opens the gap between a loss found and its report, at a moment the test knows, on a
real server all the same (tests/_async/test_loss_report_window.py,
tests/_async/test_loss_reported_once.py). One helper per driver: ``async_`` for the asyncio
tests, the plain name for their generated sync twins (tools/unasync.py drops the prefix)."""

from __future__ import annotations

from typing import Any

import pytest

from support.twins import AsyncEvent, Event
from tenure.core.effects import Call
from tenure.core.watchdog import READ_RENEW


def async_hold_back_second_batch(
    runner: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[AsyncEvent, AsyncEvent]:
    """Make an asyncio runner's read-hold batch (a pass's second) wait for ``go`` before it
    is sent; ``reached`` is set when it gets there (the first batch's reply is applied by
    then). Returns (reached, go)."""
    reached, go = AsyncEvent(), AsyncEvent()
    perform = runner.perform

    async def held_back(effect: Any) -> Any:
        if isinstance(effect, Call) and effect.script is READ_RENEW:
            reached.set()
            assert await go.wait(10)
        return await perform(effect)

    monkeypatch.setattr(runner, "perform", held_back)
    return reached, go


def hold_back_second_batch(runner: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Event, Event]:
    """As `async_hold_back_second_batch`, for a sync runner (its pass on the keeper thread)."""
    reached, go = Event(), Event()
    perform = runner.perform

    def held_back(effect: Any) -> Any:
        if isinstance(effect, Call) and effect.script is READ_RENEW:
            reached.set()
            assert go.wait(10)
        return perform(effect)

    monkeypatch.setattr(runner, "perform", held_back)
    return reached, go
