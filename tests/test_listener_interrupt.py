"""The waiter reading a client's shared pub/sub socket is interrupted after it read a reply
and before the listener's table had it: the reply must still reach the table.

The reply here is the channel's SUBSCRIBE confirmation, read by the waiter that asked for
it. Sync: a real SIGALRM whose handler raises lands while the reader takes the listener's
mutex back (held by another thread for 60 ms, the timer set for 10 ms), so the handler
runs as the mutex is retaken (`tenure._concurrency.Unlocked`). Asyncio: the reader task is
cancelled while it waits for the mutex back (held by another task). Before, the reply was
dropped: the table waited for that confirmation for ever, and every later waiter on the
channel in that client raised ``BackendError('no confirmation of SUBSCRIBE ...')`` after
the socket timeout (5 s), the lock free (R5 S2). Now the interrupt reaches its caller and
the next waiter takes the lock as soon as it is released.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import tenure
import tenure._redis as tenure_redis
import tenure.aio.listener as aio_listener
import tenure.sync.listener as sync_listener
from support.signals import raising_at_place
from tenure._concurrency import Unlocked

# A long fault run: deselected by default, run by .ci/run (`pytest -m long`).
pytestmark = pytest.mark.long


class Alarm(Exception):
    """What the SIGALRM handler raises."""


def confirmation(reply: Any) -> bool:
    return isinstance(reply, list) and len(reply) >= 3 and reply[0] in (b"subscribe", "subscribe")


def last_reply(result: Any, into: tuple[Any, ...]) -> Any:
    # The reply read: returned by read_push before the fix, appended to its ``into`` now.
    if into:
        return into[0][-1] if into[0] else None
    return result


def listener_of(client: Any, conn: Any) -> Any:
    for listener in client._runner._listener._by_node.values():
        if listener._conn is conn:
            return listener
    raise AssertionError("no listener for that connection")


def one_held(
    make_client: Callable[..., tenure.Client], prefix: str
) -> tuple[tenure.Client, tenure.Client, str]:
    """Two clients and a lock name new to this run (``prefix`` and a time), held by the
    second client."""
    c, other = make_client(), make_client()
    name = f"{prefix}-{time.monotonic_ns()}"
    assert other.lock(name).acquire()
    return c, other, name


async def async_one_held(
    async_make_client: Callable[..., tenure.AsyncClient], prefix: str
) -> tuple[tenure.AsyncClient, tenure.AsyncClient, str]:
    """The asyncio twin of `one_held`."""
    c, other = async_make_client(), async_make_client()
    name = f"{prefix}-{time.monotonic_ns()}"
    assert await other.lock(name).acquire()
    return c, other, name


def dropping_a_confirmation(monkeypatch: pytest.MonkeyPatch, side: str) -> list[Any]:
    """Patch the listener's ``read_push`` of ``side`` ("sync" or "asyncio") to drop the
    first SUBSCRIBE confirmation it reads, as read. Returns the list the dropped reply is
    appended to."""
    dropped: list[Any] = []

    def drop(came: bool, into: list[Any]) -> None:
        if came and not dropped and confirmation(into[-1]):
            dropped.append(into.pop())

    if side == "asyncio":
        async_real = tenure_redis.async_read_push

        async def async_read_push(conn: Any, timeout: float, into: list[Any]) -> bool:
            came = await async_real(conn, timeout, into)
            drop(came, into)
            return came

        monkeypatch.setattr(aio_listener, "async_read_push", async_read_push)
    else:
        real = tenure_redis.read_push

        def read_push(conn: Any, timeout: float, into: list[Any]) -> bool:
            came = real(conn, timeout, into)
            drop(came, into)
            return came

        monkeypatch.setattr(sync_listener, "read_push", read_push)
    return dropped


def served_once_released(
    c: tenure.Client, other: tenure.Client, name: str, delay: float, what: str = ""
) -> None:
    """``other`` force-releases ``name`` after ``delay`` seconds (another thread): ``c``'s
    waiter on it is served within 1.5 s of beginning to wait, then releases."""

    def release() -> None:
        time.sleep(delay)
        other.lock(name).force_release()

    releaser = threading.Thread(target=release)
    releaser.start()
    start = time.monotonic()
    try:
        assert c.lock(name).acquire(timeout=3.0), what
    finally:
        releaser.join()
    took = time.monotonic() - start
    assert took < 1.5, f"{what}served {took:.2f} s after it began waiting (released at {delay} s)"
    c.lock(name).release()


async def async_served_once_released(
    c: tenure.AsyncClient, other: tenure.AsyncClient, name: str, delay: float
) -> None:
    """The asyncio twin of `served_once_released` (the releaser a task)."""

    async def release() -> None:
        await asyncio.sleep(delay)
        await other.lock(name).force_release()

    releaser = asyncio.ensure_future(release())
    start = time.monotonic()
    try:
        assert await c.lock(name).acquire(timeout=3.0)
    finally:
        await releaser
    took = time.monotonic() - start
    assert took < 1.5, f"served {took:.2f} s after it began waiting (released at {delay} s)"
    await c.lock(name).release()


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_sync_reader_interrupted_as_it_retakes_the_mutex(
    make_client: Callable[..., tenure.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert threading.current_thread() is threading.main_thread()
    c, other, name = one_held(make_client, "lint-sync")
    real = tenure_redis.read_push  # the listener's, patched below
    fired: list[Any] = []
    holding = threading.Event()

    def read_push(conn: Any, timeout: float, *into: Any) -> Any:
        result = real(conn, timeout, *into)
        if not fired and confirmation(last_reply(result, into)):
            fired.append(True)
            listener = listener_of(c, conn)

            def hold() -> None:
                with listener._mutex:
                    holding.set()
                    time.sleep(0.06)

            threading.Thread(target=hold, daemon=True).start()
            assert holding.wait(2.0)
            signal.setitimer(signal.ITIMER_REAL, 0.01)  # lands while the mutex is retaken
        return result

    def alarm(signum: int, frame: Any) -> None:
        raise Alarm()

    monkeypatch.setattr(sync_listener, "read_push", read_push)
    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        with pytest.raises(Alarm):  # the handler's exception reaches the caller
            c.lock(name).acquire(timeout=2.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired

    # A later waiter of that client on that channel: served once the lock is free.
    served_once_released(c, other, name, 0.1)


async def test_async_reader_cancelled_as_it_retakes_the_mutex(
    async_make_client: Callable[..., tenure.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    c, other, name = await async_one_held(async_make_client, "lint-aio")
    real = tenure_redis.async_read_push  # the listener's, patched below
    fired: list[Any] = []
    holders: list[asyncio.Task[None]] = []

    async def async_read_push(conn: Any, timeout: float, *into: Any) -> Any:
        result = await real(conn, timeout, *into)
        if not fired and confirmation(last_reply(result, into)):
            fired.append(True)
            listener = listener_of(c, conn)
            held = asyncio.Event()

            async def hold() -> None:
                async with listener._mutex:
                    held.set()
                    await asyncio.sleep(0.03)

            holders.append(asyncio.ensure_future(hold()))
            await held.wait()
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # lands while the reader waits for the mutex back
        return result

    monkeypatch.setattr(aio_listener, "async_read_push", async_read_push)
    waiter = asyncio.ensure_future(c.lock(name).acquire(timeout=2.0))
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiter, 5.0)
    assert fired
    await asyncio.gather(*holders)
    await async_served_once_released(c, other, name, 0.1)


AFTER = {"CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
"""Where CPython runs a pending signal's handler (3.11-3.13): after a call returns, at a
backward jump, and as a function begins (`raising_at_place`'s ``at_start``)."""


class Interrupt(BaseException):
    """What the tracer raises, like KeyboardInterrupt (a tracer is no signal handler:
    tenure would take an ``Exception`` it raised inside redis-py for a failed socket)."""


def test_sync_reader_interrupted_at_every_place_of_its_read(
    make_client: Callable[..., tenure.Client],
) -> None:
    """An interrupt at each place of the reader's read and hand-over where a handler could
    run, one run per place (a tracer stands in for the signal, in the main thread): the
    waiter that reads its channel's confirmation gets it; the next waiter of that client
    on that channel is served once the lock is released."""
    assert threading.current_thread() is threading.main_thread()
    functions = [
        tenure_redis.read_push,
        # (Not redis-py's SocketBuffer._read_from_socket: a handler raising as its recv()
        # returns loses the bytes inside redis-py, which tenure leaves to redis-py; a
        # confirmation lost so gives the connection up after the socket timeout, below.)
        Unlocked.__exit__,
        sync_listener.Listener._read_once,
        getattr(sync_listener.Listener, "_hand_in", None),  # absent before the fix
    ]
    codes = [f.__code__ for f in functions if f is not None]
    c, other = make_client(), make_client()
    raised = 0
    for n in range(500):
        name = f"lint-place-{n}-{time.monotonic_ns()}"
        assert other.lock(name).acquire()
        tracer, seen = raising_at_place(
            n, codes, AFTER, lambda frame, where: Interrupt(where), at_start=True
        )
        sys.settrace(tracer)
        try:
            got = c.lock(name).acquire(timeout=0.3)
        except Interrupt:
            raised += 1
        finally:
            sys.settrace(None)
        if seen[0] <= n:  # no place left: every one was tried
            assert got is False
            other.lock(name).force_release()
            break
        served_once_released(c, other, name, 0.05, f"place {n}: ")
    else:
        pytest.fail("more than 500 places")
    assert raised >= 40, raised


def test_sync_confirmation_never_read_is_not_waited_for_again(
    make_client: Callable[..., tenure.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SUBSCRIBE confirmation lost all the same (here dropped on purpose, as read): its
    waiter raises BackendError after the socket timeout; the connection is then made
    again, and the channel's next waiter in that client is served (before, it raised the
    same BackendError 5 s later, as did every later one)."""
    c, other, name = one_held(make_client, "lint-lost")
    dropped = dropping_a_confirmation(monkeypatch, "sync")
    start = time.monotonic()
    with pytest.raises(tenure.BackendError, match="no confirmation of SUBSCRIBE"):
        c.lock(name).acquire(timeout=8.0)
    assert dropped
    assert 4.5 < time.monotonic() - start < 7.0
    served_once_released(c, other, name, 0.2)


async def test_async_confirmation_never_read_is_not_waited_for_again(
    async_make_client: Callable[..., tenure.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The asyncio twin of `test_sync_confirmation_never_read_is_not_waited_for_again`."""
    c, other, name = await async_one_held(async_make_client, "lint-lost-aio")
    dropped = dropping_a_confirmation(monkeypatch, "asyncio")
    start = time.monotonic()
    with pytest.raises(tenure.BackendError, match="no confirmation of SUBSCRIBE"):
        await c.lock(name).acquire(timeout=8.0)
    assert dropped
    assert 4.5 < time.monotonic() - start < 7.0
    await async_served_once_released(c, other, name, 0.2)
