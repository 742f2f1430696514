"""The back-up look on a ReadWriteLock (scripts/lock_wake_check.lua) and the `readers` mark
of its wake queue (scripts/_rw_wake.lua), on real servers: a look that finds the lock free
sends the unlock to the lock's channel, where every waiting reader hears it, so the mark has
served; left there, the next release would wake every client again instead of one."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

import tenure
from tenure import keys, scripts


@contextmanager
def listener(r: redis.Redis, *channels: str) -> Iterator[redis.client.PubSub]:
    """A raw pub/sub connection subscribed to ``channels`` (a waiting client, as the
    server counts it), its confirmations read."""
    pubsub = r.pubsub()
    try:
        pubsub.subscribe(*channels)
        for _ in channels:
            assert pubsub.get_message(timeout=5)["type"] == "subscribe"
        yield pubsub
    finally:
        pubsub.close()


def heard(pubsub: redis.client.PubSub, seconds: float, most: int = 1) -> list[str]:
    """The channels of the messages ``pubsub`` receives within ``seconds`` (up to ``most``)."""
    got: list[str] = []
    end = time.monotonic() + seconds
    while len(got) < most and (left := end - time.monotonic()) > 0:
        message = pubsub.get_message(timeout=left)
        if message is not None and message["type"] == "message":
            channel = message["channel"]
            got.append(channel.decode() if isinstance(channel, bytes) else channel)
    return got


def test_a_look_that_finds_a_read_write_lock_free_drops_the_readers_mark(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    # Two clients' writers wait (registered, listening), and a reader waited: the mark.
    # The targeted unlock was lost (its client paused), so the look finds the lock free and
    # tells the lock's channel: every waiter hears it. The next write release must wake one
    # writer's client, not every client again.
    name = "rwlook"
    channel, queue = keys.rw_channel(name), keys.lock_wake_queue(name)
    own = channel + ":tenure:"
    r.zadd(queue, {"w1": 1, "w2": 2, "readers": 3})
    look = scripts.get("lock_wake_check")
    with listener(r, channel, own + "w1") as w1, listener(r, channel, own + "w2") as w2:
        freed = r.eval(look.source, 3, name, channel, queue, keys.WRITE_UNLOCK_MESSAGE)
        assert freed == 1
        assert heard(w1, 5) == [channel]  # every waiter hears it
        assert heard(w2, 5) == [channel]
        assert r.zscore(queue, "readers") is None  # the mark served: every reader heard
        writer = make_client().read_write_lock(name).write_lock()
        assert writer.acquire(timeout=0)
        writer.release()
        assert heard(w1, 5) == [own + "w1"]  # to one client alone
        # Not to the channel as well (that message would have come with w1's; the
        # writer's own look comes WAKE_CHECK_GRACE, 0.1 s, after the release).
        assert heard(w2, 0.05) == []
