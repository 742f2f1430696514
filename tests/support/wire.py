"""Raw-redis inspection: what tenure wrote on the server, read without its internals."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any, cast

import redis

from support.twins import async_wait_until, wait_until
from tenure import keys


def text(value: bytes | str) -> str:
    """A reply as text: redis-py types replies ``bytes | str`` (``decode_responses``)."""
    return value.decode() if isinstance(value, bytes) else value


def owner_fields(r: redis.Redis, name: str, client_id: str) -> list[str]:
    """The fields of hash ``name`` that belong to the client ``client_id`` (its threads' or
    tasks' owner fields are ``<client_id>:<n>``, a write hold adds ``:write``)."""
    return sorted(text(f) for f in r.hkeys(name) if text(f).startswith(client_id + ":"))


def owner_of(r: redis.Redis, name: str, client_id: str) -> str:
    """The one owner field of ``client_id`` in hash ``name`` (the calling thread's or task's
    when nobody else of that client holds), without a ``:write`` suffix."""
    fields = {f.removesuffix(":write") for f in owner_fields(r, name, client_id)}
    assert len(fields) == 1, f"expected one owner of {client_id} in {name}: {fields}"
    return fields.pop()


def queue_of(r: redis.Redis, name: str) -> list[str]:
    """The fair lock's waiting line, head first."""
    return [text(o) for o in r.lrange(keys.fair_queue_key(name), 0, -1)]


def deadlines(r: redis.Redis, name: str) -> dict[str, float]:
    """The fair lock's waiter deadlines (server ms) by owner."""
    # withscores=True: (member, score) pairs, which redis-py's reply type does not say
    reply = r.zrange(keys.fair_timeout_key(name), 0, -1, withscores=True)
    pairs = cast(list[tuple[bytes, float]], reply)
    return {text(owner): score for owner, score in pairs}


def server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def pubsub_clients(r: redis.Redis) -> int:
    """How many connections are subscribed to something."""
    return sum(1 for c in r.client_list() if int(c.get("sub", 0)) + int(c.get("ssub", 0)) > 0)


def keys_on(servers: list[Any], key: str) -> list[bool]:
    """Whether ``key`` exists on each of ``servers`` (:class:`support.servers.Server`)."""
    out = []
    for s in servers:
        with s.client() as raw:
            out.append(bool(raw.exists(key)))
    return out


def overlaps(spans: Sequence[tuple[float, float]]) -> int:
    """How many (enter, exit) spans begin before the previous one (in start order) ended."""
    ordered = sorted(spans)
    return sum(1 for a, b in itertools.pairwise(ordered) if b[0] < a[1])


def max_concurrency(spans: list[tuple[int, int]]) -> int:
    """The most spans open at one instant."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    level = best = 0
    for _, step in events:
        level += step
        best = max(best, level)
    return best


def numsub(r: redis.Redis, channel: str) -> int:
    """Subscribers of ``channel`` (PUBSUB NUMSUB): a test waits on its own channel's count,
    never on the server's whole channel list (other clients' channels come and go)."""
    return int(r.pubsub_numsub(channel)[0][1])


def shared_channels(r: redis.Redis) -> list[bytes]:
    """The channels subscribed on the server, less tenure's client channels: a client waiting
    on a Lock listens on its own channel beside the lock's (keys.lock_client_channel)."""
    channels = [text(c).encode() for c in r.pubsub_channels()]
    return sorted(c for c in channels if b":tenure:" not in c)


class Messages:
    """Every message on the channels whose names start with ``prefix`` (a lock's channel and
    its clients' channels): a pattern listener, not counted among a channel's listeners,
    so it changes nothing."""

    def __init__(self, r: redis.Redis, prefix: str) -> None:
        self.pubsub = r.pubsub()
        self.pubsub.psubscribe(prefix + "*")
        self.pubsub.get_message(timeout=1)  # the psubscribe answer

    def take(self, seconds: float = 0.3, lease_ends: bool = False) -> list[tuple[str, str]]:
        """(channel, payload) of each message for ``seconds``; without ``lease_ends``, none
        of the lease ends (``-<ms>``: a renewal, a back-up look's) that wake nobody."""
        got, end = [], time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            message = self.pubsub.get_message(timeout=left)
            if message and message["type"] == "pmessage":
                channel, payload = message["channel"].decode(), message["data"].decode()
                if lease_ends or keys.renewed_lease(payload, channel) is None:
                    got.append((channel, payload))
        return got

    def close(self) -> None:
        self.pubsub.close()


SCRIPT_COMMANDS = {"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall"}
"""The commands a tenure script is sent with (as CLIENT LIST names them)."""


def script_waiting(r: redis.Redis) -> int | None:
    """The id of a connection whose script waits on the paused server (CLIENT LIST flag
    ``b``: its command postponed), if one does."""
    for entry in r.client_list():
        if entry.get("cmd") in SCRIPT_COMMANDS and "b" in entry["flags"]:
            return int(entry["id"])
    return None


async def async_kill_the_waiting_script(r: redis.Redis) -> bool:
    """Kill the connection whose script waits on the paused server (CLIENT KILL), once one
    does (2 s at most: asserted). True when the server killed it. A coroutine for the tests
    in ``tests/_async``; `kill_the_waiting_script` is its twin for the generated sync ones."""
    assert await async_wait_until(lambda: script_waiting(r) is not None, 2.0)
    victim = script_waiting(r)
    assert victim is not None
    return bool(r.client_kill_filter(_id=str(victim)))


def kill_the_waiting_script(r: redis.Redis) -> bool:
    """The sync twin of `async_kill_the_waiting_script`."""
    assert wait_until(lambda: script_waiting(r) is not None, 2.0)
    victim = script_waiting(r)
    assert victim is not None
    return bool(r.client_kill_filter(_id=str(victim)))
