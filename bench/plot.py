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


def _bars(ax: Any, found: dict[str, Any], unit: str, title: str, log: bool = False) -> bool:
    """Horizontal bars: median over runs, whiskers min-max. False (axis hidden) when empty."""
    if not found:
        ax.set_visible(False)
        return False
    names = list(found)
    meds = [statistics.median(found[n][1]) for n in names]
    lo = [m - min(found[n][1]) for m, n in zip(meds, names, strict=True)]
    hi = [max(found[n][1]) - m for m, n in zip(meds, names, strict=True)]
    ys = range(len(names))
    ax.barh(ys, meds, color=[COLORS[found[n][0]] for n in names], height=0.65,
            xerr=[lo, hi], error_kw={"ecolor": "#333333", "capsize": 3, "lw": 1})  # fmt: skip
    for y, m, h in zip(ys, meds, hi, strict=True):
        ax.text(m + h, y, f"  {m:,.3g}", va="center", fontsize=9)
    ax.set_yticks(list(ys), names, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(unit, fontsize=9)
    ax.set_title(title, fontsize=10, loc="left")
    if log:
        ax.set_xscale("log")
    ax.margins(x=0.25)
    ax.tick_params(axis="x", labelsize=8)
    return True


def _figure(rows: int, cols: int, width: float, height: float) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    return fig, axes.ravel()


def _save(fig: Any, out: Path, name: str, family: str, roles: set[str]) -> Path:
    from matplotlib.patches import Patch

    fig.suptitle(f"{family} ({MACHINE_NOTE})", fontsize=11, x=0.01, ha="left")
    handles = [Patch(color=COLORS[r], label=LABELS[r]) for r in COLORS if r in roles]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9,
               frameon=False, bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    path = out / f"{name}.png"
    fig.savefig(path, dpi=100)
    return path


def _roles(*found: dict[str, Any]) -> set[str]:
    return {role for f in found for role, _ in f.values()}


def plot(data: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []

    sync, aio = _values(data, "uncontended", "us"), _values(data, "uncontended-async", "us")
    if sync or aio:
        panels = [p for p in ((sync, "sync"), (aio, "asyncio")) if p[0]]
        fig, axes = _figure(1, len(panels), 6.5 * len(panels), 4.2)
        for ax, (found, label) in zip(axes, panels, strict=True):
            _bars(ax, found, "µs, median acquire + release", label)
        written.append(_save(fig, out, "bench-uncontended", "Uncontended acquire + release",
                             _roles(sync, aio)))  # fmt: skip

    med, p99 = _values(data, "handoff", "median_ms"), _values(data, "handoff", "p99_ms")
    if med:
        fig, axes = _figure(1, 2, 13, 3.8)
        _bars(axes[0], med, "ms from release() returning, log scale", "median", log=True)
        _bars(axes[1], p99, "ms from release() returning, log scale", "p99", log=True)
        written.append(_save(fig, out, "bench-handoff", "Handoff to a waiting client",
                             _roles(med)))  # fmt: skip

    runs = data["runs"]
    procs = sorted({m["extra"]["procs"] for run in runs for m in run if m["path"] == "contended"})
    if procs:
        fig, axes = _figure(1, 3, 15, 5.0)
        seen: dict[str, str] = {}
        for ax, (metric, label, log) in zip(axes, (
            ("acq_per_s", "acquisitions/s", False),
            ("jain", "Jain's fairness index (1 = equal shares)", False),
            ("wait_p99_ms", "p99 wait, ms (log scale)", True),
        ), strict=True):  # fmt: skip
            per_p = [_values(data, "contended", metric, procs=p) for p in procs]
            subjects = list(dict.fromkeys(s for f in per_p for s in f))
            count = {"tenure": 0, "peer": 0, "floor": 0}
            for subject in subjects:
                role = next(f[subject][0] for f in per_p if subject in f)
                shade = SHADES[role][count[role] % len(SHADES[role])]
                count[role] += 1
                xs = [p for p, f in zip(procs, per_p, strict=True) if subject in f]
                vals = [f[subject][1] for f in per_p if subject in f]
                ys = [statistics.median(v) for v in vals]
                ax.plot(xs, ys, LINE[role], marker="o", color=shade, label=subject,
                        lw=2.2 if role == "tenure" else 1.4)  # fmt: skip
                ax.fill_between(xs, [min(v) for v in vals], [max(v) for v in vals],
                                color=shade, alpha=0.15, lw=0)  # fmt: skip
                seen[subject] = role
            ax.set_xticks(procs, [f"P={p}" for p in procs])
            ax.set_title(label, fontsize=10, loc="left")
            if log:
                ax.set_yscale("log")
            if metric == "jain":
                ax.set_ylim(0, 1.05)
            ax.grid(alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.suptitle(f"One lock, P processes, a GET + SET in each hold ({MACHINE_NOTE})",
                     fontsize=11, x=0.01, ha="left")  # fmt: skip
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=9,
                   frameon=False)  # fmt: skip
        rows_of_legend = math.ceil(len(labels) / 4)
        fig.tight_layout(rect=(0, 0.045 * rows_of_legend + 0.02, 1, 0.94))
        path = out / "bench-contended.png"
        fig.savefig(path, dpi=100)
        written.append(path)

    sem = _values(data, "semaphore-drain", "all_ms")
    latch = _values(data, "latch", "last_ms")
    idle = _values(data, "idle-waiters", "drain_s")
    tasks = _values(data, "async-tasks", "cmds_per_acq")
    panels = [
        (f, unit, title)
        for f, unit, title in (
            (sem, "ms until all 100 are done", "1-permit semaphore, 100 waiting threads"),
            (latch, "ms from count_down() to the last wait()", "latch, 100 waiting threads"),
            (idle, "s until each waiter held once", "lock, 500 waiting threads: drain"),
            (tasks, "server commands per acquisition", "lock, 1,000 asyncio tasks"),
        )
        if f
    ]
    if panels:
        fig, axes = _figure(math.ceil(len(panels) / 2), 2, 13, 3.4 * math.ceil(len(panels) / 2))
        for ax, (found, unit, title) in zip(axes, panels, strict=False):
            _bars(ax, found, unit, title)
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
        written.append(_save(fig, out, "bench-waiters", "Many waiters",
                             _roles(*(f for f, _, _ in panels))))  # fmt: skip

    red, ared = _values(data, "redlock", "acquire_ms"), _values(data, "redlock-async", "acquire_ms")
    if red or ared:
        panels = [p for p in ((red, "sync"), (ared, "asyncio")) if p[0]]
        fig, axes = _figure(len(panels), 1, 10, 3.2 * len(panels))
        for ax, (found, label) in zip(axes, panels, strict=True):
            _bars(ax, found, "ms, median acquire", label)
        written.append(_save(fig, out, "bench-redlock", "RedLock and MultiLock over 5 masters",
                             _roles(red, ared)))  # fmt: skip
    plt.close("all")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("json", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    args = parser.parse_args()
    for path in plot(json.loads(args.json.read_text()), args.out):
        print(path)


if __name__ == "__main__":
    main()
