"""Plots of a bench run, from its JSON (``bench/run.py --json FILE``), without re-running.

    python bench/plot.py results.json [--out docs/img]

Writes one PNG per path family: bench-uncontended, bench-handoff, bench-contended,
bench-waiters, bench-redlock. Each bar is the median over the runs, its whisker the range.
tenure is drawn in blue, peers in orange, floors in grey. Needs matplotlib (the bench extra).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import MACHINE_NOTE

COLORS = {"tenure": "#1f5fa8", "peer": "#e8871e", "floor": "#a0a0a0"}
LABELS = {"tenure": "tenure", "peer": "peer library", "floor": "floor (least code)"}
# Lines of the contended plot: tenure solid, peers dashed, floors dotted; one hue per subject.
LINE = {"tenure": "-", "peer": "--", "floor": ":"}
SHADES = {
    "tenure": ["#1f5fa8", "#5fa8e8", "#0b3566"],
    "peer": ["#e8871e", "#c0392b", "#8e44ad", "#7f6000"],
    "floor": ["#707070", "#b0b0b0"],
}


def _values(data: dict[str, Any], path: str, metric: str, **match: Any) -> dict[str, Any]:
    """{subject: (role, [value per run])} of ``metric`` on ``path``, in first-seen order."""
    out: dict[str, Any] = {}
    for run in data["runs"]:
        for m in run:
            if (
                m["path"] == path
                and m["metric"] == metric
                and all(m["extra"].get(k) == v for k, v in match.items())
                and math.isfinite(m["value"])
            ):
                out.setdefault(m["subject"], (m["role"], []))[1].append(m["value"])
    return out


def _plain(axis: Any) -> None:
    """Log-scale ticks as plain numbers (0.1, 1, 10), minor ticks unlabelled."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _bars(ax: Any, found: dict[str, Any], unit: str, title: str, log: bool = False) -> None:
    """Horizontal bars: median over runs, whiskers min-max."""
    names = list(found)
    meds = [statistics.median(found[n][1]) for n in names]
    lo = [m - min(found[n][1]) for m, n in zip(meds, names, strict=True)]
    hi = [max(found[n][1]) - m for m, n in zip(meds, names, strict=True)]
    ys = range(len(names))
    ax.barh(ys, meds, color=[COLORS[found[n][0]] for n in names], height=0.7,
            xerr=[lo, hi], error_kw={"ecolor": "#333333", "capsize": 3, "lw": 1})  # fmt: skip
    for y, m, h in zip(ys, meds, hi, strict=True):
        ax.text(m + h, y, f"  {m:,.3g}", va="center", fontsize=10)
    ax.set_yticks(list(ys), names, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel(unit, fontsize=10)
    ax.set_title(title, fontsize=11, loc="left", fontweight="bold")
    if log:
        ax.set_xscale("log")
        _plain(ax.xaxis)
    ax.margins(x=0.18)
    ax.tick_params(axis="x", labelsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


Panel = tuple[dict[str, Any], str, str, bool]  # (found, x label, title, log scale)

WIDTH = 8.0  # inches at 100 dpi: about the width of the docs' content column at 1,280 px


def _stack(out: Path, name: str, family: str, panels: list[Panel]) -> Path | None:
    """One panel per row (bars of every subject), a common legend under the last one."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    panels = [p for p in panels if p[0]]
    if not panels:
        return None
    heights = [0.9 + 0.3 * len(found) for found, *_ in panels]
    total = sum(heights) + 1.0
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(WIDTH, total), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for ax, (found, unit, title, log) in zip(axes[:, 0], panels, strict=True):
        _bars(ax, found, unit, title, log)
    roles = {role for found, *_ in panels for role, _ in found.values()}
    handles = [Patch(color=COLORS[r], label=LABELS[r]) for r in COLORS if r in roles]
    fig.suptitle(f"{family} ({MACHINE_NOTE})", fontsize=11, x=0.01, ha="left")
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=10,
               frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0.45 / total, 1, 1 - 0.35 / total))
    path = out / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _contended(data: dict[str, Any], out: Path, path: str, name: str) -> Path | None:
    import matplotlib.pyplot as plt

    runs = data["runs"]
    here = [m for run in runs for m in run if m["path"] == path]
    procs = sorted({m["extra"]["procs"] for m in here})
    server = next((m["extra"].get("server") for m in here if m["extra"].get("server")), None)
    if not procs:
        return None
    metrics = (
        ("acq_per_s", "acquisitions/s", False),
        ("jain", "Jain's fairness index (1 = equal shares)", False),
        ("wait_p99_ms", "p99 wait, ms (log scale)", True),
    )
    height = 10.0
    fig, axes = plt.subplots(len(metrics), 1, figsize=(WIDTH, height), sharex=True)
    labels: list[str] = []
    handles: list[Any] = []
    for ax, (metric, label, log) in zip(axes, metrics, strict=True):
        per_p = [_values(data, path, metric, procs=p) for p in procs]
        subjects = list(dict.fromkeys(s for f in per_p for s in f))
        count = {"tenure": 0, "peer": 0, "floor": 0}
        for subject in subjects:
            role = next(f[subject][0] for f in per_p if subject in f)
            shade = SHADES[role][count[role] % len(SHADES[role])]
            count[role] += 1
            xs = [p for p, f in zip(procs, per_p, strict=True) if subject in f]
            vals = [f[subject][1] for f in per_p if subject in f]
            (line,) = ax.plot(
                xs, [statistics.median(v) for v in vals], LINE[role], marker="o", color=shade,
                lw=2.4 if role == "tenure" else 1.5,
            )  # fmt: skip
            ax.fill_between(xs, [min(v) for v in vals], [max(v) for v in vals],
                            color=shade, alpha=0.15, lw=0)  # fmt: skip
            if subject not in labels:
                labels.append(subject)
                handles.append(line)
        ax.set_title(label, fontsize=11, loc="left", fontweight="bold")
        ax.tick_params(labelsize=9)
        if log:
            ax.set_yscale("log")
            _plain(ax.yaxis)
        if metric == "jain":
            lowest = min((min(v) for f in per_p for _, v in f.values()), default=0.5)
            ax.set_ylim(max(0.0, min(0.5, lowest - 0.05)), 1.02)
        ax.grid(alpha=0.3)
    axes[-1].set_xticks(procs, [f"P={p}" for p in procs], fontsize=10)
    axes[-1].set_xlim(min(procs) - 0.5, max(procs) + 0.5)
    where = f"{server}, 2 shared cores, loopback" if server else MACHINE_NOTE
    fig.suptitle(f"One lock, P processes, a GET + SET in each hold ({where})",
                 fontsize=11, x=0.01, ha="left")  # fmt: skip
    ncol = 3
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=10, frameon=False)
    legend_rows = math.ceil(len(labels) / ncol)
    fig.tight_layout(rect=(0, (0.3 * legend_rows + 0.15) / height, 1, 1 - 0.35 / height))
    png = out / f"{name}.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def _with_like_for_like(found: dict[str, Any], single: str, raw1: str, raw5: str) -> dict[str, Any]:
    """``found`` plus the like-for-like floor of each run: the 1-master Lock plus what five
    masters add to the raw SET NX PX (bench/report.py)."""
    if not all(k in found for k in (single, raw1, raw5)):
        return found
    runs = zip(found[single][1], found[raw1][1], found[raw5][1], strict=False)
    like = [one + (r5 - r1) for one, r1, r5 in runs]
    return {**found, "like-for-like floor": ("floor", like)}


def plot(data: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")

    out.mkdir(parents=True, exist_ok=True)
    written = [
        _stack(out, "bench-uncontended", "Uncontended acquire + release", [
            (_values(data, "uncontended", "us"), "µs, median acquire + release", "sync", False),
            (_values(data, "uncontended-async", "us"), "µs, median acquire + release",
             "asyncio", False),
        ]),
        _stack(out, "bench-handoff", "Handoff to a waiting client", [
            (_values(data, "handoff", "median_ms"), "ms from release() returning, log scale",
             "median", True),
            (_values(data, "handoff", "p99_ms"), "ms from release() returning, log scale",
             "p99", True),
            (_values(data, "crash-handoff", "median_ms"), "ms from the lease's end",
             "after the holder crashed: median", False),
        ]),
        _contended(data, out, "contended", "bench-contended"),
        _contended(data, out, "contended-redis", "bench-contended-redis"),
        _stack(out, "bench-waiters", "Many waiters", [
            (_values(data, "semaphore-drain", "all_ms"), "ms until all 100 are done",
             "1-permit semaphore, 100 waiting threads", False),
            (_values(data, "latch", "last_ms"), "ms from count_down() to the last wait()",
             "latch, 100 waiting threads", False),
            (_values(data, "idle-waiters", "drain_s"), "s until each waiter held once",
             "lock, threads waiting on a renewed lock: drain", False),
            (_values(data, "async-tasks", "cmds_per_acq"), "server commands per acquisition",
             "lock, asyncio tasks of one client", False),
        ]),
        _stack(out, "bench-redlock", "RedLock and MultiLock over 5 masters", [
            (_with_like_for_like(_values(data, "redlock", "acquire_ms"),
                                 "tenure Lock (1 master)", "raw SET NX PX (1 master)",
                                 "raw fan-out SET NX PX (5 masters)"),
             "ms, median acquire", "sync", False),
            (_with_like_for_like(_values(data, "redlock-async", "acquire_ms"),
                                 "tenure AsyncLock (1 master)", "raw asyncio SET NX PX (1 master)",
                                 "raw asyncio fan-out SET NX PX (5 masters)"),
             "ms, median acquire", "asyncio", False),
        ]),
    ]  # fmt: skip
    return [p for p in written if p is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("json", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    args = parser.parse_args()
    for path in plot(json.loads(args.json.read_text()), args.out):
        print(path)


if __name__ == "__main__":
    main()
