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
from collections.abc import Callable
from typing import Any

import redis

import tenure

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

FACTORIES: dict[str, Factory] = {**TENURE, **{k: f for k, (_, f) in PEERS.items()}}


def installed(module: str | None) -> bool:
    return module is None or importlib.util.find_spec(module) is not None


def available(*names: str) -> list[str]:
    """The peers among ``names`` whose library is installed, in that order."""
    return [n for n in names if installed(PEERS[n][0])]
