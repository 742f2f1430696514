"""The asyncio API on real servers: per-task ownership, waiting, cancellation, watchdog."""

from __future__ import annotations

import asyncio
import time

import pytest

import tenure


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_tasks_sharing_one_lock_object_exclude_each_other(server, r):
    async def main() -> tuple[int, int]:
        async with tenure.AsyncClient(server.url) as client:
            lock = client.lock("tasks")
            inside = 0
            overlaps = 0

            async def work() -> None:
                nonlocal inside, overlaps
                for _ in range(20):
                    async with lock:
                        inside += 1
                        overlaps += inside > 1
                        value = int(await client.redis.get("n") or 0)
                        await asyncio.sleep(0)
                        await client.redis.set("n", value + 1)
                        inside -= 1

            await asyncio.gather(*(work() for _ in range(5)))
            return int(await client.redis.get("n")), overlaps

    assert run(main()) == (100, 0)


def test_reentrancy_and_other_task_cannot_release(server, r):
    async def main() -> list[object]:
        async with tenure.AsyncClient(server.url) as client:
            lock = client.lock("are")
            seen: list[object] = [await lock.hold_count()]
            await lock.acquire()
            await lock.acquire()
            seen.append(await lock.hold_count())

            async def other() -> object:
                try:
                    await lock.release()
                except tenure.NotOwnedError as error:
                    return (await lock.owned(), type(error))
                return "released"

            seen.append(await asyncio.create_task(other()))
            await lock.release()
            seen.append(await lock.hold_count())
            await lock.release()
            seen.append(await lock.locked())
            return seen

    assert run(main()) == [0, 2, (False, tenure.NotOwnedError), 1, False]


def test_cancelled_waiter_leaves_nothing_held_or_subscribed(server, r):
    async def main() -> None:
        async with (
            tenure.AsyncClient(server.url) as holder,
            tenure.AsyncClient(server.url) as client,
        ):
            held = holder.lock("cancel")
            await held.acquire()
            waiter = asyncio.create_task(client.lock("cancel").acquire())
            await asyncio.sleep(0.3)
            assert r.pubsub_channels() == [b"redisson_lock__channel:{cancel}"]
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            await held.release()
            deadline = time.monotonic() + 5
            while r.pubsub_channels() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert r.pubsub_channels() == []
            assert not r.exists("cancel")

    run(main())


def test_timeout_and_lease_expiry(server, r):
    async def main() -> None:
        async with tenure.AsyncClient(server.url) as a, tenure.AsyncClient(server.url) as b:
            first, second = a.lock("alease"), b.lock("alease")
            await first.acquire(lease_time=1)
            start = time.monotonic()
            assert await second.acquire(timeout=0.3) is False
            assert 0.25 <= time.monotonic() - start < 1.0
            assert await second.acquire(timeout=5)
            assert time.monotonic() - start < 1.6
            with pytest.raises(tenure.LockLostError):
                await first.release()
            with pytest.raises(tenure.LockTimeout):
                async with first(timeout=0.1):
                    pytest.fail("entered without the lock")
            await second.release()

    run(main())


def test_async_watchdog_renews_and_reports_loss(server, r):
    async def main() -> None:
        lost: list[object] = []
        async with tenure.AsyncClient(server.url, watchdog_timeout=0.6) as client:
            lock = client.lock("awd", on_lost=lost.append)
            await lock.acquire()
            await asyncio.sleep(2.0)
            assert r.exists("awd") and not lock.lost
            assert await lock.force_release()
            await asyncio.sleep(0.6)
            assert lost == [lock] and lock.lost
            with pytest.raises(tenure.LockLostError):
                await lock.release()

    run(main())


def test_bad_arguments_raise_before_io():
    async def main() -> None:
        client = tenure.AsyncClient("redis://127.0.0.1:1/0")
        with pytest.raises(ValueError, match="lease_time"):
            await client.lock("x").acquire(lease_time=-1)
        with pytest.raises(ValueError, match="name"):
            client.lock("")
        with pytest.raises(TypeError):
            tenure.AsyncClient(42)  # type: ignore[arg-type]

    run(main())


def test_async_waiter_survives_pubsub_reconnect(server, r):
    async def main() -> None:
        async with tenure.AsyncClient(server.url) as a, tenure.AsyncClient(server.url) as b:
            holder = a.lock("are-sub")
            await holder.acquire()  # 30 s lease: only the unlock message can wake the waiter

            async def wait() -> bool:
                lock = b.lock("are-sub")
                got = await lock.acquire(timeout=20)
                await lock.release()  # the owner is this task
                return got

            waiter = asyncio.create_task(wait())

            async def until(predicate) -> None:
                for _ in range(250):
                    if predicate():
                        return
                    await asyncio.sleep(0.02)
                pytest.fail("condition not reached")

            channel = [b"redisson_lock__channel:{are-sub}"]
            await until(lambda: r.pubsub_channels() == channel)
            assert r.client_kill_filter(_type="pubsub") >= 1
            await until(lambda: r.pubsub_channels() == channel)
            await holder.release()
            assert await asyncio.wait_for(waiter, 2)

    run(main())
