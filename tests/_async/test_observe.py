# Logging (asyncio source of tests/_sync/test_observe.py).
"""What the ``tenure`` logger says: acquire/release at DEBUG, a loss and a failed renewal at
WARNING with the lock name and owner, on a real server."""

from __future__ import annotations

import logging

import pytest

import tenure
from support.twins import AsyncEvent


class Waiter(logging.Handler):
    """Sets ``event`` when a record at ``level`` whose message contains ``text`` arrives
    (from any thread or task: the renewal loop logs from its own)."""

    def __init__(self, level: int, text: str) -> None:
        super().__init__(level)
        self.text = text
        self.event = AsyncEvent()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == self.level and self.text in record.getMessage():
            self.records.append(record)
            self.event.set()


@pytest.fixture
def tenure_log():
    handlers: list[logging.Handler] = []
    logger = logging.getLogger("tenure")
    level = logger.level
    logger.setLevel(logging.DEBUG)

    def wait_for(level: int, text: str) -> Waiter:
        waiter = Waiter(level, text)
        logger.addHandler(waiter)
        handlers.append(waiter)
        return waiter

    yield wait_for
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(level)


def test_library_installs_no_handler():
    assert logging.getLogger("tenure").handlers == []


async def test_acquire_and_release_are_debug_records(async_client, caplog):
    caplog.set_level(logging.DEBUG, logger="tenure")
    lock = async_client.lock("logged")
    await lock.acquire()
    await lock.release()
    assert not await async_client.lock("logged").locked()
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "tenure"]
    assert any(
        level == logging.DEBUG and "acquire Lock 'logged'" in m and "granted" in m
        for level, m in messages
    ), messages
    assert any(
        level == logging.DEBUG and "release Lock 'logged'" in m and async_client.client_id in m
        for level, m in messages
    ), messages
    assert not any(level >= logging.WARNING for level, _ in messages)


async def test_wait_ran_out_is_a_debug_record(async_make_client, caplog):
    caplog.set_level(logging.DEBUG, logger="tenure")
    holder = async_make_client().lock("busy")
    await holder.acquire()
    assert not await async_make_client().lock("busy").acquire(timeout=0.1)
    assert any(
        "acquire Lock 'busy'" in r.getMessage() and "wait ran out" in r.getMessage()
        for r in caplog.records
    )
    await holder.release()


async def test_loss_found_by_the_watchdog_is_a_warning(async_make_client, r, tenure_log):
    warned = tenure_log(logging.WARNING, "'doomed'")
    reported = AsyncEvent()
    client = async_make_client(watchdog_timeout=0.3)
    lock = client.lock("doomed", on_lost=lambda _: reported.set())
    await lock.acquire()
    assert r.delete("doomed") == 1  # the hold vanishes under the watchdog
    assert await reported.wait(5), "the watchdog did not report the loss"
    assert await warned.event.wait(1), "no WARNING record for the loss"
    message = warned.records[0].getMessage()
    assert "lost" in message, message
    assert client.client_id in message, message
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def test_loss_found_at_release_is_a_warning(async_client, r, tenure_log):
    warned = tenure_log(logging.WARNING, "'expired'")
    lock = async_client.lock("expired")
    await lock.acquire(lease_time=60)
    assert r.delete("expired") == 1
    with pytest.raises(tenure.LockLostError):
        await lock.release()
    assert warned.records, "no WARNING record for the loss"
    message = warned.records[0].getMessage()
    assert "found at release" in message, message
    assert async_client.client_id in message, message


async def test_failed_renewal_is_a_warning(async_make_client, r, tenure_log):
    warned = tenure_log(logging.WARNING, "renewal of 1 hold(s) failed")
    client = async_make_client(watchdog_timeout=0.6, socket_timeout=0.2)
    lock = client.lock("stalled")
    await lock.acquire()
    r.client_pause(1200, all=True)  # the next renewal call times out
    assert await warned.event.wait(5), "no WARNING record for the failed renewal"
    message = warned.records[0].getMessage()
    assert "'stalled'" in message, message
    assert client.client_id in message, message
