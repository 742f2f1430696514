"""Semaphores shared by processes: permits never exceeded, a killed holder's permit returns."""

from __future__ import annotations

import multiprocessing
import time

import tenure
from support.servers import Server
from support.wire import max_concurrency
from support.workers import hold_permit_forever, semaphore_spans

SPAWN = multiprocessing.get_context("spawn")


def test_eight_processes_never_exceed_three_permits(server: Server, client: tenure.Client) -> None:
    sem = client.semaphore("procs")
    assert sem.try_set_permits(3)
    with SPAWN.Pool(8) as pool:
        results = pool.starmap(semaphore_spans, [(server.url, "procs", 15, 2)] * 8)
    spans = [s for spans in results for s in spans]
    assert len(spans) == 8 * 2 * 15
    assert max_concurrency(spans) == 3  # never more, and the permits were all used
    assert sem.available_permits() == 3


def test_killed_holder_of_a_watchdog_permit_returns_it_within_one_timeout(
    server: Server, client: tenure.Client
) -> None:
    sem = client.permit_expirable_semaphore("crash")
    assert sem.try_set_permits(1)
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=hold_permit_forever, args=(server.url, "crash", 1.0, ready))
    proc.start()
    try:
        assert ready.wait(20)
        time.sleep(2.5)  # more than two watchdog timeouts: the holder's watchdog keeps it
        assert sem.acquire(blocking=False) is None
        proc.kill()
        killed = time.monotonic()
        permit = sem.acquire(timeout=5)
        waited = time.monotonic() - killed
        assert permit is not None
        assert waited <= 1.0 + 0.3, f"took {waited:.3f} s after the kill"
        sem.release(permit)
    finally:
        proc.kill()
