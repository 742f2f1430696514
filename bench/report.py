"""The one summary table: each tenure figure beside its floor, its best peer and its target.

Ratios are tenure ÷ other. An arrow says which way is better for that row: ``↓`` lower is
better (latency, commands), ``↑`` higher is better (throughput).
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from bench.common import Results, Row


def _best(values: dict[str, float], higher: bool = False) -> tuple[str, float] | None:
    finite = {k: v for k, v in values.items() if math.isfinite(v)}
    if not finite:
        return None
    name = (max if higher else min)(finite, key=finite.__getitem__)
    return name, finite[name]


def _uncontended(res: Results, rows: list[Row]) -> None:
    path = "uncontended"
    ping = res.get(path, "2xPING", "us")
    floor = res.get(path, "two-script floor", "us")
    if ping is None or floor is None:
        return
    best = _best(res.of(path, "us", "peer"))
    for subject, target in (("tenure Lock", 1.10), ("tenure FairLock", None)):
        us = res.get(path, subject, "us")
        if us is None:
            continue
        row = Row(
            "1 uncontended sync",
            subject,
            f"{us:.0f} µs = {us / ping:.2f}x 2·PING",
            f"2 scripts {floor:.0f} µs ({floor / ping:.2f}x 2·PING)",
            us / floor,
        )
        if best:
            row.peer = f"{best[0]} {best[1]:.0f} µs ({best[1] / ping:.2f}x)"
            row.vs_peer = us / best[1]
        if target:
            row.target = f"≤ {target:.2f}x floor"
            row.met = us / floor <= target
        rows.append(row)


def _uncontended_async(res: Results, rows: list[Row]) -> None:
    path = "uncontended-async"
    ping = res.get(path, "2xPING (redis.asyncio)", "us")
    sync_ping = res.get(path, "2xPING (sync redis-py)", "us")
    floor = res.get(path, "two-script floor (redis.asyncio)", "us")
    peer = res.get(path, "redis.asyncio Lock", "us")
    if ping is None or floor is None or sync_ping is None:
        return
    for subject in ("tenure AsyncLock", "tenure AsyncFairLock"):
        us = res.get(path, subject, "us")
        if us is None:
            continue
        row = Row(
            "2 uncontended asyncio",
            subject,
            f"{us:.0f} µs = {us / ping:.2f}x 2·PING (asyncio), {us / sync_ping:.2f}x (sync)",
            f"2 scripts {floor:.0f} µs ({floor / ping:.2f}x)",
            us / floor,
        )
        if peer:
            row.peer = f"redis.asyncio Lock {peer:.0f} µs ({peer / ping:.2f}x)"
            row.vs_peer = us / peer
        if subject == "tenure AsyncLock":
            row.target = "≤ 1.10x floor, ≤ 0.80x redis.asyncio Lock"
            row.met = us / floor <= 1.10 and (peer is None or us / peer <= 0.80)
        rows.append(row)


def _handoff(res: Results, rows: list[Row]) -> None:
    medians = res.of("handoff", "median_ms", "peer")
    best = _best(medians)
    prl = medians.get("python-redis-lock")
    for subject in ("tenure Lock", "tenure FairLock"):
        med = res.get("handoff", subject, "median_ms")
        p90 = res.get("handoff", subject, "p90_ms")
        if med is None or p90 is None:
            continue
        row = Row("3 handoff after release", subject, f"median {med:.2f} ms, p90 {p90:.2f} ms")
        if best:
            bp90 = res.get("handoff", best[0], "p90_ms") or math.nan
            row.peer = f"{best[0]} {best[1]:.2f} ms, p90 {bp90:.2f} ms"
            row.vs_peer = med / best[1]
        if prl:
            row.target = "median ≤ 1.2x python-redis-lock"
            row.met = med <= 1.2 * prl
        rows.append(row)
    med = res.get("crash-handoff", "tenure Lock", "median_ms")
    if med is not None:
        row = Row("3 handoff after holder crash", "tenure Lock", f"median {med:.2f} ms")
        best = _best(res.of("crash-handoff", "median_ms", "peer"))
        if best:
            row.peer = f"{best[0]} {best[1]:.2f} ms"
            row.vs_peer = med / best[1]
        row.target, row.met = "≤ 5 ms after lease end", med <= 5
        rows.append(row)


CONTENDED_FLOORS = {"tenure Lock": "raw handoff floor", "tenure FairLock": "raw fair handoff floor"}
"""Each tenure lock's floor under contention (bench/peers.py): its own scripts, bare redis-py."""


def _contended(res: Results, rows: list[Row]) -> None:
    procs = sorted({m.extra["procs"] for m in res.measurements if m.path == "contended"})
    for p in procs:
        rates = res.of("contended", "acq_per_s", "peer", procs=p)
        best = _best(rates, higher=True)
        for subject in ("tenure Lock", "tenure FairLock"):
            rate = res.get("contended", subject, "acq_per_s", procs=p)
            j = res.get("contended", subject, "jain", procs=p)
            cmds = res.get("contended", subject, "cmds_per_acq", procs=p)
            if rate is None or j is None or cmds is None:
                continue
            row = Row(
                f"4 contended P={p}",
                subject,
                f"{rate:,.0f} acq/s, Jain {j:.2f}, {cmds:.1f} cmd/acq",
            )
            floor_name = CONTENDED_FLOORS[subject]
            floor = res.get("contended", floor_name, "acq_per_s", procs=p)
            if floor:
                floor_cmds = res.get("contended", floor_name, "cmds_per_acq", procs=p)
                label = floor_name.removesuffix(" floor")
                row.floor = f"{label} {floor:,.0f}/s, {floor_cmds or math.nan:.1f} cmd"
                row.vs_floor = rate / floor
            if best:
                row.peer = "; ".join(
                    f"{peer} {rates[peer]:,.0f}/s, Jain "
                    f"{res.get('contended', peer, 'jain', procs=p) or math.nan:.2f}, "
                    f"{res.get('contended', peer, 'cmds_per_acq', procs=p) or math.nan:.1f} cmd"
                    # the best, and python-redis-lock (the reference) when it is not
                    for peer in dict.fromkeys((best[0], "python-redis-lock"))
                    if peer in rates
                )
                row.vs_peer = rate / best[1]
            if subject == "tenure Lock":
                row.target = "≥ best peer acq/s, Jain ≥ 0.95, ≤ 12 cmd/acq"
                row.met = (best is None or rate >= best[1]) and j >= 0.95 and cmds <= 12
            else:
                prl = rates.get("python-redis-lock")
                if prl:
                    row.target = "≥ python-redis-lock acq/s"
                    row.met = rate >= prl
            rows.append(row)


def _async_tasks(res: Results, rows: list[Row]) -> None:
    for subject in ("tenure AsyncFairLock", "tenure AsyncLock"):
        cmds = res.get("async-tasks", subject, "cmds_per_acq")
        secs = res.get("async-tasks", subject, "drain_s")
        if cmds is None or secs is None:
            continue
        m = next(x for x in res.measurements if x.path == "async-tasks" and x.subject == subject)
        tasks, done = m.extra["tasks"], m.extra["done"]
        note = "" if done == tasks else f" (only {done} within {m.extra['limit']:.0f} s)"
        row = Row(
            f"5 asyncio {tasks:,} tasks, one lock",
            subject,
            f"{cmds:,.1f} cmd/acq, drained in {secs:.2f} s{note}",
        )
        if subject == "tenure AsyncFairLock":
            row.target, row.met = "≤ 20 cmd/acq", cmds <= 20 and done == tasks
        rows.append(row)


def _idle(res: Results, rows: list[Row]) -> None:
    path = "idle-waiters"
    idle = res.get(path, "tenure Lock", "idle_cmds")
    if idle is None:
        return
    m = next(x for x in res.measurements if x.path == path and x.subject == "tenure Lock")
    n, window = m.extra["waiters"], m.extra["window_s"]
    label = f"6 {n} idle waiters"
    prl = "python-redis-lock"
    row = Row(label, "tenure Lock", f"{idle:.0f} commands in {window:.0f} s of holder renewals")
    p_idle = res.get(path, prl, "idle_cmds")
    if p_idle is not None:
        row.peer = f"{prl} {p_idle:.0f}"
    row.target, row.met = "0", idle == 0
    rows.append(row)
    conns = res.get(path, "tenure Lock", "connections") or 0
    subs = res.get(path, "tenure Lock", "pubsub_connections") or 0
    row = Row(label, "tenure Lock", f"{conns:.0f} pooled + {subs:.0f} pub/sub connections")
    p_conns = res.get(path, prl, "connections")
    if p_conns is not None:
        row.peer = f"{prl} {p_conns:.0f} connections"
    row.target = "no pooled connection per idle waiter; 1 pub/sub"
    row.met = subs <= 1 and conns < n / 10
    rows.append(row)
    drain = res.get(path, "tenure Lock", "drain_s")
    if drain is not None:
        row = Row(label, "tenure Lock", f"drain (each acquires once) {drain:.2f} s")
        p_drain = res.get(path, prl, "drain_s")
        row.target = f"≤ {prl}"
        if p_drain is not None and math.isfinite(p_drain):
            row.peer = f"{prl} {p_drain:.2f} s"
            row.vs_peer = drain / p_drain
            row.met = drain <= p_drain
        elif p_drain is not None:
            row.peer = f"{prl}: not every waiter acquired"
        rows.append(row)


def _redlock(res: Results, rows: list[Row]) -> None:
    for path, single, raw_one, floor_name, subjects in (
        (
            "redlock",
            "tenure Lock (1 master)",
            "raw SET NX PX (1 master)",
            "raw fan-out SET NX PX (5 masters)",
            ("tenure RedLock (5 masters)", "tenure MultiLock (5 masters)"),
        ),
        (
            "redlock-async",
            "tenure AsyncLock (1 master)",
            "raw asyncio SET NX PX (1 master)",
            "raw asyncio fan-out SET NX PX (5 masters)",
            ("tenure AsyncRedLock (5 masters)",),
        ),
    ):
        one = res.get(path, single, "acquire_ms")
        raw = res.get(path, raw_one, "acquire_ms")
        floor = res.get(path, floor_name, "acquire_ms")
        if one is None or raw is None or floor is None:
            continue
        # The physical floor of the ratio: what five masters cost a hand-written
        # write-all-then-read-all SET NX over one master, on the same client library.
        fan = floor / raw
        best = _best(res.of(path, "acquire_ms", "peer"))
        for subject in subjects:
            ms = res.get(path, subject, "acquire_ms")
            if ms is None:
                continue
            row = Row(
                "7 fan-out, 5 masters, acquire",
                subject,
                f"{ms:.3f} ms = {ms / one:.2f}x 1-master Lock",
                f"raw fan-out {floor:.3f} ms = {fan:.2f}x raw 1 master",
                (ms / one) / fan,
            )
            if best:
                row.peer = f"{best[0]} {best[1]:.3f} ms ({best[1] / one:.2f}x)"
                row.vs_peer = ms / best[1]
            if "RedLock" in subject:
                row.target, row.met = "≤ 1.5x 1-master Lock", ms / one <= 1.5
            rows.append(row)


def _footprint(res: Results, rows: list[Row]) -> None:
    size = res.get("footprint", "tenure Lock", "bytes_per_lock")
    if size is not None:
        rows.append(Row("footprint", "tenure Lock", f"{size:.0f} B per held lock (MEMORY USAGE)"))


# Which way is better, per path prefix, for the ratio columns.
HIGHER_IS_BETTER = ("4 ",)


def summarize(res: Results) -> list[Row]:
    rows: list[Row] = []
    for part in (
        _uncontended,
        _uncontended_async,
        _handoff,
        _contended,
        _async_tasks,
        _idle,
        _redlock,
        _footprint,
    ):
        part(res, rows)
    return rows


def _ratio(value: float | None, path: str) -> str:
    if value is None:
        return ""
    arrow = "↑" if path.startswith(HIGHER_IS_BETTER) else "↓"
    return f"{value:.2f} {arrow}"


def table(rows: list[Row], title: str) -> Table:
    t = Table(title=title, show_lines=False)
    for col, justify in (
        ("path", "left"),
        ("tenure", "left"),
        ("figure", "left"),
        ("floor", "left"),
        ("÷ floor", "right"),
        ("best peer (same run)", "left"),
        ("÷ peer", "right"),
        ("target", "left"),
        ("met", "center"),
    ):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        t.add_row(
            r.path,
            r.subject,
            r.figure,
            r.floor,
            _ratio(r.vs_floor, r.path),
            r.peer,
            _ratio(r.vs_peer, r.path),
            r.target,
            {None: "", True: "yes", False: "no"}[r.met],
        )
    return t


def print_table(rows: list[Row], title: str, console: Console | None = None) -> None:
    (console or Console(width=250)).print(table(rows, title))
