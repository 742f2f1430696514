"""FencedLock: tokens, the fenced-write helper, and a paused holder refused at the resource."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tenure
from tenure import keys

SRC = str(Path(tenure.__file__).resolve().parents[1])


def test_token_increments_on_every_acquisition_including_reentry(client, r):
    lock = client.fenced_lock("ledger")
    assert lock.token is None
    t1 = lock.acquire_token()
    t2 = lock.acquire_token()  # re-entry draws a new token too
    assert t1 is not None and t2 == t1 + 1 and lock.token == t2
    assert lock.hold_count() == 2
    assert int(r.get(keys.token_key("ledger"))) == t2
    assert r.ttl(keys.token_key("ledger")) == -1  # the counter never expires
    lock.release()
    lock.release()
    assert not lock.locked()
    assert lock.token == t2  # still the latest acquisition's token


def test_refused_acquire_returns_none_and_keeps_no_token(make_client):
    a, b = make_client(), make_client()
    la, lb = a.fenced_lock("x"), b.fenced_lock("x")
    assert la.acquire_token(lease_time=5) is not None
    assert lb.acquire_token(blocking=False) is None
    assert lb.acquire_token(timeout=0.05) is None
    assert lb.token is None
    la.release()


def test_tokens_strictly_increase_across_clients_and_threads(make_client):
    clients = [make_client() for _ in range(3)]
    seen: list[int] = []
    mutex = threading.Lock()

    def worker(c: tenure.Client) -> None:
        lock = c.fenced_lock("shared")
        for _ in range(10):
            token = lock.acquire_token(timeout=10)
            assert token is not None
            with mutex:
                seen.append(token)  # appended in acquisition order: we hold the lock
            lock.release()

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 60
    assert seen == sorted(seen) and len(set(seen)) == 60


def test_fenced_write_refuses_lower_tokens_and_accepts_equal(r):
    assert tenure.fenced_read(r, "res") is None
    assert tenure.fenced_write(r, "res", 5, b"a")
    assert tenure.fenced_write(r, "res", 5, b"b")  # same holder writing twice
    assert tenure.fenced_write(r, "res", 7, "c")
    assert not tenure.fenced_write(r, "res", 6, b"stale")
    assert tenure.fenced_read(r, "res") == (7, b"c")
    with pytest.raises(TypeError):
        tenure.fenced_write(r, "res", "7", b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tenure.fenced_write(r, "res", -1, b"x")


CHILD = r"""
import sys, tenure, redis
c = tenure.Client(sys.argv[1])
lock = c.fenced_lock("job")
token = lock.acquire_token(lease_time=float(sys.argv[2]))
print(token, flush=True)
sys.stdin.readline()          # the test stops us (SIGSTOP) before we get here
ok = tenure.fenced_write(redis.Redis.from_url(sys.argv[1]), "resource", token, b"old")
print("stored" if ok else "refused", flush=True)
"""


def test_paused_holder_write_refused_new_holder_accepted(server, client, r):
    lease = 1.0
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, server.url, str(lease)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        old_token = int(child.stdout.readline())
        os.kill(child.pid, signal.SIGSTOP)  # the holder pauses longer than its lease
        child.stdin.write("go\n")
        child.stdin.flush()
        lock = client.fenced_lock("job")
        new_token = lock.acquire_token(timeout=10)  # granted once the paused lease ran out
        assert new_token is not None and new_token > old_token
        assert tenure.fenced_write(r, "resource", new_token, b"new")
        os.kill(child.pid, signal.SIGCONT)
        assert child.stdout.readline().strip() == "refused"
        assert tenure.fenced_read(r, "resource") == (new_token, b"new")
        lock.release()
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()


def run(coro):
    import asyncio

    return asyncio.run(asyncio.wait_for(coro, 60))


def test_async_tokens_strictly_increase(server, r):
    import asyncio

    async def main() -> list[int]:
        seen: list[int] = []
        async with tenure.AsyncClient(server.url) as a, tenure.AsyncClient(server.url) as b:

            async def work(c: tenure.AsyncClient) -> None:
                lock = c.fenced_lock("async-ledger")
                for _ in range(5):
                    token = await lock.acquire_token(timeout=10)
                    assert token is not None and lock.token == token
                    seen.append(token)
                    await asyncio.sleep(0)
                    await lock.release()

            await asyncio.gather(*(work(c) for c in (a, b, a, b)))
            lock = a.fenced_lock("async-ledger")
            t1 = await lock.acquire_token()
            t2 = await lock.acquire_token()
            assert t2 == t1 + 1 and await lock.hold_count() == 2
            await lock.release()
            await lock.release()
        return seen

    seen = run(main())
    assert len(seen) == 20 and seen == sorted(seen) and len(set(seen)) == 20
