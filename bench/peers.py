"""Contenders by name: tenure's locks and the peer libraries, each behind one factory.

A factory takes (url, lock name) and returns (acquire, release, close) for one participant
with its own connection(s), so a benchmark can put participants in threads or processes
without knowing the library. Peers are optional imports (``pip install -e '.[bench]'``):
:func:`available` lists those that import.

Peers run with their documented defaults where they wait: redis-py's Lock and sherlock poll
(every 0.1 s), python-redis-lock waits on BLPOP, pottery polls with a random back-off.
"""

from __future__ import annotations

import importlib.util
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis

import tenure
from tenure import keys, scripts

Participant = tuple[Callable[[], object], Callable[[], object], Callable[[], object]]
Factory = Callable[[str, str], Participant]

LEASE = 30  # seconds, for the peers that need one (tenure runs under its watchdog)


def peer_redis(url: str, **kwargs: Any) -> redis.Redis:
    """A redis-py client for a peer. redis-py 8 reads with a 5 s socket timeout by default,
    which would cut python-redis-lock's BLPOP (it waits up to the lease) short."""
    return redis.Redis.from_url(url, socket_timeout=2 * LEASE, **kwargs)


def tenure_lock(url: str, name: str) -> Participant:
    client = tenure.Client(url)
    lock = client.lock(name)
    return lock.acquire, lock.release, client.close


def tenure_fair_lock(url: str, name: str) -> Participant:
    client = tenure.Client(url)
    lock = client.fair_lock(name)
    return lock.acquire, lock.release, client.close


def redis_py_lock(url: str, name: str) -> Participant:
    r = peer_redis(url)
    lock = r.lock(name, timeout=LEASE)
    return lock.acquire, lock.release, r.close


def python_redis_lock(url: str, name: str) -> Participant:
    import redis_lock

    r = peer_redis(url)
    lock = redis_lock.Lock(r, name, expire=LEASE)
    return lock.acquire, lock.release, r.close


def sherlock_lock(url: str, name: str) -> Participant:
    import sherlock

    r = peer_redis(url)
    lock = sherlock.RedisLock(name, client=r, expire=LEASE, timeout=120)
    return lock.acquire, lock.release, r.close


def pottery_redlock(url: str, name: str) -> Participant:
    from pottery import Redlock

    r = peer_redis(url)
    lock = Redlock(key=name, masters={r}, auto_release_time=LEASE)
    return lock.acquire, lock.release, r.close


def raw_handoff(url: str, name: str) -> Participant:
    """The floor of a lock that does not barge, on Redisson's layout: tenure's own two scripts
    sent with bare redis-py, and a waiter that reads its own pub/sub socket (no reader thread,
    hold table or watchdog). A release that woke another client's waiter lets it take the
    lock (as tenure's does): the releaser's next acquire waits for the next unlock, or for
    tenure's yield (adapted to the turn as tenure's is). One participant is one client,
    subscribed for the whole run (as tenure's lingering subscription is under contention)."""
    from tenure.core.yielding import Yields  # imported here: an older tenure lacks it

    queue = keys.lock_wake_queue(name)
    r = redis.Redis.from_url(url)
    acquire_script, release_script = scripts.get("lock_acquire"), scripts.get("lock_release")
    for script in (acquire_script, release_script):
        r.script_load(script.source)
    channel = keys.lock_channel(name)
    sub = r.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(channel)
    owner = f"{uuid.uuid4()}:1"
    yielding = [False]
    yields = Yields()  # tenure's yield, adapted to the turn as tenure's is

    def unlock(seconds: float) -> bool:
        """Wait up to ``seconds`` for one unlock message."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if sub.get_message(timeout=left) is not None:
                return True
        return False

    def acquire() -> None:
        grace = yields.left(name, time.monotonic()) if yielding[0] else 0.0
        yielding[0] = False
        woken = unlock(grace) if grace > 0 else None  # a yield, ended by an unlock or not
        extra: list[int] = []
        while (ttl := r.evalsha(acquire_script.sha, 1, name, 30000, owner, *extra)) is not None:
            if woken is not None:
                yields.ended(name, True, woken)
                woken = None
            extra = [1]  # a retry (lock_acquire.lua)
            unlock(ttl / 1000 if ttl > 0 else LEASE)
        if woken is not None:
            yields.ended(name, False, woken)

    def release() -> None:
        # Not registered in the wake queue: every unlock goes to the channel (Redisson's way).
        heard = r.evalsha(release_script.sha, 2, name, queue, "0", 30000, owner)
        unlock(LEASE)  # our own unlock, heard by our subscription
        yielding[0] = int(heard) > 2  # and another client's waiter's (a str: NUMSUB unsure)
        if yielding[0]:
            yields.start(name, time.monotonic())

    def close() -> None:
        sub.close()
        r.close()

    return acquire, release, close


def raw_fair_handoff(url: str, name: str, *, reader_thread: bool = False) -> Participant:
    """The floor of a FairLock on Redisson's layout: tenure's fair scripts sent with bare
    redis-py, and a waiter that reads its own pub/sub socket, subscribed to its own waiter
    channel for the whole run (no reader thread, hold table, watchdog, renewal of queue
    entries or turn watcher). A waiter joins the queue, sleeps until woken as the head, then
    tries as a queued waiter.

    ``reader_thread``: a thread reads the socket and sets an event the waiter sleeps on, as
    tenure's sync listener did before its waiters read the socket themselves
    (bench/hop_probe.py prices that hop)."""
    from tenure.core.fair import alive_key  # imported here: an older tenure lacks the floors

    r = redis.Redis.from_url(url)
    acquire_script, release_script = scripts.get("fair_acquire"), scripts.get("fair_release")
    for script in (acquire_script, release_script):
        r.script_load(script.source)
    owner = f"{uuid.uuid4()}:1"
    lock_keys = [name, keys.fair_queue_key(name), keys.fair_timeout_key(name), alive_key(name)]
    prefix = keys.fair_waiter_channel_prefix(name)
    sub = r.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(prefix + owner)
    grace = 10000  # ms: tenure's default renewal period
    event, stop = threading.Event(), threading.Event()

    def read() -> None:
        while not stop.is_set():
            if sub.get_message(timeout=0.2) is not None:
                event.set()

    reader = threading.Thread(target=read, daemon=True) if reader_thread else None
    if reader is not None:
        reader.start()

    def woken(seconds: float) -> None:
        if reader is not None:
            event.wait(seconds)
            event.clear()
            return
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if sub.get_message(timeout=left) is not None:
                return

    def acquire() -> None:
        entry = 30000  # the first attempt joins the queue; then the caller is queued (-1)
        while True:
            ttl = r.evalsha(
                acquire_script.sha, len(lock_keys), *lock_keys,
                30000, owner, entry, grace, prefix, keys.UNLOCK_MESSAGE, 0,
            )  # fmt: skip
            if ttl is None:
                return
            entry = -1
            woken(ttl / 1000 if ttl > 0 else LEASE)

    def release() -> None:
        message = keys.UNLOCK_MESSAGE
        r.evalsha(release_script.sha, len(lock_keys), *lock_keys, message, 30000, owner, prefix)

    def close() -> None:
        stop.set()
        if reader is not None:
            reader.join()
        sub.close()
        r.close()

    return acquire, release, close


TENURE: dict[str, Factory] = {
    "tenure Lock": tenure_lock,
    "tenure FairLock": tenure_fair_lock,
}

PEERS: dict[str, tuple[str | None, Factory]] = {
    # name: (module that must import, factory)
    "redis-py Lock": (None, redis_py_lock),
    "python-redis-lock": ("redis_lock", python_redis_lock),
    "sherlock": ("sherlock", sherlock_lock),
    "pottery Redlock (1 master)": ("pottery", pottery_redlock),
}

FLOORS: dict[str, Factory] = {
    "raw handoff floor": raw_handoff,
    "raw fair handoff floor": raw_fair_handoff,
}

FACTORIES: dict[str, Factory] = {
    **TENURE,
    **{k: f for k, (_, f) in PEERS.items()},
    **FLOORS,
}


def role(name: str) -> str:
    """ "tenure", "floor" or "peer": how a subject is drawn and which column it fills."""
    return "tenure" if name.startswith("tenure") else "floor" if name in FLOORS else "peer"


def installed(module: str | None) -> bool:
    return module is None or importlib.util.find_spec(module) is not None


def available(*names: str) -> list[str]:
    """The peers among ``names`` whose library is installed, in that order."""
    return [n for n in names if installed(PEERS[n][0])]
