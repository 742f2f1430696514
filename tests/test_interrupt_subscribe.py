"""A sync waiter interrupted by a signal handler right after its subscription was made: the
exception comes between the listener's answer and the flow's next step (a handler runs as
a call returns), so the flow gets it at its ``yield`` of the Subscribe. It must still
leave the channel: no ticket in the listener's table, no reference in the client's
channel map, the server's NUMSUB back to 0 (the lingering channel let go). Before, the
ticket stayed and the channel stayed subscribed for the client's life (R1: 1-7 channels
``redisson_sc:{...}`` / ``redisson_rwlock:{...}`` per 375 interrupted acquires).

Deterministic: a tracer raises at the return of the chosen function, in the main thread."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from support.twins import wait_until
from tenure.core.effects import Unsubscribe


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def left_no_waiter(client: Any, channel: str) -> bool:
    listeners = client._runner._listener
    tables = [listener._parking for listener in listeners._by_node.values()]
    entries = [table.channels[channel] for table in tables if channel in table.channels]
    return channel not in listeners._refs and not any(entry.tickets for entry in entries)


# Where the interrupt lands: once the client's subscribe returned its answer (a handler
# run as Listener.subscribe returns, inside Listeners.subscribe, and the runner's steps).
# Or as the runner is about to perform the flow's Unsubscribe ("leaving").
PLACES = {"answered": ("subscribe", "listener.py"), "leaving": ("perform", "runner.py")}

PRIMITIVES: dict[str, Callable[[Any, str], Any]] = {
    "lock": lambda client, name: client.lock(name),
    "semaphore": lambda client, name: client.semaphore(name),
}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("kind", sorted(PRIMITIVES))
def test_an_interrupt_once_subscribed_leaves_the_channel(
    make_client, r: redis.Redis, kind: str, place: str
) -> None:
    name = f"sub-{kind}-{place}"
    holder_client, client = make_client(), make_client()
    if kind == "semaphore":
        assert holder_client.semaphore(name).try_set_permits(1)
    holder = PRIMITIVES[kind](holder_client, name)
    assert holder.acquire()
    before = set(r.pubsub_channels())
    function, filename = PLACES[place]
    fired: list[str] = []
    channels: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        if not (code.co_name == function and code.co_filename.endswith(filename)):
            return None
        effect = frame.f_locals.get("effect")
        if place == "leaving":  # the 'call' event: the perform has not begun
            main = threading.current_thread() is threading.main_thread()
            if not fired and main and isinstance(effect, Unsubscribe):
                fired.append(code.co_name)
                channels.append(effect.channel)
                raise Alarm("as the runner performs the Unsubscribe")
            return None
        return local

    def local(frame: Any, event: str, arg: Any) -> Any:
        if (
            event == "return"
            and not fired
            and threading.current_thread() is threading.main_thread()
        ):
            fired.append(frame.f_code.co_name)
            channels.append(frame.f_locals["channel"])
            raise Alarm(f"as {frame.f_code.co_name} returned")
        return local

    sys.settrace(tracer)
    try:
        with pytest.raises(Alarm):
            # "leaving": the wait times out (the holder keeps it), then leaves.
            PRIMITIVES[kind](client, name).acquire(timeout=0.5 if place == "leaving" else 30)
    finally:
        sys.settrace(None)
    assert fired == [function]
    channel = channels[0]
    assert left_no_waiter(client, channel)
    assert wait_until(lambda: set(r.pubsub_channels()) <= before, 3), r.pubsub_channels()
    holder.release()
    # The client still waits and wakes on that channel.
    assert holder.acquire()
    done = threading.Event()

    def waiter() -> None:
        got = PRIMITIVES[kind](client, name)
        if got.acquire(timeout=10):
            got.release()
            done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
    holder.release()
    assert done.wait(5)
    thread.join(5)
