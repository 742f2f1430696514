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
from functools import partial
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


class _RawLock:
    """One participant of a raw Lock floor on Redisson's layout: tenure's own two scripts sent
    with bare redis-py, and a waiter that reads its own pub/sub socket (no reader thread, hold
    table or watchdog). One participant is one client, subscribed to the lock's channel for
    the whole run (as tenure's lingering subscription is under contention). It does not
    register in the wake queue, so every unlock goes to the channel (Redisson's way), unless
    ``one_woken``: its refused attempts register it and it listens on its client channel too,
    so an unlock wakes one client (tenure's way, docs/wire.md)."""

    def __init__(self, url: str, name: str, one_woken: bool = False) -> None:
        self.name, self.queue, self.url = name, keys.lock_wake_queue(name), url
        self.r = redis.Redis.from_url(url)
        self.scripts = scripts.get("lock_acquire"), scripts.get("lock_release")
        for script in self.scripts:
            self.r.script_load(script.source)
        client = str(uuid.uuid4())
        self.owner = f"{client}:1"
        self.sub = self.r.pubsub(ignore_subscribe_messages=True)
        self.sub.subscribe(keys.lock_channel(name))
        # The keys and the ARGV after the retry flag of lock_acquire.lua, and lock_release.lua's
        # ARGV[4]: a releaser that tries again at once is a listener with no waiter ('1').
        self.keys, self.register, self.idle = [name], [], "0"
        if one_woken:
            self.sub.subscribe(keys.lock_client_channel(name, client))
            self.keys, self.register, self.idle = [name, self.queue], [client], "1"

    def unlock(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for one unlock message."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.sub.get_message(timeout=left) is not None:
                return True
        return False

    def take(self, refused: Callable[[], object] = lambda: None) -> None:
        """Try until granted; after each refusal call ``refused``, then wait for an unlock."""
        sha, lock_keys = self.scripts[0].sha, self.keys
        argv: list[str | int] = [30000, self.owner, "", *self.register]  # ARGV[3]: retry
        while (ttl := self.r.evalsha(sha, len(lock_keys), *lock_keys, *argv)) is not None:
            refused()
            argv[2] = "1"
            self.unlock(ttl / 1000 if ttl > 0 else LEASE)

    def release(self) -> Any:
        """lock_release.lua's answer: 1 + the listeners the unlock reached (the releaser's own
        subscription among them; a str when NUMSUB was unsure), or -1 / -2 when it woke one
        client."""
        sha = self.scripts[1].sha
        heard = self.r.evalsha(sha, 2, self.name, self.queue, "0", 30000, self.owner, self.idle)
        if isinstance(heard, bytes) and self.register:
            self.settle()
        return heard

    def settle(self) -> None:
        """Make the lock channel's count true again, as tenure's client does (Valkey 9.0-9.1,
        docs/wire.md): else every unlock at P=8 goes to the channel."""
        from tenure.core.effects import UNSURE_COUNT

        channel = keys.lock_channel(self.name)
        commands = [("SUBSCRIBE", channel), ("UNSUBSCRIBE", channel), ("PUBSUB", "NUMSUB", channel)]
        # RESP2: the confirmations are the transaction's replies
        conn = redis.Redis.from_url(self.url, protocol=2).connection_pool.make_connection()
        try:
            for _ in range(8):  # tenure's rounds (core.effects.Settle)
                conn.send_packed_command(conn.pack_commands([("MULTI",), *commands, ("EXEC",)]))
                if int([conn.read_response() for _ in range(5)][-1][-1][1]) < UNSURE_COUNT:
                    return
        finally:
            conn.disconnect()

    def close(self) -> None:
        self.sub.close()
        self.r.close()


def raw_handoff(url: str, name: str) -> Participant:
    """The floor of a lock that does not barge, on Redisson's layout (:class:`_RawLock`). A
    release that woke another client's waiter lets it take the lock (as tenure's does): the
    releaser's next acquire waits for the next unlock, or for tenure's yield (adapted to the
    turn as tenure's is)."""
    from tenure.core.yielding import Yields  # imported here: an older tenure lacks it

    lock = _RawLock(url, name)
    yielding = [False]
    yields = Yields()  # tenure's yield, adapted to the turn as tenure's is

    def acquire() -> None:
        grace = yields.left(name, time.monotonic()) if yielding[0] else 0.0
        yielding[0] = False
        woken = [lock.unlock(grace) if grace > 0 else None]  # a yield, ended by an unlock or not

        def refused() -> None:
            if woken[0] is not None:
                yields.ended(name, True, woken[0])
                woken[0] = None

        lock.take(refused)
        if woken[0] is not None:
            yields.ended(name, False, woken[0])

    def release() -> None:
        heard = lock.release()
        lock.unlock(LEASE)  # our own unlock, heard by our subscription
        yielding[0] = int(heard) > 2  # and another client's waiter's (a str: NUMSUB unsure)
        if yielding[0]:
            yields.start(name, time.monotonic())

    return acquire, release, lock.close


def raw_barging(url: str, name: str, *, one_woken: bool = False) -> Participant:
    """The floor of a lock that barges, on Redisson's layout: :func:`raw_handoff` without the
    yield. The releaser's next acquire tries at once, as python-redis-lock's (and Redisson's)
    does, so the waiter its unlock woke wakes off the critical path and is refused when the
    releaser was first. It exists to measure the cost of fairness: beside the handoff floors
    (a handoff per acquisition, Jain 1.00), the rate this layout reaches when a process may
    take the lock straight back, and the Jain, p99 and worst wait it pays for it.

    ``one_woken``: an unlock wakes one client (tenure's wake queue) instead of every one, as
    python-redis-lock's BLPOP does: barging alone, without the herd."""
    lock = _RawLock(url, name, one_woken)

    def acquire() -> None:
        # Unlocks read before this attempt are stale (it sees their effect): the releaser's
        # own among them. Left unread, each would cost a refused retry later.
        while lock.sub.get_message(timeout=0) is not None:
            pass
        lock.take()

    return acquire, lock.release, lock.close


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
    "raw barging floor": raw_barging,
    "raw barging floor (one woken)": partial(raw_barging, one_woken=True),
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
