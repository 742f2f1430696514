"""The server work of an uncontended ReadWriteLock pair, counted on a real server (issue 23:
no path slower than before the one wake-up per unlock; speed itself is measured in
bench/rw_uncontended_server.py, never asserted). Each script's free grant and freeing
release end before its fragments: a few commands and no function defined."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

import tenure
from tenure import keys


def stats(r: redis.Redis) -> dict[str, int]:
    info = r.info("commandstats")
    return {k[len("cmdstat_") :]: int(v["calls"]) for k, v in info.items()}


def counted(r: redis.Redis, step: Callable[[], object]) -> dict[str, int]:
    """The commands one client call ran inside its script (one EVALSHA)."""
    before = stats(r)
    step()
    after = stats(r)
    calls = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    calls.pop("info", None)
    assert calls.pop("evalsha") == 1
    return calls


RELEASED = {"hmget": 1, "hlen": 1, "exists": 1, "publish": 1, "del": 1}
"""A freeing release with no wake queue, heard by nobody."""


@pytest.mark.parametrize(
    ("side", "granted"),
    [
        ("write", {"pttl": 1, "hset": 1, "pexpire": 1}),
        ("read", {"pttl": 1, "set": 1, "hset": 1, "pexpire": 1}),
    ],
)
def test_an_uncontended_pair_runs_few_commands(
    client: tenure.Client, r: redis.Redis, side: str, granted: dict[str, int]
) -> None:
    rw = client.read_write_lock(f"calls-{side}")
    lock = rw.write_lock() if side == "write" else rw.read_lock()
    assert lock.acquire(lease_time=30)  # scripts loaded
    lock.release()
    assert counted(r, lambda: lock.acquire(lease_time=30)) == granted
    assert r.hget(f"calls-{side}", "mode") == side.encode()
    assert counted(r, lock.release) == RELEASED
    assert r.keys("*") == []  # the hash and a read hold's timeout key are gone


def test_an_unlock_someone_heard_queues_the_releaser(client: tenure.Client, r: redis.Redis) -> None:
    """Someone else listens on the lock's channel (a Redisson waiter): the unlock is
    published there once and the releaser's client is put in the wake queue, as by the
    full path (rw_wake, _wake.lua's put_back)."""
    listener = r.pubsub()
    listener.subscribe(keys.rw_channel("heard"))
    assert listener.get_message(timeout=5) is not None
    lock = client.read_write_lock("heard").write_lock()
    assert lock.acquire(lease_time=30)
    calls = counted(r, lock.release)
    assert calls == {**RELEASED, "zadd": 1, "pexpire": 1}
    assert not r.exists("heard")
    assert r.zrange(keys.lock_wake_queue("heard"), 0, -1) == [client.client_id.encode()]
    message = listener.get_message(timeout=5)
    assert message is not None
    assert message["channel"] == keys.rw_channel("heard").encode()
    listener.close()


def test_a_marked_queue_sends_the_unlock_to_every_reader(
    client: tenure.Client, r: redis.Redis
) -> None:
    """A wake queue (here the readers' mark, _rw_wake.lua) takes the full path."""
    lock = client.read_write_lock("marked").read_lock()
    assert lock.acquire(lease_time=30)
    r.zadd(keys.lock_wake_queue("marked"), {"readers": 1})
    calls = counted(r, lock.release)
    assert calls["zscore"] == 1  # the readers' mark, read
    assert calls["zrem"] == 1  # and left
    assert calls["publish"] == 1
    assert r.keys("*") == []


def test_a_first_write_attempt_on_a_held_lock_runs_two_commands(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    """A writer's first attempt on a held lock: the PTTL and one HMGET answer the kind,
    re-entry and upgrade checks (six commands before: TYPE, EXISTS and three HEXISTS/HGET)."""
    holder = make_client().read_write_lock("calls-held").write_lock()
    contender = make_client().read_write_lock("calls-held").write_lock()
    assert holder.acquire(lease_time=30)
    assert not contender.acquire(blocking=False)  # scripts loaded
    assert counted(r, lambda: contender.acquire(blocking=False)) == {"pttl": 1, "hmget": 1}
    holder.release()


def test_a_read_attempt_refused_by_a_writer_runs_two_commands(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    """A reader's attempt while another owner writes: the PTTL and one HMGET answer the kind
    checks and the refusal (seven commands before: TYPE, EXISTS, HEXISTS, the declaration's
    HGET, HGET mode, HEXISTS writer)."""
    holder = make_client().read_write_lock("calls-written").write_lock()
    contender = make_client().read_write_lock("calls-written").read_lock()
    assert holder.acquire(lease_time=30)
    assert not contender.acquire(blocking=False)  # scripts loaded
    assert counted(r, lambda: contender.acquire(blocking=False)) == {"pttl": 1, "hmget": 1}
    holder.release()
