"""``tenure demo --kind semaphore`` and ``--kind latch`` on a real server."""

from __future__ import annotations

import pytest
import redis

from support.servers import Server
from tenure import demo


@pytest.mark.parametrize("use_asyncio", [False, True])
def test_demo_semaphore_never_exceeds_its_permits(
    server: Server, r: redis.Redis, use_asyncio: bool
) -> None:
    report = demo.run(
        server.url, kind="semaphore", processes=2, threads=4, rounds=10, use_asyncio=use_asyncio
    )
    assert report.ok
    assert report.counter == 80
    assert report.overlaps == 0
    assert report.max_inside == demo.PERMITS
    assert report.permits == demo.PERMITS
    assert sorted(report.per_worker.values()) == [10] * 8  # every worker served


@pytest.mark.parametrize("use_asyncio", [False, True])
def test_demo_latch_wakes_nobody_early(server: Server, r: redis.Redis, use_asyncio: bool) -> None:
    report = demo.run(
        server.url, kind="latch", processes=2, threads=2, rounds=10, use_asyncio=use_asyncio
    )
    assert report.ok
    assert report.counter == 40
    assert report.overlaps == 0
    assert len(report.handoff_ms) == 40
    assert report.latch


def test_analyse_semaphore_counts_entries_beyond_the_permits() -> None:
    spans = [(0, 0, 10), (1, 1, 10), (2, 2, 10), (3, 20, 30)]  # three inside at once
    report = demo.analyse_semaphore(spans, expected=4, counter=4, permits=2)
    assert report.overlaps == 1
    assert report.max_inside == 3
    assert not report.ok


def test_analyse_latch_flags_a_wake_before_the_last_count_down() -> None:
    spans = [(0, 0, 5), (1, 10, 12)]  # worker 0 woke at 5, before worker 1 counted at 10
    report = demo.analyse_latch(spans, expected=2, counter=2)
    assert report.overlaps == 1
    assert not report.ok
