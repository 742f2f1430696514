"""``tenure status | list | force-release``, ``--help`` and the missing-extra hint, run as the
real entry point in a subprocess against the session server."""

from __future__ import annotations

import json
import sys
import time

import pytest

import tenure
from support.twins import spawn, wait_until
from tenure import keys

from .runner import ENTRY, tenure_cmd

LASTS = 600.0
"""Seconds that what a test sets up lasts (leases, a waiter's wait, the clients'
``watchdog_timeout``): longer than the test may run (pytest-timeout 120 s; on a loaded
machine each CLI run can take seconds). So while the CLI looks nothing runs out, and no
renewal pass (each ``watchdog_timeout / 3``) rewrites a waiter's entry or writes a
client's registration."""


def make_every_kind(client: tenure.Client, other: tenure.Client, r) -> dict[str, str]:
    """One name of every kind, each held or set; name -> expected kind."""
    assert client.lock("k:lock").acquire(lease_time=LASTS)
    assert client.fenced_lock("k:fenced").acquire(lease_time=LASTS)
    assert client.read_write_lock("k:rw").read_lock().acquire(lease_time=LASTS)
    assert client.fair_lock("k:fair").acquire(lease_time=LASTS)
    # the layouts of docs/wire.md, written raw (the primitives may live on another branch)
    r.set("k:sem", 5)
    r.set("k:psem", 2)
    r.zadd(keys.permit_timeout_key("k:psem"), {bytes(range(16)): keys.PERMIT_NO_LEASE_SCORE})
    r.set("k:latch", 3)
    r.set("k:foreign", "not a count")
    return {
        "k:lock": "lock",
        "k:fenced": "fenced",
        "k:rw": "rw",
        "k:fair": "fair",
        "k:sem": "semaphore",
        "k:psem": "permit_expirable_semaphore",
        "k:latch": "semaphore",  # nobody waits: a latch looks like a semaphore
    }


def test_status_and_list_for_every_kind(server, r, make_client):
    client, other = make_client(watchdog_timeout=LASTS), make_client(watchdog_timeout=LASTS)
    expected = make_every_kind(client, other, r)
    # a fair waiter in the queue (it joins, then subscribes), and a latch waiter (a raw
    # subscriber)
    waiter = spawn(lambda: other.fair_lock("k:fair").acquire(timeout=LASTS))
    queue = keys.fair_queue_key("k:fair")
    assert wait_until(lambda: r.llen(queue) == 1)
    channel = keys.fair_waiter_channel("k:fair", r.lindex(queue, 0).decode())
    assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
    sub = r.pubsub()
    sub.subscribe(keys.latch_channel("k:latch"))
    assert wait_until(lambda: r.pubsub_numsub(keys.latch_channel("k:latch"))[0][1] == 1)
    expected["k:latch"] = "latch"
    try:
        before = {k: (r.dump(k), r.pttl(k) > 0) for k in r.keys("*")}
        for name, kind in expected.items():
            done = tenure_cmd("status", name, "--json", url=server.url)
            assert done.returncode == 0, done.stderr
            data = json.loads(done.stdout)
            assert data["kind"] == kind, (name, data)
        fair = json.loads(tenure_cmd("status", "k:fair", "--json", url=server.url).stdout)
        assert [q["client_id"] for q in fair["queue"]] == [other.client_id]
        assert fair["waiters"] == 1
        assert fair["holders"][0]["client_id"] == client.client_id
        fenced = json.loads(tenure_cmd("status", "k:fenced", "--json", url=server.url).stdout)
        assert fenced["fencing_token"] == 1
        psem = json.loads(tenure_cmd("status", "k:psem", "--json", url=server.url).stdout)
        assert psem["permits"] == 2
        assert psem["permit_leases"][0]["remaining_lease"] is None
        latch = json.loads(tenure_cmd("status", "k:latch", "--json", url=server.url).stdout)
        assert latch["count"] == 3
        assert latch["waiters"] == 1

        table = tenure_cmd("status", "k:lock", url=server.url)
        assert table.returncode == 0
        assert client.client_id in table.stdout
        assert "lock" in table.stdout
        assert "x1" in table.stdout

        listed = tenure_cmd("list", "--json", url=server.url)
        assert listed.returncode == 0, listed.stderr
        kinds = {item["name"]: item["kind"] for item in json.loads(listed.stdout)}
        assert kinds == expected  # the foreign key and the auxiliary keys are not names
        only = tenure_cmd("list", "k:f*", "--json", url=server.url)
        assert {i["name"] for i in json.loads(only.stdout)} == {"k:fenced", "k:fair"}
        plain = tenure_cmd("list", url=server.url)
        assert plain.returncode == 0
        assert "7 names" in plain.stdout
        # nothing was changed by looking
        assert {k: (r.dump(k), r.pttl(k) > 0) for k in r.keys("*")} == before
    finally:
        sub.close()
        client.fair_lock("k:fair").force_release()
        assert waiter.result() is True


def test_list_shows_a_free_fenced_lock_by_its_token(server, r, client):
    lock = client.fenced_lock("ledger")
    assert lock.acquire()
    lock.release()
    done = tenure_cmd("list", "led*", "--json", url=server.url)
    (item,) = json.loads(done.stdout)
    assert item["name"] == "ledger"
    assert item["kind"] == "fenced"
    assert not item["held"]
    assert item["fencing_token"] == 1


def test_status_and_list_show_an_election(server, r, make_client):
    leader_client, other = make_client(name="scheduler-a"), make_client(name="scheduler-b")
    leading, waiting = leader_client.election("cron"), other.election("cron")
    term = leading.campaign("host-a:8080")
    queue = "{cron}:tenure_election_queue"
    candidate = spawn(lambda: waiting.campaign("host-b:8080", timeout=LASTS))
    assert wait_until(lambda: r.llen(queue) == 1)
    try:
        done = tenure_cmd("status", "cron", "--json", url=server.url)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["kind"] == "election"
        assert data["held"]
        assert data["term"] == term
        assert data["value"] == "host-a:8080"
        assert data["holders"][0]["client_id"] == leader_client.client_id
        assert [(q["client_id"], q["value"]) for q in data["queue"]] == [
            (other.client_id, "host-b:8080")
        ]
        table = tenure_cmd("status", "cron", url=server.url)
        assert table.returncode == 0, table.stderr
        for text in ("election", "leader", "scheduler-a", "host-a:8080", "candidate #1"):
            assert text in table.stdout, table.stdout
        assert "term" in table.stdout
        assert str(term) in table.stdout
        for pattern in ("cr*", "*"):  # by the election's own keys, named once
            listed = tenure_cmd("list", pattern, "--json", url=server.url)
            assert listed.returncode == 0, listed.stderr
            items = [i for i in json.loads(listed.stdout) if i["kind"] == "election"]
            assert [(i["name"], i["term"]) for i in items] == [("cron", term)]
        plain = tenure_cmd("list", "cr*", url=server.url)
        assert "election" in plain.stdout
        assert f"term {term}" in plain.stdout
        assert "1 candidate" in plain.stdout
        assert "1 candidates" not in plain.stdout
    finally:
        leading.resign()
        assert candidate.result() == term + 1
        waiting.resign()


def test_force_release_refuses_an_election(server, r, make_client):
    """tenure has no administrative step-down: force-release names the election and exits
    1, the leadership untouched (it said "released by its holder in the meantime", exit 0)."""
    leading = make_client(name="scheduler-a").election("cron")
    term = leading.campaign("host-a")
    try:
        done = tenure_cmd("force-release", "cron", "--yes", url=server.url)
        assert done.returncode == 1, done.stdout
        assert "is an election" in done.stderr, done.stderr
        assert "resign" in done.stderr
        assert "in the meantime" not in done.stdout + done.stderr
        assert leading.is_leader()
        assert leading.term == term
    finally:
        leading.resign()


def test_a_lock_and_an_election_sharing_a_name(server, r, make_client):
    """Both are listed; force-release releases the lock, says the election stays."""
    c = make_client(name="scheduler-a", watchdog_timeout=LASTS)
    leading, lock = c.election("cron"), c.lock("cron")
    term = leading.campaign("host-a")
    assert lock.acquire(lease_time=LASTS)
    try:
        listed = tenure_cmd("list", "cr*", "--json", url=server.url)
        assert listed.returncode == 0, listed.stderr
        found = [(i["name"], i["kind"]) for i in json.loads(listed.stdout)]
        assert found == [("cron", "lock"), ("cron", "election")], found
        election = json.loads(listed.stdout)[1]
        assert (election["term"], election["value"], election["held"]) == (term, "host-a", True)
        assert election["holders"][0]["client_id"] == c.client_id
        plain = tenure_cmd("list", "*", url=server.url)
        for kind in ("election", "lock"):
            assert kind in plain.stdout, plain.stdout
        assert f"term {term}" in plain.stdout
        status = tenure_cmd("status", "cron", url=server.url)
        for text in ("election", "host-a", f"{term}"):
            assert text in status.stdout, status.stdout
        shown = json.loads(tenure_cmd("status", "cron", "--json", url=server.url).stdout)
        assert "'cron' is also an election's name" in shown["notes"]
        done = tenure_cmd("force-release", "cron", "--yes", url=server.url)
        assert done.returncode == 0, done.stderr
        assert "released lock 'cron'" in done.stdout
        assert "election" in done.stdout + done.stderr
        assert not r.exists("cron")
        assert leading.is_leader()
    finally:
        leading.resign()


def test_force_release_wakes_a_waiter(server, r, make_client):
    holder, other = make_client(), make_client()
    assert holder.lock("stuck").acquire(lease_time=120)
    waiter = spawn(lambda: other.lock("stuck").acquire(timeout=60))
    assert wait_until(lambda: r.pubsub_numsub(keys.lock_channel("stuck"))[0][1] == 1)
    started = time.monotonic()
    done = tenure_cmd("force-release", "stuck", "--yes", url=server.url)
    assert done.returncode == 0, done.stderr
    assert waiter.result(timeout=10) is True
    assert time.monotonic() - started < 10  # woken by the release, not the 120 s lease
    assert holder.client_id in done.stdout
    assert "1 waiting client woken" in done.stdout
    assert other.lock("stuck").owned() is False  # owned by the waiter's thread, not this one
    assert other.inspect("stuck").holders[0].client_id == other.client_id


def test_force_release_asks_and_refuses_without_a_terminal(server, r, client):
    assert client.lock("keep").acquire(lease_time=60)
    done = tenure_cmd("force-release", "keep", url=server.url, stdin="y\n")
    assert done.returncode == 1
    assert "--yes" in done.stderr
    assert "not released" in done.stderr
    assert "Usage" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert client.lock("keep").locked()
    free = tenure_cmd("force-release", "nothing-here", "--yes", url=server.url)
    assert free.returncode == 0
    assert "not held" in free.stdout


def test_force_release_of_each_rw_side(server, r, client):
    rw = client.read_write_lock("cat")
    assert rw.write_lock().acquire(lease_time=60)
    done = tenure_cmd("force-release", "cat", "--yes", url=server.url)
    assert done.returncode == 0
    assert "(write)" in done.stdout
    assert not r.exists("cat")


def test_errors_are_one_line(server):
    done = tenure_cmd("status", "x", url="redis://127.0.0.1:1/0")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "cannot reach the server" in done.stderr


@pytest.mark.parametrize("command", ["status", "list", "force-release", "run", "doctor", "demo"])
def test_every_command_has_help_with_an_example(command):
    done = tenure_cmd(command, "--help")
    assert done.returncode == 0
    assert "Example" in done.stdout


@pytest.mark.parametrize("module", ["tenure", "tenure.cli"])
def test_python_dash_m_runs_the_same_cli(module):
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "force-release" in done.stdout
    assert "demo" in done.stdout


def test_missing_extra_says_how_to_install():
    import subprocess

    code = "import sys; sys.modules['click'] = None; from tenure.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "pip install 'tenure[cli]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert ENTRY  # the real entry point is what the other tests run
