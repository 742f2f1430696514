"""asyncio twins of the FairLock and ReadWriteLock tests: per-task owners, same scripts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import pytest
import redis

import tenure
from servers import Server
from tenure import keys


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


async def until(predicate: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < end, "condition not reached"
        await asyncio.sleep(0.01)


def test_fair_tasks_acquire_in_arrival_order(server: Server, r: redis.Redis) -> None:
    async def main() -> list[int]:
        async with tenure.AsyncClient(server.url) as client:
            lock = client.fair_lock("afair")
            assert isinstance(lock, tenure.AsyncFairLock)
            assert await lock.acquire(lease_time=0.5)
            order: list[int] = []

            async def waiter(i: int) -> None:
                assert await lock.acquire(lease_time=0.3)  # never released
                order.append(i)

            tasks = []
            for i in range(6):
                tasks.append(asyncio.create_task(waiter(i)))

                async def queued(n: int = i + 1) -> bool:
                    return int(await client.redis.llen(keys.fair_queue_key("afair"))) >= n

                await until(queued)
            await asyncio.gather(*tasks)
            return order

    assert run(main()) == list(range(6))


def test_fair_cancelled_and_timed_out_waiters_leave_queue(server: Server, r: redis.Redis) -> None:
    async def main() -> None:
        async with tenure.AsyncClient(server.url) as client:
            lock = client.fair_lock("acancel")
            assert await lock.acquire(lease_time=10)
            queue = keys.fair_queue_key("acancel")
            waiter = asyncio.create_task(lock.acquire())
            timed = asyncio.create_task(lock.acquire(timeout=0.3))

            async def queued(n: int) -> bool:
                return int(await client.redis.llen(queue)) == n

            await until(lambda: queued(2))
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert await client.redis.llen(queue) == 1
            assert await timed is False
            assert await client.redis.exists(queue, keys.fair_timeout_key("acancel")) == 0
            assert await lock.acquire(blocking=False)  # re-entry by the holder task
            assert await lock.hold_count() == 2
            await lock.release()
            await lock.release()
            assert not await lock.locked()

    run(main())


def test_rw_tasks_readers_overlap_writer_excludes(server: Server, r: redis.Redis) -> None:
    async def main() -> tuple[int, int, int]:
        async with tenure.AsyncClient(server.url) as client:
            rw = client.read_write_lock("arw")
            assert isinstance(rw, tenure.AsyncReadWriteLock)
            readers = writers = peak = violations = 0

            async def read() -> None:
                nonlocal readers, peak, violations
                for _ in range(3):
                    async with rw.read_lock():
                        readers += 1
                        peak = max(peak, readers)
                        violations += writers != 0
                        await asyncio.sleep(0.02)
                        readers -= 1

            async def write() -> None:
                nonlocal writers, violations
                for _ in range(5):
                    async with rw.write_lock()(timeout=30):
                        writers += 1
                        violations += writers != 1 or readers != 0
                        await asyncio.sleep(0.005)
                        writers -= 1

            await asyncio.gather(*(read() for _ in range(8)), write(), write())
            return peak, violations, await client.redis.exists("arw")

    peak, violations, left = run(main())
    assert peak > 1 and violations == 0 and left == 0


def test_rw_upgrade_refused_downgrade_allowed(server: Server, r: redis.Redis) -> None:
    async def main() -> None:
        async with tenure.AsyncClient(server.url) as client:
            rw = client.read_write_lock("{t}:adown")
            read, write = rw.read_lock(), rw.write_lock()
            assert await read.acquire()
            with pytest.raises(tenure.LockUpgradeError):
                await write.acquire()
            with pytest.raises(tenure.LockUpgradeError):
                await write.acquire(blocking=False)
            await read.release()
            assert await write.acquire() and await read.acquire()
            other = asyncio.create_task(rw.read_lock().acquire(timeout=10))
            await asyncio.sleep(0.2)
            assert not other.done()  # waits while the write lock is held
            await write.release()  # downgrade: wakes the waiting reader
            started = time.monotonic()
            assert await other and time.monotonic() - started < 1.0
            assert await read.locked() and not await write.locked()
            assert await client.redis.hget("{t}:adown", "mode") == b"read"
            owner = client._runner.owner()
            assert await client.redis.exists(f"{{t}}:adown:{owner}:rwlock_timeout:1") == 1
            await read.release()

    run(main())


def test_rw_watchdog_keeps_task_readers(server: Server, r: redis.Redis) -> None:
    async def main() -> list[tuple[bool, bool]]:
        async with tenure.AsyncClient(server.url, watchdog_timeout=1.0) as client:
            rw = client.read_write_lock("awd")
            held = asyncio.Event()
            count = 0

            async def reader() -> tuple[bool, bool]:
                nonlocal count
                side = rw.read_lock()
                assert await side.acquire()
                count += 1
                if count == 20:
                    held.set()
                await held.wait()
                await asyncio.sleep(3.2)  # > 3 x watchdog_timeout
                result = (await side.owned(), side.lost)
                await side.release()
                return result

            return list(await asyncio.gather(*(reader() for _ in range(20))))

    assert run(main()) == [(True, False)] * 20
