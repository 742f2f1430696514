"""Plots of a bench run, from its JSON (``bench/run.py --json FILE``), without re-running.

    python bench/plot.py results.json [--out docs/img]

Writes one PNG per path family: bench-uncontended, bench-handoff, bench-contended,
bench-waiters, bench-redlock. Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import MACHINE_NOTE

COLORS = {"tenure": "#1f77b4", "floor": "#9e9e9e", "peer": "#ff7f0e"}


def _pick(data: dict[str, Any], path: str, metric: str, **match: Any) -> list[dict[str, Any]]:
    return [
        m
        for m in data["measurements"]
        if m["path"] == path
        and m["metric"] == metric
        and all(m["extra"].get(k) == v for k, v in match.items())
    ]


def _bars(ax: Any, ms: list[dict[str, Any]], unit: str, title: str, log: bool = False) -> None:
    if not ms:
        ax.set_visible(False)
        return
    ms = [m for m in ms if math.isfinite(m["value"])]
    names = [m["subject"] for m in ms]
    values = [m["value"] for m in ms]
    bars = ax.barh(names, values, color=[COLORS[m["role"]] for m in ms])
    ax.bar_label(bars, labels=[f"{v:,.3g}" for v in values], padding=3, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_xscale("log")
    ax.margins(x=0.2)
    ax.tick_params(axis="y", labelsize=8)


def _legend(fig: Any) -> None:
    from matplotlib.patches import Patch

    fig.legend(
        handles=[Patch(color=c, label=k) for k, c in COLORS.items()],
        loc="lower right",
        fontsize=8,
        ncol=3,
    )


def _save(fig: Any, out: Path, name: str, family: str) -> Path:
    fig.suptitle(f"{family} — {MACHINE_NOTE}", fontsize=11)
    _legend(fig)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path = out / f"{name}.png"
    fig.savefig(path, dpi=100)
    return path


def plot(data: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    _bars(axes[0], _pick(data, "uncontended", "us"), "µs (median)", "sync acquire + release")
    _bars(
        axes[1],
        _pick(data, "uncontended-async", "us"),
        "µs (median)",
        "asyncio acquire + release",
    )
    written.append(_save(fig, out, "bench-uncontended", "Uncontended acquire + release"))

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    _bars(axes[0], _pick(data, "handoff", "median_ms"), "ms, log", "after release: median", True)
    _bars(axes[1], _pick(data, "handoff", "p90_ms"), "ms, log", "after release: p90", True)
    _bars(
        axes[2],
        _pick(data, "crash-handoff", "median_ms"),
        "ms after lease end",
        "after holder crash: median",
    )
    written.append(_save(fig, out, "bench-handoff", "Handoff latency"))

    procs = sorted({m["extra"]["procs"] for m in _pick(data, "contended", "jain")})
    if procs:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        subjects = list(dict.fromkeys(m["subject"] for m in _pick(data, "contended", "jain")))
        width = 0.8 / max(1, len(subjects))
        for col, (metric, label) in enumerate(
            (
                ("acq_per_s", "acquisitions/s"),
                ("jain", "Jain's fairness index"),
                ("cmds_per_acq", "server commands per acquisition"),
            )
        ):
            ax = axes[col]
            for i, subject in enumerate(subjects):
                xs, ys = [], []
                for j, p in enumerate(procs):
                    found = [
                        m
                        for m in _pick(data, "contended", metric, procs=p)
                        if m["subject"] == subject
                    ]
                    if found:
                        xs.append(j + i * width)
                        ys.append(found[0]["value"])
                role = "tenure" if subject.startswith("tenure") else "peer"
                ax.bar(
                    xs,
                    ys,
                    width,
                    label=subject,
                    color=COLORS[role],
                    alpha=1.0 - 0.55 * i / max(1, len(subjects) - 1),
                    edgecolor="black",
                    linewidth=0.4,
                )
            ax.set_xticks([j + width * (len(subjects) - 1) / 2 for j in range(len(procs))])
            ax.set_xticklabels([f"P={p}" for p in procs])
            ax.set_title(label, fontsize=10)
            if metric == "cmds_per_acq":
                ax.set_yscale("log")
            if metric == "jain":
                ax.set_ylim(0, 1.05)
        axes[0].legend(fontsize=7)
        written.append(_save(fig, out, "bench-contended", "One lock, P processes"))

    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    _bars(
        axes[0],
        _pick(data, "async-tasks", "cmds_per_acq"),
        "commands per acquisition, log",
        "asyncio tasks on one lock",
        True,
    )
    _bars(axes[1], _pick(data, "idle-waiters", "idle_cmds"), "commands", "idle waiters' traffic")
    _bars(axes[2], _pick(data, "idle-waiters", "connections"), "connections", "pooled connections")
    _bars(axes[3], _pick(data, "idle-waiters", "drain_s"), "seconds", "drain all waiters")
    written.append(_save(fig, out, "bench-waiters", "Many waiters"))

    fig, axes = plt.subplots(1, 2, figsize=(14, 4))
    _bars(axes[0], _pick(data, "redlock", "acquire_ms"), "ms (median)", "sync acquire")
    _bars(axes[1], _pick(data, "redlock-async", "acquire_ms"), "ms (median)", "asyncio acquire")
    written.append(_save(fig, out, "bench-redlock", "RedLock / MultiLock over 5 masters"))
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
