"""The tables of a bench run: each figure as its range over the runs, and the goals.

Each run is summarised on its own (every ratio is tenure ÷ another subject measured in that
same run, on the same load), then the runs are merged: a cell shows ``min-max`` over the runs,
or one value when every run rounds alike. :func:`markdown` renders the tables for
docs/benchmarks.md, :func:`print_tables` for a terminal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table as RichTable

from bench.common import Results

PRL = "python-redis-lock"
TIMES, DASH = "\u00d7", "\u2013"  # the multiplication sign and the en dash


@dataclass
class Table:
    """One table of one run: a row per subject, a value (or None) per column."""

    key: str
    title: str
    columns: list[tuple[str, str]]  # (header, format spec of a value)
    rows: dict[str, tuple[str, list[float | None]]] = field(default_factory=dict)
    note: str = ""

    def add(self, subject: str, role: str, *values: float | None) -> None:
        self.rows[subject] = (role, list(values))


@dataclass
class Goal:
    """One goal of one run: named measured parts, each with its bound, and whether all hold."""

    name: str
    parts: list[tuple[str, float, str, bool]]  # (label, value, bound text, held)

    @property
    def met(self) -> bool:
        return all(held for *_, held in self.parts)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or not math.isfinite(a) or not math.isfinite(b):
        return None
    return a / b


CONTENDED = ("contended", "contended-redis")
"""The contended paths: the main server, and a Debian redis-server beside it when installed."""


def _contended(res: Results, path: str, out: list[Table]) -> None:
    """The contended tables of one server (``path``: contended, contended-redis)."""
    get = res.get
    server = next((m.extra.get("server") for m in res.measurements if m.path == path), None)
    on = f", on {server}" if server else ""
    procs = sorted({m.extra["procs"] for m in res.measurements if m.path == path})
    for n in procs:
        t = Table(
            f"{path}-{n}",
            f"One lock, {n} processes, a GET + SET in each hold{on}",
            [
                ("acq/s", ",.0f"),
                ("÷ prl", ".2f"),
                ("Jain", ".2f"),
                ("wait median ms", ".2f"),
                ("wait p99 ms", ".1f"),
                ("worst wait ms", ",.0f"),
            ],
            note=f"prl: {PRL} in the same run.",
        )
        prl = get(path, PRL, "acq_per_s", procs=n)
        here = [m for m in res.measurements if m.path == path and m.extra["procs"] == n]
        for subject, role in dict.fromkeys((m.subject, m.role) for m in here):

            def v(metric: str, subject: str = subject, n: int = n) -> float | None:
                return get(path, subject, metric, procs=n)

            t.add(subject, role, v("acq_per_s"), _ratio(v("acq_per_s"), prl), v("jain"),
                  v("wait_median_ms"), v("wait_p99_ms"), v("wait_max_ms"))  # fmt: skip
        lost = {m.subject: m.value for m in here if m.metric == "lost_updates" and m.value}
        if lost:
            t.note += " Lost updates (two holders at once): " + ", ".join(
                f"{s} {v:.0f}" for s, v in lost.items()
            )
        out.append(t)
    for key, title, metric, spec in (
        (f"{path}-commands", "server commands per acquisition", "cmds_per_acq", ".1f"),
        (f"{path}-cpu", "client CPU per acquisition, µs", "cpu_us_per_acq", ",.0f"),
        (f"{path}-messages", "pub/sub messages read per unlock", "messages_per_acq", ".2f"),
    ):
        if not procs:
            break
        t = Table(key, f"One lock, P processes: {title}{on}",
                  [(f"P={n}", spec) for n in procs])  # fmt: skip
        if metric == "cmds_per_acq":
            t.note = "Commands run inside scripts included; the section's GET and SET left out."
        elif metric == "cpu_us_per_acq":
            t.note = "User + system time of all P processes."
        else:
            t.note = (
                "Messages the P processes read from pub/sub per acquisition (one unlock "
                "each); peers that wait on BLPOP or poll read none."
            )
        here = [m for m in res.measurements if m.path == path]
        for subject, role in dict.fromkeys((m.subject, m.role) for m in here):
            t.add(subject, role, *(get(path, subject, metric, procs=n) for n in procs))
        out.append(t)


# ---------------------------------------------------------------- one run
def tables(res: Results) -> list[Table]:
    out: list[Table] = []
    get = res.get

    for path, title, ping, floor in (
        ("uncontended", "Uncontended acquire + release, sync", "2xPING", "two-script floor"),
        (
            "uncontended-async",
            "Uncontended acquire + release, asyncio",
            "2xPING (redis.asyncio)",
            "two-script floor (redis.asyncio)",
        ),
    ):
        subjects = [m for m in res.measurements if m.path == path and m.metric == "us"]
        if not subjects:
            continue
        t = Table(path, title, [("median µs", ",.0f"), (TIMES + " 2·PING", ".2f"),
                                (TIMES + " two-script floor", ".2f")])  # fmt: skip
        for m in subjects:
            t.add(m.subject, m.role, m.value, _ratio(m.value, get(path, ping, "us")),
                  _ratio(m.value, get(path, floor, "us")))  # fmt: skip
        out.append(t)

    if any(m.path == "handoff" for m in res.measurements):
        t = Table(
            "handoff",
            "Handoff: holder's release() to the waiter's acquire() returning",
            [
                ("median ms", ".3f"),
                ("p99 ms", ".2f"),
                ("worst ms", ".1f"),
                ("median ÷ prl", ".2f"),
                ("p99 ÷ prl", ".2f"),
                ("median ms from the call", ".3f"),
            ],
            note=f"From release() returning; the last column from the release() call. "
            f"prl: {PRL} in the same run.",
        )
        prl_med, prl_p99 = get("handoff", PRL, "median_ms"), get("handoff", PRL, "p99_ms")
        for subject, role in dict.fromkeys((m.subject, m.role) for m in res.measurements
                                           if m.path == "handoff"):  # fmt: skip
            med, p99 = get("handoff", subject, "median_ms"), get("handoff", subject, "p99_ms")
            t.add(subject, role, med, p99, get("handoff", subject, "max_ms"),
                  _ratio(med, prl_med), _ratio(p99, prl_p99),
                  get("handoff", subject, "call_median_ms"))  # fmt: skip
        out.append(t)

    crash = [m for m in res.measurements if m.path == "crash-handoff"]
    if crash:
        t = Table("crash-handoff", "Handoff after the holder crashed (lease end to next holder)",
                  [("median ms", ".2f")])  # fmt: skip
        for m in crash:
            t.add(m.subject, m.role, m.value)
        out.append(t)

    for path in CONTENDED:
        _contended(res, path, out)

    sem = [m for m in res.measurements if m.path == "semaphore-drain" and m.metric == "all_ms"]
    if sem:
        t = Table("semaphore-drain", "1 permit, 100 waiting threads in one client: the drain",
                  [("first grant ms", ".2f"), ("all done ms", ",.0f"),
                   ("÷ redis-semaphore", ".2f"), ("cmd/acq", ".1f")])  # fmt: skip
        peer = get("semaphore-drain", "redis-semaphore", "all_ms")
        for m in sem:
            first = get("semaphore-drain", m.subject, "first_ms")
            cmds = get("semaphore-drain", m.subject, "cmds_per_acq")
            t.add(m.subject, m.role, first, m.value, _ratio(m.value, peer), cmds)
        out.append(t)

    latch = [m for m in res.measurements if m.path == "latch" and m.metric == "last_ms"]
    if latch:
        t = Table("latch", "100 threads of one client waiting on a latch: count_down() to wake-up",
                  [("first wait() returns, ms", ".2f"), ("last wait() returns, ms", ".1f"),
                   ("last ÷ floor", ".1f")])  # fmt: skip
        event_floor = get("latch", "pub/sub reader + Event floor", "last_ms")
        for m in latch:
            t.add(m.subject, m.role, get("latch", m.subject, "first_ms"), m.value,
                  _ratio(m.value, event_floor))  # fmt: skip
        out.append(t)

    tasks = [m for m in res.measurements if m.path == "async-tasks" and m.metric == "drain_s"]
    if tasks:
        n = tasks[0].extra["tasks"]
        t = Table("async-tasks", f"{n:,} asyncio tasks of one client take one lock once each",
                  [("cmd/acq", ".1f"), ("drained in s", ".2f")])  # fmt: skip
        for m in tasks:
            done = m.value if m.extra["done"] == m.extra["tasks"] else math.inf
            t.add(m.subject, m.role, get("async-tasks", m.subject, "cmds_per_acq"), done)
        out.append(t)

    idle = [m for m in res.measurements if m.path == "idle-waiters" and m.metric == "drain_s"]
    if idle:
        n = idle[0].extra["waiters"]
        t = Table("idle-waiters", f"{n} threads of one client waiting on a renewed lock",
                  [("commands while waiting", ",.0f"), ("pooled connections", ",.0f"),
                   ("pub/sub connections", ",.0f"), ("drain s", ".2f")])  # fmt: skip
        for m in idle:
            t.add(m.subject, m.role, get("idle-waiters", m.subject, "idle_cmds"),
                  get("idle-waiters", m.subject, "connections"),
                  get("idle-waiters", m.subject, "pubsub_connections"), m.value)  # fmt: skip
        out.append(t)

    for path, title, single, raw1, raw5 in (
        ("redlock", "RedLock over 5 masters, sync acquire", "tenure Lock (1 master)",
         "raw SET NX PX (1 master)", "raw fan-out SET NX PX (5 masters)"),
        ("redlock-async", "RedLock over 5 masters, asyncio acquire", "tenure AsyncLock (1 master)",
         "raw asyncio SET NX PX (1 master)", "raw asyncio fan-out SET NX PX (5 masters)"),
    ):  # fmt: skip
        ms = [m for m in res.measurements if m.path == path and m.metric == "acquire_ms"]
        if not ms:
            continue
        one, r1, r5 = (get(path, s, "acquire_ms") for s in (single, raw1, raw5))
        like = one + (r5 - r1) if one is not None and r1 is not None and r5 is not None else None
        t = Table(path, title, [("median acquire ms", ".3f"), (TIMES + " 1-master Lock", ".2f"),
                                ("÷ like-for-like floor", ".2f")])  # fmt: skip
        for m in ms:
            t.add(m.subject, m.role, m.value, _ratio(m.value, one), _ratio(m.value, like))
        if like is not None:
            t.add(LIKE_FOR_LIKE, "floor", like, _ratio(like, one), 1.0)
        out.append(t)

    size = get("footprint", "tenure Lock", "bytes_per_lock")
    if size is not None:
        t = Table("footprint", "Server memory of one held Lock", [("bytes", ",.0f")])
        t.add("tenure Lock", "tenure", size)
        out.append(t)
    return out


LIKE_FOR_LIKE = "like-for-like floor: 1-master Lock + fan-out's extra"


def goals(res: Results) -> list[Goal]:
    """The goals of the waiting work, each from this run's figures alone."""
    out: list[Goal] = []
    get = res.get
    for path, subject in ((p, s) for p in CONTENDED for s in ("tenure Lock", "tenure FairLock")):
        procs = sorted({m.extra["procs"] for m in res.measurements if m.path == path})
        server = next((m.extra.get("server") for m in res.measurements if m.path == path), None)
        on = f" on {server}" if server else ""
        for n in procs:
            rate = get(path, subject, "acq_per_s", procs=n)
            prl = get(path, PRL, "acq_per_s", procs=n)
            j = get(path, subject, "jain", procs=n)
            med = get(path, subject, "wait_median_ms", procs=n)
            p99 = get(path, subject, "wait_p99_ms", procs=n)
            ratio, spread = _ratio(rate, prl), _ratio(p99, med)
            if ratio is None or j is None or spread is None:
                continue
            short = subject.removeprefix("tenure ")
            out.append(Goal(f"contended {short}{on}, P={n}: acq/s ÷ {PRL}", [
                ("", ratio, "≥ 1.0", ratio >= 1.0),
                ("Jain", j, "≥ 0.95", j >= 0.95),
                ("wait p99/median", spread, "≤ 10", spread <= 10),
            ]))  # fmt: skip
    for subject in ("tenure Lock", "tenure FairLock"):
        med = _ratio(get("handoff", subject, "median_ms"), get("handoff", PRL, "median_ms"))
        p99 = _ratio(get("handoff", subject, "p99_ms"), get("handoff", PRL, "p99_ms"))
        if med is not None and p99 is not None:
            out.append(Goal(f"handoff {subject.removeprefix('tenure ')} ÷ {PRL}", [
                ("median", med, "≤ 1.2", med <= 1.2), ("p99", p99, "≤ 2", p99 <= 2)]))  # fmt: skip
    sem = _ratio(get("semaphore-drain", "tenure Semaphore", "all_ms"),
                 get("semaphore-drain", "redis-semaphore", "all_ms"))  # fmt: skip
    if sem is not None:
        name = "semaphore, 100 waiters: drain ÷ redis-semaphore"
        out.append(Goal(name, [("", sem, "≤ 2", sem <= 2)]))
    last = get("latch", "tenure CountDownLatch", "last_ms")
    if last is not None and math.isfinite(last):
        name = "latch, 100 waiters: ms to the last wake-up"
        out.append(Goal(name, [("", last, "≤ 15", last <= 15)]))
    return out


# ---------------------------------------------------------------- runs merged
def _fmt(value: float, spec: str) -> str:
    if math.isnan(value):
        return DASH
    if math.isinf(value):
        return "did not finish"
    return format(value, spec)


def span(values: Sequence[float | None], spec: str) -> str:
    """``min-max`` (an en dash) of ``values`` as ``spec`` formats them; one value when both
    ends agree."""
    present = [v for v in values if v is not None]
    if not present:
        return ""
    finite = [v for v in present if math.isfinite(v)]
    if len(finite) < len(present):
        return _fmt(math.inf, spec) if not finite else f"{_fmt(min(finite), spec)}{DASH}never"
    lo, hi = _fmt(min(finite), spec), _fmt(max(finite), spec)
    return lo if lo == hi else f"{lo}{DASH}{hi}"


@dataclass
class Merged:
    key: str
    title: str
    headers: list[str]
    rows: list[tuple[str, str, list[str]]]  # (subject, role, cells)
    note: str = ""


def merge(runs: list[list[Table]]) -> list[Merged]:
    """One table per key, each cell the span of that cell over the runs that measured it."""
    order: dict[str, Table] = {}
    for run in runs:
        for t in run:
            order.setdefault(t.key, t)
    merged = []
    for key, first in order.items():
        same = [t for run in runs for t in run if t.key == key]
        subjects = dict.fromkeys(s for t in same for s in t.rows)
        rows = []
        for subject in subjects:
            role = next(t.rows[subject][0] for t in same if subject in t.rows)
            cells = []
            for i, (_, spec) in enumerate(first.columns):
                cells.append(span([t.rows[subject][1][i] for t in same if subject in t.rows], spec))
            rows.append((subject, role, cells))
        merged.append(Merged(key, first.title, [h for h, _ in first.columns], rows, first.note))
    return merged


def merge_goals(runs: list[list[Goal]]) -> list[tuple[str, str, str, str]]:
    """(goal, measured spans, bounds, met in k of n runs) per goal."""
    names = dict.fromkeys(g.name for run in runs for g in run)
    out = []
    for name in names:
        same = [g for run in runs for g in run if g.name == name]
        labels = [label for label, *_ in same[0].parts]
        measured, bounds = [], []
        for i, label in enumerate(labels):
            values = [g.parts[i][1] for g in same]
            text = span(values, ".2f")
            measured.append(f"{label} {text}" if label else text)
            bounds.append(same[0].parts[i][2])
        met = sum(g.met for g in same)
        out.append((name, " · ".join(measured), " · ".join(bounds), f"{met} of {len(same)}"))
    return out


# ---------------------------------------------------------------- rendering
ROLE_MARK = {"tenure": "**", "floor": "*", "peer": ""}


PLOTS = (
    (("uncontended", "uncontended-async"), "bench-uncontended.png", "Uncontended"),
    (("handoff", "crash-handoff"), "bench-handoff.png", "Handoff to a waiting client"),
    (
        tuple(f"contended{k}" for k in ("-2", "-4", "-8", "-commands", "-cpu", "-messages")),
        "bench-contended.png",
        "One lock, P processes",
    ),
    (
        tuple(f"contended-redis{k}" for k in ("-2", "-4", "-8", "-commands", "-cpu", "-messages")),
        "bench-contended-redis.png",
        "One lock, P processes, on redis-server",
    ),
    (
        ("semaphore-drain", "latch", "async-tasks", "idle-waiters"),
        "bench-waiters.png",
        "Many waiters",
    ),
    (("redlock", "redlock-async"), "bench-redlock.png", "RedLock over five masters"),
)
"""Each plot (bench/plot.py) and the tables it goes after in :func:`markdown`."""


def markdown(
    merged: list[Merged], goal_rows: list[tuple[str, str, str, str]], images: str | None = None
) -> str:
    """Markdown tables: tenure's subjects in bold, floors in italics, peers plain. With
    ``images`` (a directory as the page links it), each plot follows the last of its tables."""
    after: dict[str, str] = {}
    present = {t.key for t in merged}
    for keys, png, alt in PLOTS:
        last = [k for k in keys if k in present]
        if images is not None and last:
            after[last[-1]] = f"![{alt}]({images}/{png})"
    lines: list[str] = []
    if goal_rows:
        lines += ["#### Goals", "", "| goal | measured (range over runs) | target | met |",
                  "|---|---|---|---|"]  # fmt: skip
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in goal_rows]
        lines.append("")
    for t in merged:
        lines += [f"#### {t.title}", ""]
        if t.note:
            lines += [t.note, ""]
        lines.append("| | " + " | ".join(t.headers) + " |")
        lines.append("|---|" + "---:|" * len(t.headers))
        for subject, role, cells in t.rows:
            mark = ROLE_MARK[role]
            lines.append(f"| {mark}{subject}{mark} | " + " | ".join(cells) + " |")
        lines.append("")
        if t.key in after:
            lines += [after[t.key], ""]
    return "\n".join(lines)


def print_tables(
    merged: list[Merged], goal_rows: list[tuple[str, str, str, str]], console: Console
) -> None:
    style = {"tenure": "bold", "floor": "dim", "peer": ""}
    for t in merged:
        rt = RichTable(title=t.title, title_justify="left")
        rt.add_column("")
        for h in t.headers:
            rt.add_column(h, justify="right")
        for subject, role, cells in t.rows:
            rt.add_row(subject, *cells, style=style[role])
        console.print(rt)
    if goal_rows:
        rt = RichTable(title="Goals (each ratio within one run; range over runs)",
                       title_justify="left")  # fmt: skip
        for h in ("goal", "measured", "target", "met"):
            rt.add_column(h)
        for row in goal_rows:
            rt.add_row(*row)
        console.print(rt)
