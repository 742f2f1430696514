"""A client in a Lock's wake queue that is not seen waiting keeps its half score (the mark,
scripts/_wake.lua): an unlock goes to a client seen waiting first. Found by reviewer R3
(F1): a client that took the lock and released it with nobody else listening kept a whole
score, and a client with a half that an unlock chose got a whole one; either was woken
next, idle, before the real waiter W, who slept with the lock free until the releaser's
back-up look (0.1 s). Each test measures W's wait after the release that should wake it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import redis

import tenure
from support.twins import wait_until
from tenure import keys

LOOK = 0.1  # tenure.core.lock.WAKE_CHECK_GRACE: a wait this long was the back-up look's


def registered(r: redis.Redis, queue: str, client: tenure.Client) -> Callable[[], bool]:
    return lambda: r.zscore(queue, client.client_id) is not None


class Turn(NamedTuple):
    holds: threading.Event  # set once the client holds the lock
    released: threading.Event  # set once it released it
    held_at: list[float]  # when it took the lock (time.monotonic)


def take_in_turn(
    r: redis.Redis, client: tenure.Client, name: str, go: threading.Event | None = None
) -> Turn:
    """In a thread, ``client`` waits for the held lock ``name`` (up to 5 s), holds it until
    ``go`` is set (not at all without ``go``) and releases it; returns once ``client`` is in
    the lock's wake queue."""
    turn = Turn(threading.Event(), threading.Event(), [])

    def once() -> None:
        lock = client.lock(name)
        assert lock.acquire(timeout=5)
        turn.held_at.append(time.monotonic())
        turn.holds.set()
        if go is not None:
            assert go.wait(5)
        lock.release()
        turn.released.set()

    threading.Thread(target=once).start()
    assert wait_until(registered(r, keys.lock_wake_queue(name), client), 5)
    return turn


def wait_of_the_next_waiter(
    make_client: Callable[..., tenure.Client], r: redis.Redis, name: str
) -> float:
    """B takes ``name``, W waits behind it; seconds from B's release to W holding."""
    b = make_client().lock(name)
    assert b.acquire(timeout=1)
    w = take_in_turn(r, make_client(), name)
    released = time.monotonic()
    b.release()
    assert w.holds.wait(5)
    w.released.wait(5)
    return w.held_at[0] - released


def test_a_release_that_reached_nobody_marks_its_idle_client(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    # Z waits once, takes the lock from A, and releases it with nobody else listening:
    # Z stays queued, idle (its channels linger unread).
    name, queue = "idle-whole", keys.lock_wake_queue("idle-whole")
    a = make_client().lock(name)
    assert a.acquire()
    z = make_client()
    z_turn = take_in_turn(r, z, name)
    a.release()
    assert z_turn.released.wait(5)
    score = r.zscore(queue, z.client_id)
    assert score is None or score % 1 == 0.5, score  # not seen waiting since
    assert wait_of_the_next_waiter(make_client, r, name) < LOOK / 2


def test_a_marked_client_an_unlock_chose_stays_marked(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    # Z, put back with a half by its own release, is woken as the only client left by Y's
    # release (Y had nobody waiting): it is still idle, and must not become a waiter.
    name, queue = "idle-half", keys.lock_wake_queue("idle-half")
    a = make_client().lock(name)
    assert a.acquire()
    z, y = make_client(), make_client()
    z_go = threading.Event()
    z_turn = take_in_turn(r, z, name, z_go)
    a.release()
    assert z_turn.holds.wait(5)
    y_turn = take_in_turn(r, y, name)
    z_go.set()  # Z -> Y; Y releases with nobody waiting, and the unlock goes to Z
    assert y_turn.released.wait(5)
    time.sleep(LOOK * 1.2)  # past Y's back-up look: only the queue decides
    score = r.zscore(queue, z.client_id)
    assert score is None or score % 1 == 0.5, score
    assert wait_of_the_next_waiter(make_client, r, name) < LOOK / 2
