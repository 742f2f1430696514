"""The forms every lock object shares (one mixin): decorators, `with` exits, a closed client."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, cast

import pytest

import tenure


def test_decorator_forms_acquire_around_each_call(make_client, r):
    client = make_client()
    lock = client.lock("deco")
    seen: list[int] = []

    @lock
    def plain(x: int) -> int:
        seen.append(int(r.hlen("deco")))
        return x * 2

    @lock(timeout=1, lease_time=5)
    def leased() -> float:
        return float(r.pttl("deco"))

    assert plain(21) == 42
    assert plain.__name__ == "plain"
    assert 0 < leased() <= 5000
    assert seen == [1]
    assert r.exists("deco") == 0

    other = make_client().lock("deco")
    assert other.acquire()
    with pytest.raises(tenure.LockTimeout):
        client.lock("deco")(timeout=0.1)(lambda: None)()
    other.release()


def test_async_decorator_forms(server, r):
    async def main() -> tuple[int, int]:
        async with tenure.AsyncClient(server.url) as client:
            lock = client.lock("adeco")

            @lock
            async def inside() -> int:
                return int(await client.redis.hlen("adeco"))

            @lock(timeout=1)
            async def inside_timed() -> int:
                return int(await client.redis.hlen("adeco"))

            return await inside(), await inside_timed()

    assert asyncio.run(main()) == (1, 1)
    assert r.exists("adeco") == 0


def test_body_error_propagates_with_the_loss_as_a_note(make_client, r):
    lock = make_client().lock("note")

    def body_fails() -> None:
        with lock:
            r.delete("note")  # the hold is gone while the body runs
            raise ValueError("body failed")

    with pytest.raises(ValueError, match="body failed") as caught:
        body_fails()
    assert any("LockLostError" in note or "NotOwned" in note for note in caught.value.__notes__)

    with pytest.raises(tenure.NotOwnedError), lock:  # a body that completed: the loss raises
        r.delete("note")


def test_closed_client_refuses_every_operation_before_io(make_client, r):
    client = make_client()
    lock = client.lock("closed")
    client.close()
    for call in (lock.acquire, lock.locked, lock.force_release, lock.owned):
        with pytest.raises(tenure.LockError, match="closed"):
            call()
    assert r.exists("closed") == 0


def test_closed_async_client_refuses_acquire(server, r):
    async def main() -> None:
        client = tenure.AsyncClient(server.url)
        lock = client.lock("aclosed")
        await client.close()
        with pytest.raises(tenure.LockError, match="closed"):
            await lock.acquire()

    asyncio.run(main())
    assert r.exists("aclosed") == 0


def test_close_from_on_lost_callback_returns_at_once(make_client, r):
    closed = threading.Event()

    def on_lost(lock: tenure.Lock) -> None:
        client.close()  # from the renewal thread itself
        closed.set()

    client = make_client(watchdog_timeout=0.3)
    assert client.lock("self-close", on_lost=on_lost).acquire()
    r.delete("self-close")
    assert closed.wait(3)


def test_async_owner_is_the_caller_even_through_another_task(server, r):
    async def main() -> None:
        async with tenure.AsyncClient(server.url) as client:
            lock = client.lock("caller")
            assert await asyncio.wait_for(lock.acquire(), 5)  # runs in a task of its own
            # owned() is a coroutine whose owner was fixed here, at the call (the Awaitable
            # in its signature says no more): awaited in another task, it is still ours
            owned = cast(Coroutine[Any, Any, bool], lock.owned())
            assert await asyncio.create_task(owned) is True
            assert await lock.hold_count() == 1
            await asyncio.gather(lock.acquire())  # another wrapping task: a reentry
            assert await lock.hold_count() == 2
            await lock.release()
            await lock.release()
            assert not await lock.locked()
            fenced = client.fenced_lock("caller-f")
            token = await asyncio.wait_for(fenced.acquire_token(), 5)
            assert token is not None
            assert fenced.token == token
            await fenced.release()

    asyncio.run(main())
    assert r.exists("caller") == 0
