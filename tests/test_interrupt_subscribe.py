"""A sync waiter interrupted by a signal handler right after its subscription was made: the
exception comes between the listener's answer and the flow's next step (a handler runs as
a call returns), so the flow gets it at its ``yield`` of the Subscribe. It must still
leave the channel: no ticket in the listener's table, no reference in the client's
channel map, the server's NUMSUB back to 0 (the lingering channel let go). Before, the
ticket stayed and the channel stayed subscribed for the client's life (R1: 1-7 channels
``redisson_sc:{...}`` / ``redisson_rwlock:{...}`` per 375 interrupted acquires).

Deterministic: a tracer raises at the return of the chosen function, in the main thread."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from support.twins import wait_until
from tenure import keys
from tenure.core.effects import Unsubscribe


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def waiting_in(thread: threading.Thread, name: str) -> bool:
    """True if ``thread`` is inside the pub/sub listener's method ``name`` now."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        code = frame.f_code
        if code.co_name == name and code.co_filename.endswith("listener.py"):
            return "self" in frame.f_locals and hasattr(frame.f_locals["self"], "_parking")
        frame = frame.f_back
    return False


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


# ------------------------------------------- a second interrupt inside the table's leave
LEAVERS: dict[str, tuple[Callable[[Any, str], Any], Callable[[str], str]]] = {
    "lock": (lambda client, name: client.lock(name), keys.lock_channel),
    "semaphore": (lambda client, name: client.semaphore(name), keys.semaphore_channel),
    "read": (lambda client, name: client.read_write_lock(name).read_lock(), keys.rw_channel),
}


@pytest.mark.parametrize("kind", sorted(LEAVERS))
def test_a_second_interrupt_inside_the_tables_leave_is_repaired(
    make_client, r: redis.Redis, kind: str
) -> None:
    # A first interrupt lands as the waiter begins its wait; its clean-up leaves the
    # channel, and a second lands inside the channel table's `leave`, once the last
    # ticket is gone and before the entry lingers (as `_relay` returns): the table then
    # holds an entry nobody waits on that never lingers, and the flow's next Unsubscribe
    # finds no ticket. The listener's janitor lets such an entry go: the server no longer
    # has the client subscribed within a bounded time (linger 0.5 s, twice, and slack).
    make, channel_of = LEAVERS[kind]
    name = f"stray-{kind}"
    channel = channel_of(name)
    holder_client, client = make_client(), make_client()
    if kind == "semaphore":
        assert holder_client.semaphore(name).try_set_permits(1)
    if kind == "read":
        holder = holder_client.read_write_lock(name).write_lock()
    else:
        holder = make(holder_client, name)
    assert holder.acquire()
    fired: list[str] = []
    main = threading.main_thread()

    def handler(signum: int, frame: Any) -> None:
        fired.append("wait")
        raise Alarm("in the wait")

    def interrupt_in_the_wait() -> None:
        # Once the main thread is inside the listener's wait (not still in its subscribe,
        # waiting for the server's confirmation): the first interrupt lands there.
        assert wait_until(lambda: waiting_in(main, "wait"), 10, 0.001)
        signal.pthread_kill(main.ident or 0, signal.SIGALRM)

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        code, caller = frame.f_code, frame.f_back
        if (
            fired == ["wait"]
            and code.co_name == "_relay"
            and code.co_filename.endswith("parking.py")
            and caller is not None
            and caller.f_code.co_name == "leave"
        ):
            return returning
        return None

    def returning(frame: Any, event: str, arg: Any) -> Any:
        if event == "return" and fired == ["wait"]:
            fired.append("leave")  # a raising tracer is unset: this is its last event
            raise Alarm("inside the table's leave")
        return returning

    previous = signal.signal(signal.SIGALRM, handler)
    sys.settrace(tracer)
    try:
        threading.Thread(target=interrupt_in_the_wait).start()
        with pytest.raises(Alarm):
            make(client, name).acquire(timeout=30)
    finally:
        sys.settrace(None)
        signal.signal(signal.SIGALRM, previous)
    assert fired == ["wait", "leave"]
    assert wait_until(lambda: channel.encode() not in r.pubsub_channels(), 3), r.pubsub_channels()
    listeners = client._runner._listener
    assert not any(channel in lst._parking.channels for lst in listeners._by_node.values())
    holder.release()
    # The client still waits and wakes on that channel.
    assert holder.acquire()
    done = threading.Event()

    def waiter() -> None:
        got = make(client, name)
        if got.acquire(timeout=10):
            got.release()
            done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
    holder.release()
    assert done.wait(5)
    thread.join(5)
