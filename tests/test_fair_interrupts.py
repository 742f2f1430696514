"""A FairLock waiter interrupted twice: its acquire is cancelled (asyncio) or a signal
handler raises (sync), and a second interrupt lands in the clean-up that leaves the queue.
The caller gets its exception, and its queue entry still goes within 0.5 s of the server
answering again (docs/primitives/fair-lock.md: a waiter that is cancelled leaves the queue),
so the next waiter is not held up to the dead entry's grace. Real servers, both kinds."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

import tenure
from support.signals import (
    alarm_when_leaving,
    awaiting,
    cancel_twice_while_leaving,
    current_frame,
)
from support.twins import async_wait_until, wait_until
from tenure._concurrency import Spawner
from tenure.core.fair import FairLockCore

PAUSE = 1.5
"""Seconds the server is paused (CLIENT PAUSE ... ALL) around the two interrupts."""
IN_CALL = 0.1
"""Seconds from the give-up being sent to the second interrupt (the socket timeout is 0.5)."""


class Alarm(Exception):
    """What the test's SIGALRM handler raises."""


def pause(r: redis.Redis) -> float:
    """Pause every client's commands for `PAUSE` s; the monotonic time the server answers
    again (at the latest)."""
    r.execute_command("CLIENT", "PAUSE", int(PAUSE * 1000), "ALL")
    return time.monotonic() + PAUSE


def parked(client: Any, core: Any) -> bool:
    """True once ``core``'s one waiter joined the queue and has a ticket on its channel."""
    if not core._queued:
        return False
    channel = core.wait_channel(next(iter(core._queued)))
    listener = client._runner._listener._by_channel.get(channel)
    return listener is not None and bool(listener._parking.channels[channel].tickets)


def waiting(client: Any, core: Any, task: asyncio.Task[Any]) -> bool:
    """True once the asyncio waiter ``task`` is parked and sleeps (or reads) in its wait,
    not in the subscribe (which pauses too, for the server's confirmation)."""
    stack = awaiting(task)
    return parked(client, core) and "_pause" in stack and "subscribe" not in stack


def sleeping(client: Any, core: Any, thread: threading.Thread) -> bool:
    """True once the sync waiter (in ``thread``) is parked and sleeps (or reads) in its wait,
    not still subscribing (an interrupt there leaves no channel to let go)."""
    frame = current_frame(thread.ident)
    while frame is not None and parked(client, core):
        code = frame.f_code
        if code.co_name == "_pause" and code.co_filename.endswith("listener.py"):
            # The subscribe pauses too, for the server's confirmation (slow under load):
            # an interrupt there is left by the subscribe itself, not by the flow's
            # Unsubscribe these tests aim at.
            return frame.f_back is not None and frame.f_back.f_code.co_name == "wait"
        frame = frame.f_back
    return False


def held_and_a_waiter(
    make_client: Callable[..., tenure.Client], **options: Any
) -> tuple[tenure.FairLock, tenure.Client, tenure.FairLock, FairLockCore]:
    """The FairLock "twice" held (lease 60 s) by one client, and another client (made with
    ``options``) with its not yet waiting FairLock "twice" and that lock's core."""
    holder = make_client().fair_lock("twice")
    assert holder.acquire(lease_time=60)
    client = make_client(**options)
    waiter = client.fair_lock("twice")
    core = waiter.core
    assert isinstance(core, FairLockCore)
    return holder, client, waiter, core


async def async_held_and_a_waiter(
    async_make_client: Callable[..., tenure.AsyncClient], **options: Any
) -> tuple[tenure.AsyncFairLock, tenure.AsyncClient, tenure.AsyncFairLock, FairLockCore]:
    """The asyncio twin of `held_and_a_waiter`."""
    holder = async_make_client().fair_lock("twice")
    assert await holder.acquire(lease_time=60)
    client = async_make_client(**options)
    waiter = client.fair_lock("twice")
    core = waiter.core
    assert isinstance(core, FairLockCore)
    return holder, client, waiter, core


def acquire_interrupted(
    waiter: tenure.FairLock,
    got: list[str],
    interrupt: Callable[[], None],
    tracer: Any = None,
) -> float:
    """``waiter.acquire(timeout=30)`` in the main thread, each SIGALRM appending "alarm" to
    ``got`` and raising Alarm, ``tracer`` set if given, and ``interrupt`` run in another
    thread: the acquire must raise Alarm. The handler, tracer and timer are restored after.
    Returns the monotonic time the acquire had raised by."""

    def handler(signum: int, frame: Any) -> None:
        got.append("alarm")
        raise Alarm("alarm")

    previous = signal.signal(signal.SIGALRM, handler)
    if tracer is not None:
        sys.settrace(tracer)
    try:
        interrupter = threading.Thread(target=interrupt)
        interrupter.start()
        with pytest.raises(Alarm):
            waiter.acquire(timeout=30)
        raised = time.monotonic()
        interrupter.join(5)
    finally:
        if tracer is not None:
            sys.settrace(None)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return raised


def entry_left(r: redis.Redis, core: Any) -> bool:
    """True while the queue or the timeout ZSET has an entry (the holder is not queued)."""
    return bool(r.llen(core.queue_key) or r.zcard(core.timeout_key))


def gone_after(r: redis.Redis, core: Any, answered: float) -> float:
    """Seconds from ``answered`` (the server's pause end) to the entry seen gone (5 s at most)."""
    deadline = answered + 5
    while entry_left(r, core) and time.monotonic() < deadline:
        time.sleep(0.005)
    return time.monotonic() - answered


async def test_a_second_cancellation_during_the_give_up_still_leaves_the_queue(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis
) -> None:
    holder, client, waiter, core = await async_held_and_a_waiter(
        async_make_client, socket_timeout=0.5
    )
    task = asyncio.ensure_future(waiter.acquire(timeout=30))
    assert await async_wait_until(lambda: waiting(client, core, task), 5, 0.005)
    answered = pause(r)
    task.cancel()  # the clean-up leaves the channel, then sends the give-up: no answer
    assert await async_wait_until(lambda: not core._queued, 1, 0.001)
    await asyncio.sleep(IN_CALL)
    assert time.monotonic() < answered - 0.5, "the second cancellation came too late"
    task.cancel()  # the second cancellation, the give-up on its way
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(answered - time.monotonic())
    took = await asyncio.to_thread(gone_after, r, core, answered)
    assert took < 0.5, f"the entry left {took:.2f} s after the server answered again"
    # The next waiter is woken at once when the lock is released.
    other = async_make_client().fair_lock("twice")
    late = asyncio.ensure_future(other.acquire(timeout=5))
    assert await async_wait_until(lambda: r.llen(core.queue_key) == 1)
    released = time.monotonic()
    await holder.release()
    assert await late
    assert time.monotonic() - released < 1.0
    await other.release()


def test_a_second_signal_during_the_give_up_still_leaves_the_queue(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    holder, client, waiter, core = held_and_a_waiter(make_client, socket_timeout=0.5)
    got: list[str] = []
    timing: dict[str, float] = {}

    def interrupt_twice() -> None:
        main = threading.main_thread().ident or 0
        assert wait_until(lambda: sleeping(client, core, threading.main_thread()), 5, 0.005)
        timing["answered"] = pause(r)
        signal.pthread_kill(main, signal.SIGALRM)
        assert wait_until(lambda: not core._queued, 1, 0.001)
        time.sleep(IN_CALL)
        timing["second"] = time.monotonic()
        signal.pthread_kill(main, signal.SIGALRM)

    acquire_interrupted(waiter, got, interrupt_twice)
    assert got == ["alarm", "alarm"]  # both landed
    answered = timing["answered"]
    assert timing["second"] < answered - 0.5, "the second signal came too late"
    time.sleep(max(0.0, answered - time.monotonic()))
    took = gone_after(r, core, answered)
    assert took < 0.5, f"the entry left {took:.2f} s after the server answered again"
    other = make_client().fair_lock("twice")
    result: list[bool] = []
    late = threading.Thread(target=lambda: result.append(other.acquire(timeout=5)))
    late.start()
    assert wait_until(lambda: r.llen(core.queue_key) == 1)
    released = time.monotonic()
    holder.release()
    late.join(6)
    assert result == [True]
    assert time.monotonic() - released < 1.0


async def test_a_second_cancellation_while_leaving_the_channel_still_leaves_the_queue(
    async_make_client: Callable[..., tenure.AsyncClient], r: redis.Redis
) -> None:
    # The second cancellation lands earlier: on the clean-up's Unsubscribe, which waits
    # for the listener's mutex (another task holds it). The give-up still follows.
    holder, client, waiter, core = await async_held_and_a_waiter(async_make_client)
    task = asyncio.ensure_future(waiter.acquire(timeout=30))
    assert await async_wait_until(lambda: waiting(client, core, task), 5, 0.005)
    channel = core.wait_channel(next(iter(core._queued)))
    mutex = client._runner._listener._by_channel[channel]._mutex
    await cancel_twice_while_leaving(task, mutex)
    with pytest.raises(asyncio.CancelledError):
        await task
    took = await asyncio.to_thread(gone_after, r, core, time.monotonic())
    assert took < 0.5, f"the entry left {took:.2f} s after the caller's exception"
    assert not core._queued
    await holder.release()


def test_a_second_signal_while_leaving_the_channel_still_leaves_the_queue(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    # The sync twin: a first SIGALRM interrupts the waiter; when its clean-up calls the
    # listener's unsubscribe, another thread holds the listener's mutex, and a second
    # SIGALRM lands while the main thread waits for it.
    holder, client, waiter, core = held_and_a_waiter(make_client)
    got: list[str] = []
    armed = threading.Event()

    tracer = alarm_when_leaving(armed)  # the second signal, on the clean-up's unsubscribe

    def interrupt_when_parked() -> None:
        assert wait_until(lambda: sleeping(client, core, threading.main_thread()), 5, 0.005)
        armed.set()
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)

    left = acquire_interrupted(waiter, got, interrupt_when_parked, tracer)
    assert got == ["alarm", "alarm"]  # both landed
    took = gone_after(r, core, left)
    assert took < 0.5, f"the entry left {took:.2f} s after the caller's exception"
    assert not core._queued
    holder.release()


@pytest.mark.parametrize("where", ["as_it_is_dequeued", "as_its_background_flow_starts"])
def test_a_second_signal_as_the_give_up_begins_or_goes_to_the_background_still_leaves(
    make_client: Callable[..., tenure.Client], r: redis.Redis, where: str
) -> None:
    # A second SIGALRM at two places of the give-up that came before its call was answered
    # or its background flow started, where no `try` of the give-up covered it: as the owner
    # is taken out of the client's queued set (its handler runs at the next call, before the
    # give-up is sent), and, the give-up timing out on a paused server, as the runner
    # starts the background flow that leaves the queue. The clean-up, run again from the
    # top, must still leave the queue: the entry goes within 0.5 s of the server answering.
    holder, client, waiter, core = held_and_a_waiter(make_client, socket_timeout=0.5)
    main = threading.main_thread().ident or 0
    got: list[str] = []
    answered: list[float] = []
    dequeued = FairLockCore._dequeued.__code__
    spawn = Spawner.spawn.__code__
    leaving = FairLockCore._give_up_later.__code__

    def second_at_dequeue(frame: Any, event: str, arg: Any) -> Any:
        if event == "return" and arg is True and got == ["alarm"]:
            got.append("sent")
            signal.pthread_kill(main, signal.SIGALRM)  # handled at the next call
        return second_at_dequeue

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code is dequeued and where == "as_it_is_dequeued":
            return second_at_dequeue
        if (
            code is spawn
            and where == "as_its_background_flow_starts"
            and got == ["alarm"]
            and any(getattr(a, "gi_code", None) is leaving for a in frame.f_locals["args"])
        ):
            got.append("sent")
            signal.pthread_kill(main, signal.SIGALRM)  # handled as spawn() begins
        return None

    def interrupt_when_parked() -> None:
        assert wait_until(lambda: sleeping(client, core, threading.main_thread()), 5, 0.005)
        if where == "as_its_background_flow_starts":
            answered.append(pause(r))  # the give-up hangs to the socket timeout, 0.5 s
        signal.pthread_kill(main, signal.SIGALRM)

    acquire_interrupted(waiter, got, interrupt_when_parked, tracer)
    assert got == ["alarm", "sent", "alarm"]  # both landed, the second where meant
    start = answered[0] if answered else time.monotonic()
    time.sleep(max(0.0, start - time.monotonic()))
    took = gone_after(r, core, start)
    assert took < 0.5, f"the entry left {took:.2f} s after the server answered"
    assert not core._queued
    holder.release()
