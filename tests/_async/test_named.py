# Named holders (asyncio source of tests/_sync/test_named.py).
"""``Client(name=...)``: inspect() names holders and queued waiters by client name, host
and pid (None for foreign clients); the registration costs the acquire/release path
nothing."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

import tenure
from support.twins import async_sleep, async_spawn, async_wait_until
from tenure import keys


async def test_the_default_name_is_host_and_pid(async_make_client):
    client = async_make_client()
    assert client.name == f"{socket.gethostname()}:{os.getpid()}"
    assert async_make_client(name="billing-worker").name == "billing-worker"
    with pytest.raises(ValueError, match="must not be empty"):
        async_make_client(name="")
    with pytest.raises(TypeError):
        async_make_client(name=42)


async def named_holders(client: tenure.AsyncClient, name: str) -> list[tenure.Holder]:
    info = await client.inspect(name)
    return [h for h in info.holders if h.client_name is not None]


async def test_inspect_names_holders_and_queued_waiters(async_make_client, r):
    # named by the renewal pass (every 0.3 s here)
    holder = async_make_client(name="billing-worker", watchdog_timeout=0.9)
    waiter = async_make_client(name="report-job", watchdog_timeout=0.9)
    fair = holder.fair_lock("named")
    await fair.acquire()
    async def wait_then_release() -> bool:
        queued = waiter.fair_lock("named")
        got = await queued.acquire(timeout=20)
        await queued.release()
        return got

    job = async_spawn(wait_then_release)
    assert await async_wait_until(lambda: r.llen(keys.fair_queue_key("named")) == 1)
    info = None
    for _ in range(100):  # registered by each client's next renewal pass
        info = await holder.inspect("named")
        if info.holders[0].client_name and info.queue and info.queue[0].client_name:
            break
        await async_sleep(0.05)
    assert info is not None
    (h,) = info.holders
    assert (h.client_name, h.host, h.pid) == ("billing-worker", socket.gethostname(), os.getpid())
    (q,) = info.queue
    assert (q.client_name, q.host, q.pid) == ("report-job", socket.gethostname(), os.getpid())
    data = info.to_dict()
    assert data["holders"][0]["client_name"] == "billing-worker"
    await fair.release()
    assert await job.result()


async def test_a_foreign_holder_has_no_name(async_client, r):
    r.hset("foreign", f"{uuid.uuid4()}:1", 1)  # as Java Redisson writes it
    r.pexpire("foreign", 30000)
    (h,) = (await async_client.inspect("foreign")).holders
    assert h.client_id is not None
    assert (h.client_name, h.host, h.pid) == (None, None, None)


async def test_the_registration_goes_once_nothing_is_held(async_make_client, r):
    client = async_make_client(name="short", watchdog_timeout=0.6)
    lock = client.lock("short-lived")
    await lock.acquire()
    key = "tenure:client:" + client.client_id
    assert await async_wait_until(lambda: r.exists(key), timeout=5)
    assert 0 < r.pttl(key) <= 600
    await lock.release()
    assert await async_wait_until(lambda: not r.exists(key), timeout=1)  # the next pass


async def test_a_short_hold_leaves_no_key(async_client, r):
    """Registration rides on the renewal pass: a hold shorter than a renewal period never
    writes one, so nothing is left behind."""
    lock = async_client.lock("brief")
    await lock.acquire()
    await lock.release()
    await async_sleep(0.2)
    assert r.keys("*") == []


def commands(r) -> int:
    return int(r.info("stats")["total_commands_processed"])


async def test_a_name_costs_the_acquire_release_path_nothing(async_make_client, r):
    counts = {}
    for name in (None, "billing-worker"):
        client = async_make_client(name=name) if name else async_make_client()
        lock = client.lock(f"count-{name}")
        await lock.acquire()  # warm up: connections, scripts, the renewal loop's start
        await lock.release()
        await async_sleep(0.3)
        before = commands(r)
        await lock.acquire()
        await lock.release()
        counts[name] = commands(r) - before - 1  # less the INFO that read "before"
    print(f"commands of an uncontended acquire+release: {counts}")
    assert counts[None] == counts["billing-worker"]
