"""``tenure demo --kind fair`` and ``--kind rw`` on a real server."""

from __future__ import annotations

import redis

from support.servers import Server
from tenure import demo


def test_demo_fair_counts_every_section(server: Server, r: redis.Redis) -> None:
    report = demo.run(server.url, kind="fair", processes=2, threads=2, rounds=10)
    assert report.ok
    assert report.counter == 40
    assert report.overlaps == 0


def test_demo_rw_writers_alone_readers_counted(server: Server, r: redis.Redis) -> None:
    report = demo.run(server.url, kind="rw", processes=2, threads=4, rounds=10)
    # workers 0 and 4 write (every 4th): 20 increments; readers only read
    assert report.counter_expected == 20
    assert report.counter == 20
    assert report.ok
    assert report.overlaps == 0
    assert report.sections == 80
    assert report.reader_overlaps is not None


def test_analyse_rw_flags_a_section_overlapping_a_write() -> None:
    spans = [(0, 0, 10), (1, 5, 20), (2, 15, 30), (3, 40, 50)]  # 0 writes; 1 overlaps it
    report = demo.analyse_rw(spans, expected=4, writes=1, counter=1)
    assert report.overlaps == 1
    assert report.reader_overlaps == 1
    assert not report.ok
