"""Election under faults, with real processes: a killed leader is replaced within its lease
+ 1 s, terms keep increasing across leader kills and restarts of a server with AOF, and no
two processes act as leader at once while leaders are paused (SIGSTOP) and killed (SIGKILL).

A worker acts as leader only while ``election.valid_for() > 0`` (its local clock says the
lease surely has not run out): each action is logged with the monotonic clock, which all
processes of one host share, so spans of different terms can be compared.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.servers import Server, valkey_binary
from support.twins import wait_until
from tenure.core.election import election_keys

LEADER = election_keys("sched")[0]

# A long fault run: deselected by default, run by .ci/run (`pytest -m long`).
pytestmark = pytest.mark.long

WORKER = """
import os, random, sys, time
import tenure
url, log, watchdog, mode = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
pid = os.getpid()

def write(*words):
    with open(log, "a") as f:
        f.write(" ".join(str(w) for w in (pid, *words)) + "\\n")

with tenure.Client(url, watchdog_timeout=watchdog, socket_timeout=1.0,
                   socket_connect_timeout=1.0) as client:
    election = client.election("sched")
    while True:
        try:
            term = election.campaign(str(pid), timeout=30)
        except tenure.BackendError:
            time.sleep(0.05)
            continue
        if term is None:
            continue
        write("elected", term, time.monotonic())
        hold = random.uniform(0.05, 0.3) if mode == "cycle" else float("inf")
        start = time.monotonic()
        while election.valid_for() > 0 and time.monotonic() - start < hold:
            write("act", term, time.monotonic())
            time.sleep(0.01)
        try:
            election.resign()
        except tenure.LockError:
            pass
"""


@pytest.fixture
def aof_server() -> Iterator[Server]:
    srv = Server(valkey_binary(), "--appendonly", "yes", "--appendfsync", "always").start()
    yield srv
    srv.stop()


class Workers:
    """Worker processes writing to one log."""

    def __init__(self, url: str, log: Path, watchdog: float) -> None:
        self.url, self.log, self.watchdog = url, log, watchdog
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, mode: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, self.url, str(self.log), str(self.watchdog), mode]
        )
        self.procs[proc.pid] = proc
        return proc

    def lines(self, word: str) -> list[tuple[int, int, float]]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[1] == word:
                out.append((int(parts[0]), int(parts[2]), float(parts[3])))
        return out

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait()


def spans(acts: list[tuple[int, int, float]]) -> list[tuple[float, float, int, int]]:
    """(first act, last act, term, pid) per leadership, by start."""
    by: dict[tuple[int, int], list[float]] = {}
    for pid, term, at in acts:
        by.setdefault((pid, term), []).append(at)
    return sorted((min(t), max(t), term, pid) for (pid, term), t in by.items())


def overlaps(found: list[tuple[float, float, int, int]]) -> int:
    """Pairs of leaderships (different terms) whose acting spans overlap."""
    count = 0
    for i, (_, end, _, _) in enumerate(found):
        for other_start, _, _, _ in found[i + 1 :]:
            if other_start <= end:
                count += 1
    return count


def leader_pid(r) -> int | None:
    value = r.hget(LEADER, "value")
    return int(value) if value else None


def test_killed_leader_is_replaced_within_its_lease_plus_one_second(aof_server, tmp_path):
    watchdog = 1.0
    workers = Workers(aof_server.url, tmp_path / "log", watchdog)
    r = aof_server.client()
    try:
        workers.start("hold")
        for trial in range(3):
            workers.start("hold")
            assert wait_until(lambda: leader_pid(r) is not None, timeout=30)
            leader = leader_pid(r)
            assert wait_until(lambda n=trial: len(workers.lines("elected")) == n + 1, timeout=30)
            time.sleep(0.3)
            killed = time.monotonic()
            os.kill(leader, signal.SIGKILL)  # type: ignore[arg-type]
            workers.procs[leader].wait()  # type: ignore[index]
            assert wait_until(lambda n=trial: len(workers.lines("elected")) == n + 2, timeout=30)
            _, _, elected = workers.lines("elected")[-1]
            takeover = elected - killed
            print(f"takeover after a kill: {takeover:.3f} s (lease {watchdog} s)")
            assert takeover < watchdog + 1.0, takeover
        terms = [term for _, term, _ in workers.lines("elected")]
        assert terms == sorted(set(terms)), terms
    finally:
        workers.stop()


def test_terms_increase_across_leader_kills_and_aof_restarts(aof_server, tmp_path):
    workers = Workers(aof_server.url, tmp_path / "log", 0.5)
    r = aof_server.client()
    try:
        terms = []
        for kill in range(8):
            proc = workers.start("hold")
            assert wait_until(lambda p=proc.pid: leader_pid(r) == p, timeout=30)
            terms.append(int(r.hget(LEADER, "term")))
            proc.kill()
            proc.wait()
            if kill % 4 == 3:  # the server crashes too; the AOF has every INCR
                aof_server.kill()
                aof_server.start()  # same port: the clients reconnect
            else:
                assert wait_until(lambda: not r.exists(LEADER), timeout=10)
        assert len(terms) == 8
        assert terms == sorted(set(terms)), terms  # strictly increasing, none repeated
    finally:
        workers.stop()


def test_no_two_leaders_while_leaders_are_paused_and_killed(aof_server, tmp_path):
    watchdog = 0.6
    workers = Workers(aof_server.url, tmp_path / "log", watchdog)
    r = aof_server.client()
    rng = random.Random(25)
    faults = {"pause": 0, "kill": 0}
    try:
        for _ in range(3):
            workers.start("cycle")
        end = time.monotonic() + 12
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.2, 0.6))
            pid = leader_pid(r)
            if pid is None or pid not in workers.procs or workers.procs[pid].poll() is not None:
                continue  # vacant, or a killed leader whose lease has not run out yet
            if rng.random() < 0.5:
                os.kill(pid, signal.SIGSTOP)  # past its lease: another leads meanwhile
                time.sleep(watchdog + rng.uniform(0.1, 0.5))
                os.kill(pid, signal.SIGCONT)
                faults["pause"] += 1
            else:
                os.kill(pid, signal.SIGKILL)
                workers.procs[pid].wait()
                workers.start("cycle")
                faults["kill"] += 1
    finally:
        workers.stop()
    found = spans(workers.lines("act"))
    terms = [term for _, _, term, _ in found]
    print(f"faults {faults}; leaderships {len(found)}; overlaps {overlaps(found)}")
    assert faults["pause"] >= 3, faults
    assert faults["kill"] >= 3, faults
    assert len(found) >= 10
    assert overlaps(found) == 0
    assert terms == sorted(set(terms)), terms
