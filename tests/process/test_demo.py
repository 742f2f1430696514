"""``tenure demo`` workload (tenure.demo.run): small runs of every kind must keep exclusion."""

from __future__ import annotations

from typing import TypedDict

import pytest

from support.servers import Server
from tenure import demo


class Size(TypedDict):
    processes: int
    threads: int
    rounds: int


SMALL: Size = {"processes": 2, "threads": 2, "rounds": 20}


@pytest.mark.parametrize("use_asyncio", [False, True], ids=["sync", "asyncio"])
@pytest.mark.parametrize("kind", ["lock", "fenced"])
def test_single_server_kinds(server: Server, kind: str, use_asyncio: bool) -> None:
    report = demo.run(server.url, kind=kind, use_asyncio=use_asyncio, **SMALL)
    assert report.ok, report
    assert report.counter == report.expected == 2 * 2 * 20
    assert report.stale_writes == (0 if kind == "fenced" else None)
    with server.client() as raw:
        assert raw.keys("*tenure-demo:*") == []  # counter, lock and token keys cleaned up


@pytest.mark.parametrize("use_asyncio", [False, True], ids=["sync", "asyncio"])
def test_red_over_five_servers(five: list[Server], use_asyncio: bool) -> None:
    report = demo.run([s.url for s in five], kind="red", use_asyncio=use_asyncio, **SMALL)
    assert report.ok, report
    assert report.counter == report.expected
    assert report.stale_writes is None


def test_several_urls_only_for_red(server: Server) -> None:
    with pytest.raises(ValueError, match="one server"):
        demo.run([server.url, server.url], kind="lock", **SMALL)
    with pytest.raises(ValueError, match="unknown kind"):
        demo.run(server.url, kind="nope", **SMALL)
