"""The Lua scripts: loading and fragment splicing, cluster slots of renewal batches, and that
every key a script touches was passed to it in KEYS (checked on a real server with MONITOR)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources

import pytest
import redis
from redis.crc import key_slot as redis_py_key_slot

import tenure
from support.monitor import Monitor
from support.servers import Server
from tenure import fencing, keys, scripts
from tenure.core import watchdog
from tenure.core.effects import Call
from tenure.core.holds import HoldTable

LEASE = 0.6
"""Watchdog timeout of the clients below: a renewal pass every 0.2 s."""


# ------------------------------------------------------------------ loading and splicing
def test_every_script_loads_with_its_fragments_spliced(r: redis.Redis) -> None:
    names = scripts.names()
    assert "lock_acquire" in names
    assert not any(n.startswith("_") for n in names)
    for name in names:
        script = scripts.get(name)
        assert "@include" not in script.source, name
        assert r.script_load(script.source) == script.sha, name  # compiles on the server


def test_every_fragment_is_used_by_a_script() -> None:
    fragments = scripts.fragments()
    assert {"renew_batch", "rw_readers", "fair_queue"} <= set(fragments)
    for fragment in fragments:
        if fragment == "reconcile_guard":  # put in front of release scripts by guarded()
            assert scripts.guarded(scripts.get("lock_release")).source.startswith(
                scripts.fragment(fragment)
            )
            continue
        text = scripts.fragment(fragment).strip()
        users = [n for n in scripts.names() if text in scripts.get(n).source]
        assert users, f"fragment _{fragment}.lua is used by no script"


def test_guarded_release_scripts_compile(r: redis.Redis) -> None:
    for name in ("lock_release", "fair_release", "rw_read_release", "rw_write_release"):
        script = scripts.guarded(scripts.get(name))
        assert r.script_load(script.source) == script.sha, name


def test_shared_blocks_exist_once() -> None:
    queue = scripts.fragment("fair_queue").strip()
    for name in ("fair_acquire", "fair_release", "fair_force_release", "fair_turn"):
        assert queue in scripts.get(name).source, name
    for name in ("fair_turn", "fair_refresh"):
        raw = (resources.files(scripts) / f"{name}.lua").read_text("utf-8")
        assert "lpop" not in raw, name  # dropping dead heads lives in the fragment only


def test_splice_replaces_only_whole_include_lines() -> None:
    spliced = scripts.splice("a\n  -- @include server_time\nb -- @include server_time\n")
    assert spliced.startswith("a\n-- now_ms()")
    assert spliced.endswith("b -- @include server_time\n")
    with pytest.raises(FileNotFoundError):
        scripts.splice("-- @include no_such_fragment\n")
    with pytest.raises(ValueError, match="is a fragment"):
        scripts.get("_server_time")


@pytest.mark.parametrize(
    ("held_by", "retry", "reply", "inner"),
    [
        (None, False, None, {"pttl": 1, "hincrby": 1, "pexpire": 1}),  # free: no hash read
        (None, True, None, {"pttl": 1, "hincrby": 1, "pexpire": 1}),
        ("other", False, "ttl", {"pttl": 1, "hmget": 1}),  # first attempt: kind, re-entry
        ("other", True, "ttl", {"pttl": 1}),  # a waiter's retry: one call
        ("me", False, None, {"pttl": 1, "hmget": 1, "hincrby": 1, "pexpire": 1}),  # re-entry
    ],
)
def test_lock_acquire_calls_per_outcome(
    r: redis.Redis, held_by: str | None, retry: bool, reply: str | None, inner: dict[str, int]
) -> None:
    """Issue 14: every client's waiter retries on each unlock, so the server work of a
    refused retry is counted: PTTL alone."""
    name = f"calls:{held_by}:{retry}"
    if held_by is not None:
        r.hset(name, held_by, 1)
        r.pexpire(name, 20000)
    script = scripts.get("lock_acquire")
    r.script_load(script.source)

    def stats() -> dict[str, int]:
        info = r.info("commandstats")
        return {k[len("cmdstat_"):]: int(v["calls"]) for k, v in info.items()}

    before = stats()
    got = r.evalsha(script.sha, 1, name, 30000, "me", *([1] if retry else []))
    after = stats()
    calls = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    calls.pop("info", None)
    assert calls.pop("evalsha") == 1
    assert calls == inner
    if reply is None:
        assert got is None
        assert r.hget(name, "me") == (b"2" if held_by == "me" else b"1")
    else:
        assert 0 < got <= 20000
        assert r.hget(name, "me") is None


# ------------------------------------------------------------------ slots and batches
@pytest.mark.parametrize("key", ["lock", "a{b}c", "{}x", "x{}", "{a}{b}", "x{y", "{ab", "é{ü}"])
def test_key_slot_is_the_cluster_rule(key: str) -> None:
    assert keys.key_slot(key) == redis_py_key_slot(key.encode())
    derived = [keys.fair_timeout_key(key), keys.rw_read_timeout_key(key, "u:1", 3)]
    same = all(keys.key_slot(k) == keys.key_slot(key) for k in derived)
    # Redisson's naming rule gives one slot per lock unless the name holds a '{' without a
    # non-empty tag after it ("{}x", "x{y"): then the layout itself spans slots.
    assert same == (key.count("{") == 0 or keys.slot_tag(key) != key)


@dataclass
class FakeLock:
    """A hold's lock as the watchdog sees it: renewal keys, loss reports."""

    key: str
    lost: list[str] = field(default_factory=list)

    def hold_lost(self, owner: str) -> None:
        self.lost.append(owner)

    def renewal_keys(self, owner: str, holds: int) -> list[str]:
        return [self.key, *keys.rw_read_timeout_keys(self.key, owner, holds)]

    def renewal_channel(self) -> str:
        return f"channel:{self.key}"

    def hold_in_doubt(self, owner: str) -> None:
        pass


def test_renewal_batches_layout_and_slots() -> None:
    table = HoldTable()
    script, other = scripts.get("rw_read_renew"), scripts.get("lock_renew")
    for i in range(250):
        lock = FakeLock(f"k{i % 7}")
        for _ in range(i % 3 + 1):
            renewal = script if i % 2 else other
            table.push(lock, lock.key, f"u:{i}", f"u:{i}", renewal, None, applied=30.0, sent=0.0)
    holds = table.watchdog_holds()
    plain = list(watchdog.batches(holds))
    assert sum(len(b) for _, b in plain) == 250
    assert len(plain) == 4
    sloted = list(watchdog.batches(holds, by_slot=True))
    groups = {(h.renewal, keys.key_slot(h.key)) for h in holds}
    assert sum(len(b) for _, b in sloted) == 250
    assert len(sloted) == len(groups) > 7
    for script_of_batch, batch in sloted:
        assert len(batch) <= watchdog.BATCH
        assert {h.renewal for h in batch} == {script_of_batch}
        assert len({keys.key_slot(k) for h in batch for k in h.renewal_keys()}) == 1
    call = watchdog.renewal_call(script, holds[:3], 600)
    assert call.args[0] == 600
    at = 0
    triples = zip(call.args[1::3], call.args[2::3], call.args[3::3], strict=True)
    for hold, (owner, count, channel) in zip(holds[:3], triples, strict=True):
        assert owner == hold.field
        assert call.keys[at] == hold.key
        assert channel == hold.renewal_channel() == f"channel:{hold.key}"
        assert list(call.keys[at : at + int(count)]) == hold.renewal_keys()
        at += int(count)
    assert at == len(call.keys)


# ------------------------------------------------------------------ keys only from KEYS
@dataclass
class ScriptRun:
    """One EVALSHA seen by MONITOR and the commands its script ran."""

    name: str
    keys: list[str]
    inner: list[list[str]] = field(default_factory=list)


def script_runs(lines: list[tuple[str, str]]) -> Iterator[ScriptRun]:
    """Group MONITOR lines: a script's commands follow the EVALSHA that ran it (both servers
    feed MONITOR before executing a command). Scripts were loaded beforehand, so no EVAL."""
    by_sha = {scripts.get(n).sha: n for n in scripts.names()}
    run: ScriptRun | None = None
    for client_type, command in lines:
        args = command.split(" ")
        if client_type == "lua":
            assert run is not None, f"a script command without its script: {command}"
            run.inner.append(args)
            continue
        if run is not None:
            yield run
            run = None
        assert args[0].upper() != "EVAL", "scripts were preloaded; EVAL is unexpected"
        if args[0].upper() == "EVALSHA" and args[1] in by_sha:
            count = int(args[2])
            run = ScriptRun(by_sha[args[1]], args[3 : 3 + count])
    if run is not None:
        yield run


def scenario(make_client: object, name: str) -> None:
    """Every lock kind's acquire, renew, release, give-up and force release on ``name``."""
    a: tenure.Client = make_client(watchdog_timeout=LEASE)  # type: ignore[operator]
    b: tenure.Client = make_client(watchdog_timeout=LEASE)  # type: ignore[operator]

    def renewed() -> None:
        time.sleep(LEASE / 3 * 1.6)  # at least one renewal pass

    lock = a.lock(f"lk{name}")
    assert lock.acquire()
    assert lock.acquire(lease_time=5)
    renewed()
    lock.release()
    lock.release()
    assert lock.acquire()
    assert lock.force_release()
    # A targeted wake-up passed on (what a client that cannot use one runs), as it is sent.
    wake = lock.core.subscription(a._runner.owner(), None).relay
    assert wake is not None
    assert wake.script.name == "lock_wake"
    a.redis.evalsha(wake.script.sha, len(wake.keys), *wake.keys, *wake.args)
    # The back-up look after an unlock that woke one other client alone, as it is sent.
    check = next(lock.core._wake_check())
    assert isinstance(check, Call)
    assert check.script.name == "lock_wake_check"
    a.redis.evalsha(check.script.sha, len(check.keys), *check.keys, *check.args)
    leased = a.lock(f"lx{name}")
    assert leased.acquire(lease_time=5)
    leased.extend(1)
    guarded = "{" + keys.slot_tag(f"lx{name}") + "}:state"
    assert leased.execute_if_held("SET", guarded, "v")  # a guarded write: its key declared
    leased.release()

    spin = a.spin_lock(f"sp{name}")
    assert spin.acquire()
    assert spin.acquire()
    spin.release()
    spin.release()
    assert spin.acquire()
    assert spin.force_release()

    election = a.election(f"el{name}")
    assert election.campaign("v") == 1
    assert b.election(f"el{name}").campaign("w", timeout=0) is None  # joins, gives up
    renewed()
    assert election.proclaim("v2") == 1
    assert election.leader() is not None
    election.resign()

    fenced = a.fenced_lock(f"fe{name}")
    assert fenced.acquire()
    token = fenced.token
    assert token is not None
    assert isinstance(a.redis, redis.Redis)  # one server
    assert fencing.fenced_write(a.redis, f"res{name}", token, "v")
    fenced.release()

    fair = a.fair_lock(f"fa{name}")
    assert fair.acquire()
    t = threading.Thread(target=lambda: b.fair_lock(f"fa{name}").acquire(timeout=0.5))
    t.start()  # queues behind the holder, then gives up
    renewed()
    t.join()
    fair.release()
    assert fair.acquire(lease_time=5)
    fair.extend(1)
    fair.release()
    assert fair.acquire()
    waiter = threading.Thread(target=lambda: b.fair_lock(f"fa{name}").acquire(timeout=2))
    waiter.start()
    time.sleep(0.1)
    assert fair.force_release()
    waiter.join()
    b.fair_lock(f"fa{name}").force_release()

    rw, other = a.read_write_lock(f"rw{name}"), b.read_write_lock(f"rw{name}")
    read, write = rw.read_lock(), rw.write_lock()
    assert read.acquire(lease_time=5)
    assert read.acquire(lease_time=5)
    read.extend(1)
    renewed()  # lease_time read holds: the pass re-asserts their expiry (rw_read_reassert)
    read.release()
    read.release()
    assert read.acquire()
    assert read.acquire(lease_time=5)
    assert other.read_lock().acquire()  # another reader: declarations of all readers
    assert a.inspect(f"rw{name}").kind == "rw"  # read-only, read-hold keys declared
    renewed()
    read.release()
    read.release()
    other.read_lock().release()
    assert write.acquire()
    assert read.acquire()
    renewed()
    write.release()  # downgrade to the caller's read hold
    assert other.read_lock().acquire()
    read.release()
    assert read.acquire()
    assert read.force_release()
    with pytest.raises(tenure.LockLostError):  # its read hold force-released: no upgrade
        write.acquire()
    assert write.acquire()
    assert write.force_release()
    writer = a.read_write_lock(f"rx{name}").write_lock()
    assert writer.acquire(lease_time=5)
    writer.extend(1)
    writer.release()

    for sem in (a.semaphore(f"se{name}"), a.permit_expirable_semaphore(f"ps{name}")):
        assert sem.try_set_permits(2)
        sem.set_permits(3)
        sem.add_permits(1)
        assert sem.available_permits() == 4
        assert sem.drain_permits() == 4
        sem.add_permits(2)
    plain = a.semaphore(f"se{name}")
    assert plain.acquire(2)
    plain.release(2)
    psem = a.permit_expirable_semaphore(f"ps{name}")
    permit = psem.acquire()
    assert permit is not None
    assert psem.remaining_lease(permit)
    renewed()
    assert psem.update_lease_time(permit, 5)
    psem.release(permit)

    latch = a.count_down_latch(f"la{name}")
    assert latch.try_set_count(1)
    latch.count_down()
    assert latch.try_set_count(1)
    assert latch.delete()


@pytest.mark.parametrize("name", ["plain", "{tag}ged"])
def test_scripts_touch_only_keys_passed_in_KEYS(
    name: str, server: Server, r: redis.Redis, make_client: object
) -> None:
    """Every command a script runs may only touch keys of its KEYS (docs/internals.md): checked on
    the real commands, as MONITOR shows them, with the server's own COMMAND GETKEYS."""
    for script_name in scripts.names():
        r.script_load(scripts.get(script_name).source)
    monitor = Monitor(server)
    try:
        scenario(make_client, name)
    finally:
        lines = monitor.stop()
    runs = list(script_runs(lines))
    seen = {run.name for run in runs}
    assert seen == set(scripts.names()), f"not exercised: {set(scripts.names()) - seen}"
    stale = [run for run in runs if any(c[0].lower() == "hgetall" for c in run.inner)]
    assert stale, "no script checked its declaration of readers against the hash"
    for run in runs:
        for command in run.inner:
            try:
                touched = r.command_getkeys(*command)
            except redis.ResponseError:  # no key arguments (TIME, PUBLISH...)
                continue
            touched = [k.decode() if isinstance(k, bytes) else k for k in touched]
            undeclared = [k for k in touched if k not in run.keys]
            assert not undeclared, f"{run.name}: {' '.join(command)} touches {undeclared}"
