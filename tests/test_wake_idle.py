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

import redis

import tenure
from support.twins import wait_until
from tenure import keys

LOOK = 0.1  # tenure.core.lock.WAKE_CHECK_GRACE: a wait this long was the back-up look's


def registered(r: redis.Redis, queue: str, client: tenure.Client) -> Callable[[], bool]:
    return lambda: r.zscore(queue, client.client_id) is not None


def wait_of_the_next_waiter(
    make_client: Callable[..., tenure.Client], r: redis.Redis, name: str
) -> float:
    """B takes ``name``, W waits behind it; seconds from B's release to W holding."""
    b = make_client().lock(name)
    assert b.acquire(timeout=1)
    w, got = make_client(), threading.Event()
    taken: list[float] = []

    def wait() -> None:
        lock = w.lock(name)
        assert lock.acquire(timeout=5)
        taken.append(time.monotonic())
        got.set()
        lock.release()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert wait_until(registered(r, keys.lock_wake_queue(name), w), 5)
    released = time.monotonic()
    b.release()
    assert got.wait(5)
    waiter.join(5)
    return taken[0] - released


def test_a_release_that_reached_nobody_marks_its_idle_client(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    # Z waits once, takes the lock from A, and releases it with nobody else listening:
    # Z stays queued, idle (its channels linger unread).
    name, queue = "idle-whole", keys.lock_wake_queue("idle-whole")
    a = make_client().lock(name)
    assert a.acquire()
    z = make_client()
    done = threading.Event()

    def once() -> None:
        lock = z.lock(name)
        assert lock.acquire(timeout=5)
        lock.release()
        done.set()

    threading.Thread(target=once).start()
    assert wait_until(registered(r, queue, z), 5)
    a.release()
    assert done.wait(5)
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
    z_holds, z_go, y_done = threading.Event(), threading.Event(), threading.Event()

    def z_once() -> None:
        lock = z.lock(name)
        assert lock.acquire(timeout=5)
        z_holds.set()
        assert z_go.wait(5)
        lock.release()

    def y_once() -> None:
        lock = y.lock(name)
        assert lock.acquire(timeout=5)
        lock.release()
        y_done.set()

    threading.Thread(target=z_once).start()
    assert wait_until(registered(r, queue, z), 5)
    a.release()
    assert z_holds.wait(5)
    threading.Thread(target=y_once).start()
    assert wait_until(registered(r, queue, y), 5)
    z_go.set()  # Z -> Y; Y releases with nobody waiting, and the unlock goes to Z
    assert y_done.wait(5)
    time.sleep(LOOK * 1.2)  # past Y's back-up look: only the queue decides
    score = r.zscore(queue, z.client_id)
    assert score is None or score % 1 == 0.5, score
    assert wait_of_the_next_waiter(make_client, r, name) < LOOK / 2
