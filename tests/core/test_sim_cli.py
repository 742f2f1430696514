"""The simulator's command (``python -m tenure.testing.sim``, docs/testing.md), run in the
test's process: a clean run exits 0 and counts what it ran; a planted bug exits 1 naming the
seed and the broken rule, and replaying that one seed (``--seed N``) prints the same report.
The rules themselves, seed budgets and planted bugs one by one: tests/test_sim.py."""

from __future__ import annotations

import re

import pytest

from tenure.testing import sim

SUMMARY = re.compile(r"(\d+) seeds passed, (\d+) acquisitions and (\d+) elections in ")


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = sim.main(list(argv))
    return status, capsys.readouterr().out


def test_a_clean_run_of_every_model_exits_0_and_counts_what_it_ran(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Locks, ReadWriteLocks (--rwlocks -1: 1 or 2 names) and elections, under every fault
    # and holds deleted on the server (--drops): the documented commands, short.
    status, out = _main(
        capsys, "--seeds", "2", "--seconds", "10", "--rwlocks", "-1", "--drops", "0.5"
    )
    assert status == 0, out
    found = SUMMARY.match(out)
    assert found is not None, out
    seeds, acquisitions, elections = map(int, found.groups())
    assert seeds == 2
    assert acquisitions > 0  # the run did work, not an empty model
    assert elections > 0
    assert "broke a rule" not in out


def test_a_planted_bug_exits_1_and_its_seed_replays_the_same_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plant = ("--plant", "campaign_without_leader_check", "--seconds", "10")
    status, out = _main(capsys, "--seeds", "20", *plant)
    assert status == 1, out
    found = re.search(r"^seed (\d+) broke a rule: two leaders: ", out, re.MULTILINE)
    assert found is not None, out
    seed = found.group(1)
    again, replayed = _main(capsys, "--seed", seed, *plant)
    assert again == 1
    # The first line has the real time the run took; the rest is the rule and history.
    assert replayed.split("\n", 1)[1] == out.split("\n", 1)[1]


def test_a_skipped_rule_is_not_checked(capsys: pytest.CaptureFixture[str]) -> None:
    plant: tuple[str, ...] = (
        "--first",
        "0",
        "--seeds",
        "1",
        "--seconds",
        "10",
        "--no-faults",
        "--workers",
        "0",
    )
    plant += ("--plant", "campaign_without_leader_check")
    status, out = _main(capsys, *plant)
    assert status == 1, out
    assert "two leaders" in out, out
    status, out = _main(capsys, *plant, "--skip", "two leaders")
    assert status == 0, out  # the plant breaks that rule only
    assert out.startswith("1 seeds passed, 0 acquisitions and "), out  # no workers: no locks
