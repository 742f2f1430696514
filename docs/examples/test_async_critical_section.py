"""An asyncio critical section under the tenure.testing plugin."""

import asyncio

import tenure
from tenure.testing import IntervalRecorder


async def test_tasks_take_turns(
    tenure_async_client: tenure.AsyncClient,
    tenure_intervals: IntervalRecorder,
) -> None:
    balance = {"value": 0}  # stands for a resource outside Redis

    async def worker(number: int) -> None:
        lock = tenure_async_client.lock("account:7")
        for _ in range(10):
            async with lock:  # each task is its own owner
                with tenure_intervals.section(f"task {number}"):
                    value = balance["value"]
                    await asyncio.sleep(0)  # others run meanwhile
                    balance["value"] = value + 1

    await asyncio.gather(*(worker(n) for n in range(4)))
    assert balance["value"] == 40
    tenure_intervals.check()
