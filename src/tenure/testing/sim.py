"""A deterministic simulator of tenure (FoundationDB / TigerBeetle VOPR style; docs/testing.md).

One seeded process, one discrete-event scheduler, one virtual clock: no real time, no threads,
no asyncio. Simulated clients run tenure's **real** sans-I/O flows (`tenure.core`) and a
simulated server runs the **real** Lua scripts (`tenure.scripts`, with their ``_*.lua``
includes spliced as the backend loads them) in Lua 5.1 through ``lupa``, over a small in-memory
keyspace whose expiry and ``TIME`` follow the virtual clock. Each client's pub/sub table is
tenure's own `tenure.core.parking.Parking`, which decides whom a message wakes as it
does in the real listener.

Faults (seeded, each switchable in `Faults`): message delay (every message), reordering
across connections (independent delays; one connection stays FIFO), pub/sub connection resets
(a lost pub/sub message is a reset: TCP does not drop one message and go on), server pauses,
client pauses, cancellation of an acquire at any step, client clock drift within the
allowance, a server restart without persistence (down for longer than any lease),
crashes of candidates' clients, and (off by default: ``Faults.drops``) holds deleted on the
server behind their owners' backs, by an operator's force-release or a failover that lost
the writes, now and then just before their owner re-enters.

Checkers: mutual exclusion (at most one owner field in a lock hash; no two owners believing
they hold while both their leases are valid on their own clocks, checked at every grant and
every 10 ms, and the server has the hold of each: a belief a drop made stale is left out
until its owner next asks the server, whose answer must tell it), FIFO for FairLock (checked
on the server when a grant is made), no lost wake-up (a free lock with live waiters is taken
within one round trip plus the rules' bounds), no orphan hold or queue entry after a
cancellation, every loss reported (and only losses); for elections (candidates that
campaign, lead, proclaim, resign, and whose clients crash), never two leaders at one moment
(no two candidates believing they lead on their own clocks, and a believer is the leader the
server names), terms that strictly increase per name, and no vacancy left while a live
candidate campaigns (filled within the bound of a lock's wake-up). For ReadWriteLocks
(``Options.rwlocks``: workers take read and write holds, re-enter, downgrade, release in
either order), never a writer beside any other holder (in the hash after every script, and
no two owners believing so on their own clocks), every loss reported, and no waiter left
waiting while the lock could take it (free; or in read mode, for a reader) beyond a
wake-up's bound: the one-client wake rule of ``scripts/_rw_wake.lua`` under the faults.

``python -m tenure.testing.sim --seeds 1000`` searches; a failing seed replays exactly
(``--seed N``) and prints the events that led to the broken rule.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import logging
import math
import random
import sys
import time as real_time
import uuid
from collections import deque
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from lupa import lua51

from tenure import keys, scripts
from tenure.core import (
    composite,
    effects,
    election,
    fair,
    holds,
    lock,
    parking,
    semaphore,
    watchdog,
)
from tenure.core.context import Context
from tenure.core.effects import (
    Background,
    Call,
    Command,
    Drain,
    Sleep,
    Subscribe,
    Unsubscribe,
    Wait,
    WatchHolds,
    just,
)
from tenure.core.election import ElectionCore
from tenure.core.fair import FairLockCore
from tenure.core.fenced import FencedLockCore
from tenure.core.holds import Hold, HoldTable
from tenure.core.listening import JANITOR, MAX_RETRY, Listening
from tenure.core.lock import LockCore
from tenure.core.parking import Parking, Ticket
from tenure.core.rwlock import ReadLockCore, WriteLockCore
from tenure.core.watchdog import refresh_waiters, renew, report_lost
from tenure.errors import BackendError, LockLostError, NotOwnedError

log = logging.getLogger("tenure")

SUBSCRIBE_TIMEOUT = 5.0
"""Seconds a Subscribe waits for its confirmation (the client's socket timeout)."""
EPOCH_MS = 1_700_000_000_000
"""The server's wall clock (TIME) at virtual time 0."""
KINDS: dict[str, type[LockCore]] = {
    "lock": LockCore,
    "fair": FairLockCore,
    "fenced": FencedLockCore,
}
"""The kinds of lock a seed draws its locks from."""
RW = "rw"
"""The kind of a ReadWriteLock name (``Options.rwlocks``): a read and a write side per client."""
READ, WRITE = "read", "write"
READ_HELD = "/read-held"
"""`Sim.free_since` key suffix: since when a ReadWriteLock is in read mode with a reader
waiting (a reader could get in)."""
RELEASES = ("lock_release", "fair_release")
FORCE_RELEASES = ("lock_force_release", "fair_force_release", "rw_force_release")
"""Scripts that delete a lock whoever holds it (an operator's: `Sim.force_release`)."""
RW_ACQUIRES = ("rw_read_acquire", "rw_write_acquire")
RW_MESSAGES = (keys.READ_UNLOCK_MESSAGE, keys.WRITE_UNLOCK_MESSAGE)
"""Scripts by which an owner ends its own hold (``+guard``: a reconcile's)."""
WRITE_LOSS_HIDDEN = "write loss hidden by a read"
"""The rule a read taken under its owner's own write hold breaks when the answer does not
report that the write hold was lost (`Sim.heard`)."""
RULES = frozenset(
    {
        "mutual exclusion",
        "FIFO",
        "fencing token",
        "lost wake-up",
        "late lease-end re-check",
        "orphan hold",
        "orphan queue entry",
        "loss not reported",
        "loss reported for no loss",
        "two leaders",
        "terms increase",
        "no leader elected",
        "reader left waiting",
        WRITE_LOSS_HIDDEN,
    }
)
"""What the checkers check, by the names a `Violation` gives (``Options.skip``)."""
PLANTS = (
    "release_without_owner_check",
    "recheck_before_resubscribed",
    "renewal_after_release",
    "reader_stops_without_hand_on",
    "campaign_without_leader_check",
    "resign_without_handover",
    "rw_release_wakes_nobody",
    "rw_read_granted_beside_writer",
    "rw_unlock_ignores_waiting_readers",
    "reentry_granted_afresh",
)
"""Bugs the simulator can swap in (never shipped behaviour) to show that it finds them."""


class Violation(AssertionError):
    """A checked rule broke; the message names it, `history` says what led to it."""

    def __init__(self, rule: str, detail: str, history: str = "") -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule, self.detail, self.history = rule, detail, history


# ------------------------------------------------------------------ the virtual clock
class _Clock:
    """Stands in for the ``time`` module inside `tenure.core` during a run: the flows
    read ``time.monotonic()`` of the client whose step runs now (each its own rate/offset)."""

    def __init__(self, sim: Sim) -> None:
        self._sim = sim

    def monotonic(self) -> float:
        return self._sim.current.local()

    def __getattr__(self, name: str) -> Any:  # anything else the core might read
        return getattr(real_time, name)


CLOCKED = (composite, effects, election, fair, holds, lock, parking, semaphore, watchdog)
"""The core modules that read ``time.monotonic()``."""


@contextmanager
def _virtual_time(sim: Sim) -> Iterator[None]:
    clock = _Clock(sim)
    saved = [vars(module)["time"] for module in CLOCKED]
    for module in CLOCKED:
        vars(module)["time"] = clock
    try:
        yield
    finally:
        for module, old in zip(CLOCKED, saved, strict=True):
            vars(module)["time"] = old


# ------------------------------------------------------------------ the server
class WrongType(Exception):
    pass


class SimulatorGap(Exception):
    """A script used a command the simulated server does not have (add it to Server)."""


@dataclass(frozen=True)
class _Status:
    text: str


class Server:
    """An in-memory keyspace with the commands tenure's scripts use, scripts run by Lua 5.1
    (``lupa``), pub/sub, and the virtual clock for expiry and ``TIME``. Time is frozen while a
    script runs, as in Redis 7."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.data: dict[str, tuple[str, Any]] = {}
        self.expires: dict[str, int] = {}
        self.subs: dict[str, dict[Any, None]] = {}
        """Channel -> the pub/sub connections subscribed (insertion-ordered: deterministic)."""
        self.now_ms = EPOCH_MS
        self.lua = lua51.LuaRuntime()
        self.lua.execute(
            """
            local py = ...
            redis = {}
            function redis.call(...)
                local r = py(...)
                if type(r) == 'table' and r.err then error(r.err, 2) end
                return r
            end
            redis.pcall = py
            function redis.error_reply(m) return {err = m} end
            function redis.status_reply(m) return {ok = m} end
            """,
            self._from_lua,
        )
        self._compiled: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        """Script name -> a replacement source (a planted bug); else the script's own."""
        self.patches: dict[str, Callable[[str], str]] = {}
        """Script name -> a planted bug's rewrite of its source, applied to the script and
        its variants (``<name>+guard``: a reconcile's release)."""
        self.commands: dict[str, Callable[..., Any]] = {
            name[4:]: getattr(self, name) for name in dir(self) if name.startswith("cmd_")
        }
        self.publishing: list[tuple[str, str]] = []
        self.joins: dict[tuple[str, str], int] = {}
        """(fair queue key, owner) -> order of its RPUSH: the FIFO checker's reference."""
        self._joined = itertools.count()

    # ---- the keyspace
    def _live(self, key: str) -> tuple[str, Any] | None:
        at = self.expires.get(key)
        if at is not None and at <= self.now_ms:
            self.sim.expired(key, self.data.get(key))
            self._delete(key)
        return self.data.get(key)

    def _delete(self, key: str) -> bool:
        self.expires.pop(key, None)
        return self.data.pop(key, None) is not None

    def _get(self, key: str, kind: str, create: Any = None) -> Any:
        entry = self._live(key)
        if entry is None:
            if create is None:
                return None
            self.data[key] = (kind, create)
            return create
        if entry[0] != kind:
            raise WrongType(key)
        return entry[1]

    def _drop_empty(self, key: str, value: Any) -> None:
        if not value:
            self._delete(key)

    # ---- commands (replies: int, str, None, list, _Status)
    def cmd_info(self, section: str = "") -> str:
        return "# Persistence\r\naof_enabled:0\r\n"  # none: see Sim._restart

    def cmd_config(self, verb: str, name: str) -> list[str]:
        return [name, ""]  # CONFIG GET save: no save points

    def cmd_time(self) -> list[Any]:
        return [str(self.now_ms // 1000), str(self.now_ms % 1000 * 1000)]

    def cmd_exists(self, *names: str) -> int:
        return sum(self._live(k) is not None for k in names)

    def cmd_type(self, key: str) -> _Status:
        entry = self._live(key)
        return _Status(entry[0] if entry else "none")

    def cmd_del(self, *names: str) -> int:
        return sum(self._live(k) is not None and self._delete(k) for k in names)

    def cmd_pttl(self, key: str) -> int:
        if self._live(key) is None:
            return -2
        at = self.expires.get(key)
        return -1 if at is None else at - self.now_ms

    def cmd_pexpire(self, key: str, ms: str) -> int:
        if self._live(key) is None:
            return 0
        self.expires[key] = self.now_ms + int(ms)
        if int(ms) <= 0:
            self._live(key)
        return 1

    def cmd_get(self, key: str) -> str | None:
        return self._get(key, "string")  # type: ignore[no-any-return]

    def cmd_set(self, key: str, value: str, *options: str) -> _Status:
        self._delete(key)
        self.data[key] = ("string", str(value))
        if len(options) == 2 and options[0].lower() == "px":
            self.expires[key] = self.now_ms + int(options[1])
        return _Status("OK")

    def cmd_incrby(self, key: str, by: str) -> int:
        value = int(self._get(key, "string") or 0) + int(by)
        ttl = self.expires.get(key)
        self.data[key] = ("string", str(value))
        if ttl is not None:
            self.expires[key] = ttl
        return value

    def cmd_incr(self, key: str) -> int:
        return self.cmd_incrby(key, "1")

    def cmd_decr(self, key: str) -> int:
        return self.cmd_incrby(key, "-1")

    def cmd_decrby(self, key: str, by: str) -> int:
        return self.cmd_incrby(key, str(-int(by)))

    def cmd_hget(self, key: str, name: str) -> str | None:
        return (self._get(key, "hash") or {}).get(name)

    def cmd_hmget(self, key: str, *names: str) -> list[str | None]:
        table = self._get(key, "hash") or {}
        return [table.get(n) for n in names]

    def cmd_hexists(self, key: str, name: str) -> int:
        return int(name in (self._get(key, "hash") or {}))

    def cmd_hgetall(self, key: str) -> list[str]:
        return [x for pair in (self._get(key, "hash") or {}).items() for x in pair]

    def cmd_hlen(self, key: str) -> int:
        return len(self._get(key, "hash") or {})

    def cmd_hset(self, key: str, *pairs: str) -> int:
        table = self._get(key, "hash", {})
        added = 0
        for name, value in zip(pairs[::2], pairs[1::2], strict=True):
            added += name not in table
            table[name] = str(value)
        return added

    def cmd_hincrby(self, key: str, name: str, by: str) -> int:
        table = self._get(key, "hash", {})
        value = table[name] = str(int(table.get(name, 0)) + int(by))
        return int(value)

    def cmd_hdel(self, key: str, *names: str) -> int:
        table = self._get(key, "hash") or {}
        gone = sum(table.pop(n, None) is not None for n in names)
        self._drop_empty(key, table)
        return gone

    def cmd_rpush(self, key: str, *values: str) -> int:
        items = self._get(key, "list", [])
        for value in values:
            items.append(value)
            if key.startswith(keys.FAIR_QUEUE):
                self.joins[key, value] = next(self._joined)
        return len(items)

    def cmd_lpush(self, key: str, *values: str) -> int:
        items = self._get(key, "list", [])
        for value in values:
            items.insert(0, value)
        return len(items)

    def cmd_lpop(self, key: str) -> str | None:
        items = self._get(key, "list")
        if not items:
            return None
        value: str = items.pop(0)
        self._drop_empty(key, items)
        return value

    def cmd_lindex(self, key: str, index: str) -> str | None:
        items = self._get(key, "list") or []
        i = int(index)
        return items[i] if -len(items) <= i < len(items) else None

    def cmd_lrange(self, key: str, start: str, stop: str) -> list[str]:
        items = self._get(key, "list") or []
        a, b = int(start), int(stop)
        b = len(items) + b if b < 0 else b
        return list(items[a : b + 1])

    def cmd_llen(self, key: str) -> int:
        return len(self._get(key, "list") or [])

    def cmd_lpos(self, key: str, value: str) -> int | None:
        items = self._get(key, "list") or []
        return items.index(value) if value in items else None

    def cmd_lrem(self, key: str, count: str, value: str) -> int:
        items = self._get(key, "list") or []
        kept = [v for v in items if v != value]
        gone = len(items) - len(kept)
        items[:] = kept
        self._drop_empty(key, items)
        return gone

    def cmd_zadd(self, key: str, *args: str) -> int:
        flags = set()
        rest = list(args)
        while rest and rest[0].upper() in ("NX", "XX", "LT", "GT", "CH"):
            flags.add(rest.pop(0).upper())
        table = self._get(key, "zset", {})
        changed = 0
        for score_text, member in zip(rest[::2], rest[1::2], strict=True):
            score = float(score_text)
            old = table.get(member)
            if (old is None and "XX" in flags) or (old is not None and "NX" in flags):
                continue
            if old is not None and (
                ("LT" in flags and score >= old) or ("GT" in flags and score <= old)
            ):
                continue
            table[member] = score
            changed += old is None or ("CH" in flags and old != score)
        self._drop_empty(key, table)
        return changed

    def cmd_zscore(self, key: str, member: str) -> str | None:
        score = (self._get(key, "zset") or {}).get(member)
        return None if score is None else _score(score)

    def cmd_zmscore(self, key: str, *members: str) -> list[str | None]:
        table = self._get(key, "zset") or {}
        return [None if m not in table else _score(table[m]) for m in members]

    def cmd_zrem(self, key: str, *members: str) -> int:
        table = self._get(key, "zset") or {}
        gone = sum(table.pop(m, None) is not None for m in members)
        self._drop_empty(key, table)
        return gone

    def cmd_zcard(self, key: str) -> int:
        return len(self._get(key, "zset") or {})

    def _sorted(self, key: str) -> list[tuple[str, float]]:
        table = self._get(key, "zset") or {}
        return sorted(table.items(), key=lambda item: (item[1], item[0]))

    def cmd_zrange(self, key: str, start: str, stop: str, *options: str) -> list[str]:
        items = self._sorted(key)
        a, b = int(start), int(stop)
        b = len(items) + b if b < 0 else b
        picked = items[a : b + 1]
        if options and options[0].lower() == "withscores":
            return [x for m, s in picked for x in (m, _score(s))]
        return [m for m, _ in picked]

    def cmd_zrangebyscore(self, key: str, low: str, high: str) -> list[str]:
        lo, hi = float(low), float(high)
        return [m for m, s in self._sorted(key) if lo <= s <= hi]

    def cmd_zremrangebyscore(self, key: str, low: str, high: str) -> int:
        table = self._get(key, "zset") or {}
        gone = self.cmd_zrangebyscore(key, low, high)
        for member in gone:
            del table[member]
        self._drop_empty(key, table)
        return len(gone)

    # ---- streams (the election's change log: XADD with MAXLEN, XRANGE, XREVRANGE)
    def cmd_xadd(self, key: str, *args: str) -> str | None:
        """XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold] <* | id> field value ...
        (an explicit id must be above the last; ``~`` trims exactly, which Redis allows)."""
        rest = list(args)
        create, maxlen = True, None
        while rest and rest[0].upper() in ("NOMKSTREAM", "MAXLEN"):
            word = rest.pop(0).upper()
            if word == "NOMKSTREAM":
                create = False
                continue
            if rest[0] in ("=", "~"):
                rest.pop(0)
            maxlen = int(rest.pop(0))
        wanted, pairs = rest[0], rest[1:]
        if not pairs or len(pairs) % 2:
            raise ValueError("XADD needs field value pairs")  # a script bug: stop the run
        stream = self._get(key, "stream")
        if stream is None:
            if not create:
                return None
            stream = self._get(key, "stream", {"entries": [], "last": (0, 0)})
        last = stream["last"]
        if wanted == "*":
            ms = self.now_ms
            new = (ms, 0) if ms > last[0] else (last[0], last[1] + 1)
        else:
            new = _stream_id(wanted, 0)
            if new <= last:
                raise ValueError("XADD id not above the stream's last id")
        stream["entries"].append((new, [str(p) for p in pairs]))
        stream["last"] = new
        if maxlen is not None and len(stream["entries"]) > maxlen:
            del stream["entries"][: len(stream["entries"]) - maxlen]
        return f"{new[0]}-{new[1]}"

    def _stream_range(
        self, key: str, low: str, high: str, options: tuple[str, ...]
    ) -> list[tuple[tuple[int, int], list[str]]]:
        """Entries of stream ``key`` from ``low`` to ``high`` (oldest first), and the COUNT."""
        if options and (len(options) != 2 or options[0].upper() != "COUNT"):
            raise ValueError(f"XRANGE options {options} are not simulated")
        stream = self._get(key, "stream")
        lo, hi = _range_bound(low, lower=True), _range_bound(high, lower=False)
        return [e for e in (stream["entries"] if stream else ()) if lo <= e[0] <= hi]

    def cmd_xrange(self, key: str, low: str, high: str, *options: str) -> list[Any]:
        """XRANGE key start end [COUNT n]: ``-``, ``+``, ``ms``, ``ms-seq``, ``(`` exclusive."""
        found = self._stream_range(key, low, high, options)
        if options:
            found = found[: int(options[1])]
        return [[f"{i[0]}-{i[1]}", list(fields)] for i, fields in found]

    def cmd_xrevrange(self, key: str, high: str, low: str, *options: str) -> list[Any]:
        """XREVRANGE key end start [COUNT n]: newest first."""
        found = self._stream_range(key, low, high, options)[::-1]
        if options:
            found = found[: int(options[1])]
        return [[f"{i[0]}-{i[1]}", list(fields)] for i, fields in found]

    def cmd_xlen(self, key: str) -> int:
        return len((self._get(key, "stream") or {"entries": []})["entries"])

    def cmd_publish(self, channel: str, message: str) -> int:
        self.publishing.append((channel, message))
        return len(self.subs.get(channel, ()))

    cmd_spublish = cmd_publish

    def cmd_pubsub(self, sub: str, *channels: str) -> list[Any]:
        """PUBSUB NUMSUB / SHARDNUMSUB (a Lock's release counts who listens)."""
        if sub.lower() not in ("numsub", "shardnumsub"):
            raise ValueError(f"PUBSUB {sub} is not simulated")
        return [x for c in channels for x in (c, len(self.subs.get(c, ())))]

    # ---- scripts
    def _from_lua(self, name: str, *args: Any) -> Any:
        command = self.commands.get(name.lower())
        if command is None:  # a gap in the simulator, not a server's answer: stop the run
            raise SimulatorGap(f"the simulated server has no command {name!r}")
        try:
            reply = command(*(_text(a) for a in args))
        except WrongType:
            return self.lua.table_from(
                {"err": "WRONGTYPE Operation against a key holding the wrong kind of value"}
            )
        return self._to_lua(reply)

    def _to_lua(self, reply: Any) -> Any:
        if reply is None:
            return False
        if isinstance(reply, _Status):
            return self.lua.table_from({"ok": reply.text})
        if isinstance(reply, list):
            return self.lua.table_from([self._to_lua(x) for x in reply])
        return reply

    def _from_script(self, value: Any) -> Any:
        if value is None or value is False:
            return None
        if value is True:
            return 1
        if isinstance(value, float | int):
            return int(value)
        if isinstance(value, str):
            return value.encode()
        if value["err"] is not None:
            raise BackendError(str(value["err"]))
        if value["ok"] is not None:
            return str(value["ok"])
        out = []
        for i in itertools.count(1):
            item = value[i]
            if item is None:
                break
            out.append(self._from_script(item))
        return out

    def run(self, effect: Call | Command) -> Any:
        """Carry out a script or command now (atomically); its reply, or BackendError."""
        self.now_ms = EPOCH_MS + int(self.sim.now * 1000)
        self.publishing = []
        try:
            if isinstance(effect, Command):
                reply = self.commands[str(effect.args[0]).lower()](
                    *(str(a) for a in effect.args[1:])
                )
                return _plain(reply)
            name = effect.script.name
            source = self.sources.get(name, effect.script.source)
            patch = self.patches.get(name.split("+")[0])
            if patch is not None:
                source = patch(source)
            fn = self._compiled.get(source)
            if fn is None:
                fn = self._compiled[source] = self.lua.execute(
                    "return function(KEYS, ARGV)\n" + source + "\nend"
                )
            before = self._lock_fields(effect)
            elects = name.startswith("election_") and name != "election_renew"
            leader = self.leader(effect.keys[0]) if elects else None
            try:
                value = fn(
                    self.lua.table_from(list(effect.keys)),
                    self.lua.table_from([str(a) for a in effect.args]),
                )
            except lua51.LuaError as error:
                if "SimulatorGap" in str(error):
                    raise SimulatorGap(f"script {name}: {error}") from None
                raise BackendError(f"script {name}: {error}") from None
            reply = self._from_script(value)
            self.sim.ran(effect, before, reply)
            if elects:
                self.sim.ran_election(effect, leader)
            return reply
        finally:
            for channel, message in self.publishing:
                for conn in self.subs.get(channel, {}):
                    conn.push("message", channel, message)

    def _lock_fields(self, effect: Call) -> dict[str, str] | None:
        if not effect.keys or not effect.script.name.startswith(
            ("lock_", "fair_", "fenced_", "rw_")
        ):
            return None
        entry = self._live(effect.keys[0])
        return dict(entry[1]) if entry is not None and entry[0] == "hash" else {}

    def fields(self, key: str) -> dict[str, str]:
        """The fields of hash ``key`` now (read-only for checkers)."""
        at = self.expires.get(key)
        entry = self.data.get(key)
        if entry is None or (at is not None and at <= EPOCH_MS + int(self.sim.now * 1000)):
            return {}
        return dict(entry[1]) if entry[0] == "hash" else {}

    def leader(self, key: str) -> tuple[str, int] | None:
        """(owner, term) of election leader hash ``key`` now, None when vacant (read-only)."""
        fields = self.fields(key)
        owner = fields.get("owner")
        return None if owner is None else (owner, int(fields.get("term") or 0))

    def queue(self, name: str) -> list[tuple[str, float]]:
        """(owner, entry deadline ms) of a fair lock's live queue entries, head first."""
        items = self.data.get(keys.fair_queue_key(name), ("list", []))[1]
        scores = self.data.get(keys.fair_timeout_key(name), ("zset", {}))[1]
        now = EPOCH_MS + self.sim.now * 1000
        return [(o, scores[o]) for o in items if scores.get(o, 0) > now]

    def flush(self) -> None:
        self.data.clear()
        self.expires.clear()
        self.joins.clear()


def _publish_nothing(source: str) -> str:
    """Planted bug ``rw_release_wakes_nobody``: the script's PUBLISHes do nothing (each
    answers 0 listeners): a release frees the lock and tells no waiter."""
    shadow = (
        "local redis = {pcall = redis.pcall, error_reply = redis.error_reply,\n"
        "    status_reply = redis.status_reply, call = function(name, ...)\n"
        "        if name == 'publish' then return 0 end\n"
        "        return redis.call(name, ...)\n"
        "    end}\n"
    )
    return shadow + source


def _plain(reply: Any) -> Any:
    """A command's reply as redis-py gives it (bulk strings as bytes)."""
    if isinstance(reply, str):
        return reply.encode()
    if isinstance(reply, list):
        return [_plain(x) for x in reply]
    return reply.text if isinstance(reply, _Status) else reply


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _score(score: float) -> str:
    return str(int(score)) if score.is_integer() else repr(score)


_SEQ_MAX = 2**64 - 1


def _stream_id(text: str, seq: int) -> tuple[int, int]:
    """A stream id ``ms-seq`` (or ``ms``, with ``seq`` for the missing part)."""
    ms, _, rest = text.partition("-")
    return int(ms), int(rest) if rest else seq


def _range_bound(text: str, lower: bool) -> tuple[int, int]:
    """An XRANGE bound as the id range's inclusive end: ``-``/``+``, ``(id`` exclusive."""
    if text == "-":
        return (0, 0)
    if text == "+":
        return (_SEQ_MAX, _SEQ_MAX)
    exclusive = text.startswith("(")
    ms, seq = _stream_id(text.lstrip("("), 0 if lower else _SEQ_MAX)
    if not exclusive:
        return ms, seq
    if lower:  # the next id after it
        return (ms, seq + 1) if seq < _SEQ_MAX else (ms + 1, 0)
    return (ms, seq - 1) if seq > 0 else (ms - 1, _SEQ_MAX)


# ------------------------------------------------------------------ faults and options
@dataclass(frozen=True)
class Faults:
    """What the run injects; every rate is per second of virtual time across the run."""

    delay: tuple[float, float] = (0.0002, 0.004)
    """One-way delay of every message (seconds, uniform); a few are slower (``slow``)."""
    slow: float = 0.02
    """Share of messages delayed up to 10x ``delay``'s maximum."""
    resets: float = 0.5
    """Pub/sub connection resets (a lost pub/sub message is one: TCP loses no single one)."""
    server_pauses: float = 0.03
    client_pauses: float = 0.05
    pause: tuple[float, float] = (0.05, 4.0)
    """Length of a pause (seconds)."""
    cancels: float = 0.8
    """asyncio cancellations of an acquire in progress, at whatever step it awaits."""
    interrupts: float = 0.0
    """Interrupts of a sync acquire in progress (a signal handler that raises), at any step.
    Off by default until the bug they find is fixed (tests/test_sim.py)."""
    drift: float = 0.005
    """Largest client clock rate error (0.005: +-0.5 %, within the 1 % allowance)."""
    drift_at_bound: bool = False
    """Every client's clock off by exactly ``drift``, fast or slow (else uniform within)."""
    restarts: float = 0.01
    """Server restarts without persistence, down for longer than the longest lease (as one
    must run a Redis without persistence: else a lock held before is free after)."""
    crashes: float = 0.05
    """Crashes of a candidates' client (its process dies: nothing more sent, read or
    renewed); a new client with as many candidates starts a little later."""
    drops: float = 0.0
    """Holds deleted on the server behind their owners' backs (`Sim.drop`): an operator's
    force-release (the real script: the hash deleted, the waiters told) or a failover to a
    replica that missed the writes (the hash gone, with a ReadWriteLock's read-timeout
    keys, and no message). Off by default: the seeds of the other runs draw as before."""
    drops_before_reentry: float = 0.0
    """Share of holds about to be re-entered (``Options.reentries``, ``lock_reentries``)
    whose lock a drop deletes first, at a seeded moment; the re-entry then comes a little
    later (0.02 s on average), time for other owners to take the lock and give it back."""

    @classmethod
    def none(cls) -> Faults:
        return cls(
            slow=0, resets=0, server_pauses=0, client_pauses=0, cancels=0, drift=0, crashes=0
        )


@dataclass
class Options:
    clients: int | None = None
    """Simulated clients (None: 1 to 4, chosen by the seed)."""
    workers: int | None = None
    """Workers (owners taking locks in a loop) per client (None: 1 to 4, by the seed; 0:
    none, e.g. to run the candidates alone)."""
    locks: int | None = None
    """Lock names, each a Lock, FairLock or FencedLock by the seed (None: 1 to 3, by the
    seed; 0: none, e.g. to run ReadWriteLocks alone)."""
    kinds: tuple[str, ...] = ()
    """The kinds of `KINDS` the seed draws the locks from (empty: every one)."""
    rwlocks: int | None = 0
    """ReadWriteLock names (None: 1 or 2, by the seed). 0 by default: the seeds of the
    other models draw as they did before the ReadWriteLock model."""
    reentries: float = 0.3
    """Share of ReadWriteLock holds whose worker takes a second hold (the same side, or a
    read under its write hold) before it releases."""
    lock_reentries: float = 0.0
    """Share of Lock, FairLock and FencedLock holds whose worker re-enters (one more hold,
    blocking or not) before it releases. 0 by default: the seeds of the other runs draw as
    they did before."""
    elections: int | None = None
    """Election names (None: 1 or 2, by the seed); 0 runs no candidates."""
    candidates: int | None = None
    """Clients of candidates (None: 2 or 3, by the seed), each with 1 or 2 candidates (two
    Election objects) campaigning in a loop for the seed's elections."""
    seconds: float = 60.0
    """Virtual seconds to run."""
    watchdog_timeout: float = 3.0
    faults: Faults = field(default_factory=Faults)
    plant: str | None = None
    history: int = 400
    """Events kept for the report of a broken rule."""
    skip: frozenset[str] = frozenset()
    """Rules not checked (a known bug's, until it is fixed: see tests/test_sim.py)."""


# ------------------------------------------------------------------ connections
class _Link:
    """One direction of one connection: FIFO, each message delayed."""

    __slots__ = ("last", "sim")

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.last = 0.0

    def at(self) -> float:
        self.last = max(self.sim.now + self.sim.delay(), self.last + 1e-9)
        return self.last


class _PubSubConn:
    """A client's pub/sub connection as the server sees it (one per connection made)."""

    __slots__ = ("alive", "client", "down")

    def __init__(self, client: SimClient) -> None:
        self.client = client
        self.alive = True
        self.down = _Link(client.sim)

    def push(self, kind: str, channel: str, payload: str) -> None:
        if self.alive:
            self.client.sim.at(
                self.down.at(),
                self.client,
                self.client.listener.received,
                self,
                kind,
                channel,
                payload,
            )


# ------------------------------------------------------------------ tasks
class Task:
    """One flow run by a simulated client (an asyncio task in the real driver)."""

    __slots__ = (
        "anywhere",
        "asked",
        "client",
        "done",
        "doomed",
        "effect",
        "flow",
        "name",
        "on_done",
        "tick",
        "waiting",
    )

    def __init__(
        self,
        client: SimClient,
        flow: Generator[Any, Any, Any],
        name: str,
        on_done: Callable[[Any, BaseException | None], None] | None,
    ) -> None:
        self.client, self.flow, self.name, self.on_done = client, flow, name, on_done
        self.asked = False
        """True once the server ran a script for it (not a bare command such as a
        reconcile's EXISTS look): its answer then said what the server holds."""
        self.tick = 0
        """Bumped whenever what the task waits for changes: a stale event finds it moved on."""
        self.effect: Any = None
        self.waiting: tuple[Any, ...] | None = None
        self.done = False
        self.doomed: Callable[[], None] | None = None
        """Cancel at the next effect that can be interrupted, before it is carried out; then
        call this."""
        self.anywhere = False
        """Doomed by an interrupt (a sync signal handler that raises): any effect will do.
        Else by an asyncio cancellation: only an effect the runner awaits (CANCELLABLE)."""

    def __repr__(self) -> str:
        return self.name


class Cancelled(BaseException):
    """Thrown into a flow as asyncio's CancelledError would be (a BaseException)."""


class Listener:
    """A client's pub/sub connection, driven as tenure/aio/listener.py drives it: every
    decision is the real core table's (`Listening`: the reader's role and its
    hand-on, the janitor, reconnecting; its `Parking`: whom a message wakes). Replies
    wait in the socket (`inbox`) until the reader, the janitor or a Drain reads them;
    a notify for the reader blocked on the socket reaches it at once (the real one's PING)."""

    def __init__(self, client: SimClient) -> None:
        self.client = client
        self.sim = client.sim
        self.table = Listening(timeout=SUBSCRIBE_TIMEOUT, clock=client.local)
        self.parking = self.table.parking
        client.ctx.subscriptions.add(self.table)  # what a release asks (ctx.hears)
        self.conn: _PubSubConn | None = None
        self.inbox: deque[tuple[str, str, str]] = deque()
        """Replies that came on the connection and nobody read yet."""
        self.up = _Link(self.sim)
        self.resubscribing: set[str] = set()
        """Channels subscribed again after a reconnect and not yet confirmed."""
        self.troubled = False
        """A reset not yet over (connected again and every channel confirmed)."""
        self.sweeps = 0
        """The janitor's sweeps scheduled: only the latest runs."""

    def connect(self) -> None:
        """The client's first connection (made before any waiter needs it)."""
        self.conn = _PubSubConn(self.client)
        self.table.connected_now()

    # ---- the socket
    def _send(self, verb: str, channels: list[str]) -> None:
        if self.conn is not None:
            self.sim.at(self.up.at(), None, self.sim.server_pubsub, self.conn, verb, channels)

    def _subscribe(self, channels: list[str]) -> None:
        if self.table.subscribing(channels):
            self._send("subscribe", channels)

    def received(self, conn: _PubSubConn, kind: str, channel: str, payload: str) -> None:
        """A reply reaches the socket: the reader blocked on it reads it now; else it waits."""
        if conn is not self.conn:
            return  # sent on a connection since lost
        self.inbox.append((kind, channel, payload))
        if self.table.reader_cond is not None:
            self._read(self.table.reader)

    def _read(self, key: Any) -> None:
        """``key``, the reader, reads every reply that came."""
        while self.inbox and self.table.reader == key and self.conn is not None:
            kind, channel, payload = self.inbox.popleft()
            woken = self.table.received(kind, channel, payload)
            if kind == "message":
                self.sim.note(self.client, "heard", channel, payload)
            elif (
                kind == "subscribe"
                and channel in self.resubscribing
                and not self.parking.in_flight.get(channel)
            ):
                self.resubscribing.discard(channel)
                if not self.resubscribing:
                    self._calm()
            self.notify(woken)

    def notify(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            self.wake(ticket.cond)
        for call in self.table.take_relays():  # wake-ups for this client nobody here can use
            self.client.spawn(just(call), f"{self.client.name}/relay")

    def wake(self, task: Task) -> None:
        """Notify ``task``'s condition: it looks again at what it waits for, at once."""
        if task.waiting is not None:
            self.client._sleep(task, 0.0)

    # ---- a waiter's sleep (AsyncListener._pause and _hand_on)
    def pause(self, task: Task, seconds: float) -> None:
        """``task`` waits on for up to ``seconds``: as the reader (blocked on the socket,
        reading what came) or asleep on its condition, as the table says."""
        self.client._sleep(task, seconds)
        if self.table.role(task) == "read":
            self.table.reader_cond = task
            self._read(task)
        else:
            self.table.sleeping(task, task)

    def unpause(self, task: Task) -> None:
        """``task`` woke (notified, or its time is up) and looks again."""
        self.table.awake(task)
        if self.table.reader_cond is task:
            self.table.reader_cond = None

    def hand_on(self, key: Any) -> None:
        """``key`` stops waiting: the sleeper the table names takes the socket over. The
        plant ``reader_stops_without_hand_on`` leaves the socket unread instead."""
        if key is not JANITOR:
            self.unpause(key)
        was_reader = self.table.reader == key
        cond = self.table.hand_on(key)
        if cond is not None:
            if was_reader and self.sim.options.plant == "reader_stops_without_hand_on":
                return
            self.wake(cond)
        elif self.table.relay_due():  # the janitor's relay reads, skipped while it read
            self.kick()

    # ---- the janitor (AsyncListener._sweep)
    def kick(self) -> None:
        """A new channel or a loss: the janitor looks at once."""
        self.sweeps += 1
        self.sim.at(self.sim.now, self.client, self._sweep, self.sweeps)

    def _sweep(self, sweep: int) -> None:
        if sweep != self.sweeps:
            return
        table = self.table
        step = table.janitor_step()
        if step == "drain":
            self.drain(JANITOR)
        elif step == "connect":
            self._connect()
            self.hand_on(JANITOR)
        gone, due = table.janitor_plan()
        for channel in gone:
            self._send("unsubscribe", self.table.letting_go(channel))
        if math.isfinite(due):
            self.sweeps += 1
            when = self.sim.now + self.client.virtual(due)
            self.sim.at(when, self.client, self._sweep, self.sweeps)

    def drain(self, key: Any) -> None:
        """Read what came without blocking, unless a waiter reads (or wants to)."""
        if self.table.may_drain():
            self.table.reader = key
            while self.table.draining(key) and self.inbox:
                self._read(key)
            self.hand_on(key)

    def _connect(self) -> None:
        if self.sim.server_down():
            self.notify(self.table.connect_failed())
            return
        self.conn = _PubSubConn(self.client)
        self.sim.note(self.client, "pubsub connected")
        batches = self.table.connected_now()
        self.resubscribing = {channel for batch in batches for channel in batch}
        for batch in batches:
            self._send("subscribe", batch)
        if not batches:
            self._calm()

    # ---- faults
    def reset(self) -> None:
        """The pub/sub connection drops (and with it what it had not read); the janitor
        connects again after the table's back-off. The table says whom that wakes: nobody
        until the new SUBSCRIBE is confirmed; the plant ``recheck_before_resubscribed``
        swaps in the rule of 14107aa (`_wake_at_drop()`)."""
        if self.conn is None:
            return
        self.conn.alive = False
        self.sim.server_drop(self.conn)
        self.conn = None
        self.inbox.clear()
        self.sim.note(self.client, "pubsub reset")
        if not self.troubled:
            self.troubled = True
            self.sim.fault_started()
        reader = self.table.reader
        woken = self.table.lost()
        if self.sim.options.plant == "recheck_before_resubscribed":
            woken = _wake_at_drop(self.parking)
        self.notify(woken)
        if isinstance(reader, Task):
            self.wake(reader)  # its read fails at once: it lets the socket go
        self.kick()

    def _calm(self) -> None:
        if self.troubled:
            self.troubled = False
            self.sim.fault_ended()

    # ---- effects
    def subscribe(self, task: Task, effect: Subscribe) -> Any:
        entry, _, first = self.parking.join(
            effect.channel, effect.wake_all, task, lambda: task, effect.alias, effect.relay
        )
        if first:
            self._subscribe(self.parking.names(effect.channel))
            self.kick()
        task.waiting = ("subscribe", effect, entry, self.client.local() + SUBSCRIBE_TIMEOUT)
        return self.client.recheck(task, first=True)

    def wait(self, task: Task, effect: Wait) -> Any:
        entry = self.parking.channels.get(effect.channel)
        ticket = entry.tickets.get(task) if entry is not None else None
        if entry is None or ticket is None:
            return True
        now = self.client.local()
        seconds, shared = effect.seconds, effect.patience is not None
        if effect.patience is not None:
            self.notify(entry.expires(now + seconds, ticket))
            seconds = effect.patience
        task.waiting = ("wait", effect.channel, entry, ticket, now + seconds, shared)
        return self.client.recheck(task, first=True)

    def leave(self, channel: str, task: Task, pass_on: bool, lease: float | None = None) -> None:
        notify, last = self.parking.leave(channel, task, pass_on, lease)
        if last:
            self._send("unsubscribe", self.table.letting_go(channel))
        elif self.table.left(channel, lease is not None):  # lingers: Listening.left()
            self.kick()
        for alias in self.table.take_alias_off():
            self._send("unsubscribe", [alias])
        self.notify(notify)


def _wake_at_drop(table: Parking) -> list[Ticket]:
    """Planted bug ``recheck_before_resubscribed``, the rule of 14107aa: a dropped pub/sub
    connection wakes every waiter at once (its channels stay confirmed), so an unlock
    published between a waiter's re-check and the new subscription wakes nobody."""
    woken: list[Ticket] = []
    for entry in table.channels.values():
        entry.confirmed, entry.recheck = True, False
        woken += entry.give_all()
    return woken


# ------------------------------------------------------------------ clients
class SimClient:
    """One simulated client: a `Context`, its lock objects, its workers, its driver."""

    def __init__(self, sim: Sim, index: int) -> None:
        self.sim = sim
        self.index = index
        self.name = f"c{index}"
        rng = sim.rng
        drift = sim.options.faults.drift
        if sim.options.faults.drift_at_bound:
            self.rate = 1.0 + rng.choice((-drift, drift))
        else:
            self.rate = 1.0 + rng.uniform(-drift, drift)
        self.offset = rng.uniform(0, 1000)
        self.paused_until = 0.0
        self.ctx = Context(
            watchdog_timeout=sim.options.watchdog_timeout,
            name_prefix="",
            wait_for_replicas=0,
            replica_timeout=0.0,
        )
        self.ctx.identity.client_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if sim.options.plant == "renewal_after_release":
            self.ctx.holds = _KeptHoldTable()
        self.listener = Listener(self)
        self.listener.connect()
        self.ctx.holds.poke = self._poke
        self.cores: dict[str, LockCore] = {}
        self.sides: dict[str, dict[str, LockCore]] = {}
        """ReadWriteLock name -> its read and write side (as `AsyncReadWriteLock` makes)."""
        for name, kind in sim.locks.items():
            if kind == RW:
                self.sides[name] = {READ: ReadLockCore(self.ctx, name)}
                self.sides[name][WRITE] = WriteLockCore(self.ctx, name)
                for side in self.sides[name].values():
                    side.add_loss_listener(self.lost)
                continue
            core = KINDS[kind](self.ctx, name)
            core.add_loss_listener(self.lost)
            self.cores[name] = core
        self.elections: dict[str, ElectionCore] = {}
        for name in sim.elections:
            candidacy = ElectionCore(self.ctx, name, client_name=self.name)
            candidacy.add_loss_listener(self.lost)
            self.elections[name] = candidacy
        self.dead = False
        """Crashed: every event of this client is dropped (its process is gone)."""
        self.keeper = 0
        """Keeper ticks scheduled (0: not started); a poke schedules a newer one."""
        self.renewing: Task | None = None
        self.renewal_at = 0.0
        self.owners: dict[str, Worker | Candidate] = {}

    def local(self, at: float | None = None) -> float:
        """This client's monotonic clock at virtual time ``at`` (default now)."""
        return self.offset + (self.sim.now if at is None else at) * self.rate

    def virtual(self, seconds: float) -> float:
        """Virtual seconds for ``seconds`` on this client's clock."""
        return seconds / self.rate

    # ---- running flows
    def spawn(
        self,
        flow: Generator[Any, Any, Any],
        name: str,
        on_done: Callable[[Any, BaseException | None], None] | None = None,
    ) -> Task:
        task = Task(self, flow, name, on_done)
        self.advance(task, None, None)
        return task

    def advance(self, task: Task, value: Any, error: BaseException | None) -> None:
        """Run ``task``'s flow on until it asks for something that takes time, or ends."""
        sim = self.sim
        sim.current = self
        while True:
            task.tick += 1
            task.waiting = None
            try:
                effect = task.flow.throw(error) if error is not None else task.flow.send(value)
            except StopIteration as stop:
                self._finish(task, stop.value, None)
                return
            except BaseException as failure:
                self._finish(task, None, failure)
                return
            task.effect = effect
            if task.doomed is not None and (task.anywhere or isinstance(effect, CANCELLABLE)):
                # cancelled as it asks: the effect is not carried out
                task.doomed()
                task.doomed = None
                sim.note(self, "cancel", task, "before", effect)
                value, error = None, Cancelled()
                continue
            try:
                value, error = self.perform(task, effect), None
            except BaseException as failure:
                value, error = None, failure
            if value is _LATER:
                return

    def _finish(self, task: Task, value: Any, error: BaseException | None) -> None:
        task.done = True
        task.effect = None
        if task.on_done is not None:
            task.on_done(value, error)
        elif error is not None and not isinstance(error, BackendError | Cancelled):
            raise error  # a bug in a background flow: the run stops and says so

    def perform(self, task: Task, effect: Any) -> Any:
        """Carry out one effect as the real runner does (tenure/aio/runner.py); _LATER when
        the task resumes from an event."""
        sim = self.sim
        if isinstance(effect, Call | Command):
            tick = task.tick
            sim.note(self, "send", task, effect)
            sim.at(sim.now + sim.delay(), None, sim.server_call, self, task, tick, effect)
            return _LATER
        if isinstance(effect, Wait):
            return self.listener.wait(task, effect)
        if isinstance(effect, Subscribe):
            return self.listener.subscribe(task, effect)
        if isinstance(effect, Unsubscribe):
            self.listener.leave(effect.channel, task, effect.pass_on, effect.lease)
            return None
        if isinstance(effect, Drain):
            self.listener.drain(task)
            return None
        if isinstance(effect, WatchHolds):
            if not self.keeper:
                self._poke()
            return None
        if isinstance(effect, Background):
            self.spawn(effect.flow, f"{task}/bg")
            return None
        if isinstance(effect, Sleep):
            sim.at(sim.now + self.virtual(effect.seconds), self, self._resume, task, task.tick)
            return _LATER
        raise TypeError(f"the simulator does not carry out {effect!r}")

    def _resume(
        self, task: Task, tick: int, value: Any = None, error: BaseException | None = None
    ) -> None:
        if task.tick == tick and not task.done:
            self.advance(task, value, error)

    def reply(self, task: Task, tick: int, value: Any, error: BaseException | None) -> None:
        """A script's or command's reply reaches the client."""
        if task.tick == tick and not task.done:
            self.sim.note(self, "reply", task, error if error is not None else value)
            self.advance(task, value, error)

    def recheck(self, task: Task, first: bool = False) -> Any:
        """Whether a task parked on the listener may go on (as the real listener's loops
        decide after each notify or timeout); returns its result when ``first`` and it may."""
        waiting = task.waiting
        assert waiting is not None
        self.listener.unpause(task)
        now = self.local()
        if waiting[0] == "subscribe":
            _, effect, entry, end = waiting
            if entry.confirmed:
                if entry.refusal is not None:
                    return self._leave_and(task, effect.channel, first, BackendError(entry.refusal))
                result = effect.since is not None and entry.fresh(effect.since)
                return self._go(task, first, result)
            if now >= end:
                error = BackendError(f"no confirmation of SUBSCRIBE {effect.channel}")
                return self._leave_and(task, effect.channel, first, error)
            self.listener.pause(task, end - now)
            return _LATER
        _, channel, entry, ticket, end, shared = waiting
        moved = self.listener.parking.channels.get(channel) is not entry  # (another shard's)
        if moved:
            return self._go(task, first, True)
        if ticket.permit:
            return self._go(task, first, self.listener.parking.take(ticket))
        left = entry.sleep_until(ticket, end, shared) - now
        if left <= 0:
            return self._go(task, first, False)
        self.listener.pause(task, left)
        return _LATER

    def _sleep(self, task: Task, seconds: float) -> None:
        task.tick += 1
        self.sim.at(self.sim.now + self.virtual(seconds), self, self._timer, task, task.tick)

    def _timer(self, task: Task, tick: int) -> None:
        if task.tick == tick and task.waiting is not None:
            self.recheck(task)

    def _go(self, task: Task, first: bool, value: Any) -> Any:
        task.waiting = None
        self.listener.hand_on(task)
        if first:
            return value
        task.tick += 1  # resumed as an event of its own: notify() may run inside another flow
        self.sim.at(self.sim.now, self, self._resume, task, task.tick, value)
        return _LATER

    def _leave_and(self, task: Task, channel: str, first: bool, error: BaseException) -> Any:
        task.waiting = None
        self.listener.hand_on(task)
        self.listener.leave(channel, task, False)
        if first:
            raise error
        task.tick += 1
        self.sim.at(self.sim.now, self, self._resume, task, task.tick, None, error)
        return _LATER

    def cancel(self, task: Task) -> None:
        """Cancel ``task`` where it is, as asyncio would, with the runner's clean-up: a
        script sent stays sent (its reply is dropped with the connection); a pending
        SUBSCRIBE's waiter leaves the channel; then the flow gets the error."""
        waiting = task.waiting
        if waiting is not None:
            task.waiting = None
            self.listener.hand_on(task)
            if waiting[0] == "subscribe":
                self.listener.leave(waiting[1].channel, task, False)
        self.sim.note(self, "cancel", task, "at", task.effect)
        self.advance(task, None, Cancelled())

    # ---- the hold keeper (tenure/aio/runner.py AsyncRunner._keep)
    def _poke(self) -> None:
        if not self.keeper:  # the keeper starts: its first pass one period from now
            self.renewal_at = self.local() + self.ctx.watchdog_timeout / 3
        self.keeper += 1
        self.sim.at(self.sim.now, self, self._keep, self.keeper)

    def _keep(self, tick: int) -> None:
        if tick != self.keeper:
            return
        self.sim.current = self
        now = self.local()
        interval = self.ctx.watchdog_timeout / 3
        if now >= self.renewal_at:
            self.renewal_at = now + interval
            if self.renewing is None or self.renewing.done:
                self.renewing = self.spawn(self._renewal_pass(), f"{self.name}/renew")
        self.report(self.ctx.holds.expired(now))
        look = self.ctx.holds.plan(self.renewal_at)
        self.keeper += 1
        self.sim.at(
            self.sim.now + self.virtual(max(look - now, 0.0)), self, self._keep, self.keeper
        )

    def _renewal_pass(self) -> Generator[Any, Any, None]:
        self.report((yield from renew(self.ctx)))
        if len(self.ctx.holds.waiters):
            yield from refresh_waiters(self.ctx)

    def report(self, lost: list[Hold]) -> None:
        for hold in lost:
            self.sim.note(self, "hold lost", _short(hold.owner), hold.key)
        report_lost(lost)  # the core tells each hold's lock

    def lost(self, core: LockCore, owner: str) -> None:
        worker = self.owners.get(owner)
        if worker is not None:
            worker.told_lost(core.name)

    def crash(self) -> None:
        """The process dies: nothing more is sent, read or renewed; its pub/sub connection
        drops (the server's view); what it sent before still runs on the server."""
        self.dead = True
        if self.listener.conn is not None:
            self.listener.conn.alive = False
            self.sim.server_drop(self.listener.conn)


class _KeptHoldTable(HoldTable):
    """Planted bug ``renewal_after_release``: a release leaves its hold in the table, so the
    watchdog goes on renewing it (and reports it lost once it finds it gone)."""

    def pop(self, key: str, field: str) -> Hold | None:
        return self.get(key, field)

    def discard(self, key: str, field: str) -> Hold | None:
        return self.get(key, field)


_LATER = object()
CANCELLABLE = (Call, Command, Subscribe, Unsubscribe, Drain, Wait, Sleep)
"""The effects an asyncio cancellation can land on (the runner awaits them); an interrupt in
the sync driver can land anywhere."""


def _describe(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Call):
        return f"{item.script.name}{list(item.keys)[:1]}{[_short(a) for a in item.args[:3]]}"
    if isinstance(item, Command):
        return " ".join(map(str, item.args))
    return repr(item)[:100]


def _owner_of(field: str) -> str:
    """The owner of a lock hash field (a ReadWriteLock writer's ends in ``:write``)."""
    return field.removesuffix(":write")


def _short(arg: Any) -> Any:
    """An owner field's last characters (its client id is long and seeded)."""
    return f"..{arg[-8:]}" if isinstance(arg, str) and len(arg) > 36 else arg


# ------------------------------------------------------------------ workers
class _Thread:
    """What an owner id is made for (a thread or task in the real client; held weakly)."""


class Worker:
    """One owner (a thread or task) taking locks in a loop: acquire, a critical section,
    release, a pause. It is also what the checkers look at.

    On a ReadWriteLock it takes the read or the write side; now and then a second hold
    before it releases (a re-entry of its side, or a read under its write hold, tried
    without waiting), then releases them one by one: last first, or, holding a write and a
    read, the write first (a downgrade)."""

    def __init__(self, client: SimClient, index: int) -> None:
        self.client = client
        self.sim = client.sim
        self.name = f"{client.name}w{index}"
        self.state = "idle"
        self.lock = ""
        self.owner = ""
        self.task: Task | None = None
        self.deadline = math.inf
        self.since = 0.0
        self.loss_told = False
        self.lease: float | None = None
        self.side = ""
        """The side of a ReadWriteLock this acquire takes ('' for the other kinds)."""
        self.held: list[str] = []
        """Sides of the ReadWriteLock holds it took and has not released, oldest first."""
        self.new_owner()

    def new_owner(self) -> None:
        token = _Thread()
        self._token = token  # kept alive: the identity holds it weakly
        self.owner = self.client.ctx.identity.owner_of(token, running=lambda _: True)
        self.client.owners[self.owner] = self

    def core(self, side: str | None = None) -> LockCore:
        """The lock object it uses: its lock's, or the ``side`` (default: its own) of its
        ReadWriteLock."""
        if self.lock in self.client.sides:
            return self.client.sides[self.lock][side or self.side]
        return self.client.cores[self.lock]

    def field(self, side: str | None = None) -> str:
        """The hash field of its hold (of ``side``, default its own, on a ReadWriteLock)."""
        return self.core(side).field(self.owner)

    def start(self) -> None:
        sim, rng = self.sim, self.sim.rng
        if rng.random() < 0.2:
            self.new_owner()
        self.lock = rng.choice(sorted(sim.locks))
        timeout = rng.choice((None, None, None, 5.0, rng.uniform(0.01, 0.5)))
        lease = rng.choice((None, None, rng.uniform(0.05, 2.0)))
        self.side = ""
        if sim.locks[self.lock] == RW:
            self.side = rng.choice((READ, WRITE))
        self.state, self.since = "acquiring", sim.now
        self.deadline = math.inf if timeout is None else sim.now + timeout / self.client.rate
        self.loss_told = False
        self.lease = lease
        core = self.core()
        sim.note(
            self.client,
            "acquire",
            self.name,
            _short(self.owner),
            self.lock,
            f"{self.side} timeout={timeout} lease={lease}".lstrip(),
        )
        if isinstance(core, FencedLockCore):
            flow = core.acquire_token(self.owner, True, timeout, lease)
        else:
            flow = core.acquire(self.owner, True, timeout, lease)
        self.task = self.client.spawn(flow, f"{self.name}.acq", self.acquired)

    def acquired(self, result: Any, error: BaseException | None) -> None:
        sim = self.sim
        self.task = None
        if error is not None or not result:
            sim.note(self.client, "not acquired", self.name, error)
            self.state = "idle"
            if isinstance(error, Cancelled):
                sim.after_cancel(self)
                if self.side:  # (a task cancelled is a task ended: its late grant is undone
                    self.new_owner()  # in the background, as another owner's)
            elif error is not None and not isinstance(error, BackendError | LockLostError):
                # LockLostError: an acquire made as a re-entry found its earlier hold gone
                # (nothing taken); `told_lost()` checks that loss as any other.
                raise error
            self._again()
            return
        self.state = "holding"
        sim.acquisitions += 1
        sim.note(self.client, "holds", self.name, _short(self.owner), self.lock, self.side)
        long = sim.rng.random() < 0.05
        hold_for = sim.rng.uniform(0.5, 4.0) if long else sim.rng.expovariate(1 / 0.004)
        if self.side:
            self.held = [self.side]
            sim.forget_drop(self, self.side)
            sim.check_rw_exclusion(self, self.side)
            if sim.rng.random() < sim.options.reentries:
                self._plan_reentry(hold_for)
                return
            sim.at(sim.now + hold_for, self.client, self.release)
            return
        self.held = [""]
        sim.forget_drop(self, "")  # (an earlier hold's, heard of by now)
        sim.check_exclusion(self)
        if not isinstance(result, bool) and (self.lock, self.field()) not in sim.dropped:
            sim.check_token(self, result)  # (a dropped grant's: a later one may have come first)
        share = sim.options.lock_reentries
        if share and sim.rng.random() < share:  # (no draw when off: the seeds stay as they were)
            self._plan_reentry(hold_for)
            return
        sim.at(sim.now + hold_for, self.client, self.release)

    def _plan_reentry(self, hold_for: float) -> None:
        """Re-enter within ``hold_for``; first, now and then, a drop deletes the lock
        (``Faults.drops_before_reentry``)."""
        sim, rng = self.sim, self.sim.rng
        at = sim.now + rng.uniform(0, hold_for)
        aim = sim.options.faults.drops_before_reentry
        if aim and rng.random() < aim:  # (no draw when off: the seeds stay as they were)
            sim.at(at, None, sim.drop_held, self.lock)
            at += rng.expovariate(1 / 0.02)
        sim.at(at, self.client, self.reenter)

    def reenter(self) -> None:
        """A second hold of its ReadWriteLock, tried without waiting: the same side, or a
        read under its write hold. On the other kinds, `_reenter_lock()`."""
        sim = self.sim
        if not self.side:
            self._reenter_lock()
            return
        started = sim.now
        side = sim.rng.choice((READ, WRITE)) if self.held == [WRITE] else READ
        again = side in self.held
        lease = sim.rng.choice((None, sim.rng.uniform(0.05, 2.0)))
        sim.note(self.client, "re-enter", self.name, _short(self.owner), self.lock, side)
        flow = self.core(side).acquire(self.owner, False, None, lease)

        def done(result: Any, error: BaseException | None) -> None:
            asked = self.task is not None and self.task.asked
            self.task = None
            if error is not None and not isinstance(error, BackendError | LockLostError):
                # LockLostError: the hold it re-enters was lost (reported, `told_lost()`).
                raise error
            if result and error is None:
                sim.acquisitions += 1
                self.held.append(side)
                sim.note(self.client, "holds", self.name, _short(self.owner), self.lock, side)
                sim.check_rw_exclusion(self, side)
            else:
                sim.note(self.client, "not re-entered", self.name, error)
            if not asked:
                pass  # refused before its script ran (a reconcile under way): no answer
            elif again:
                sim.heard(self, side, started, "re-entry", result, error)
            elif WRITE in self.held:  # (its read, granted or not, asked about the lock)
                what = "read under its write hold"
                sim.heard(self, WRITE, started, what, result, error, WRITE_LOSS_HIDDEN)
            sim.at(sim.now + sim.rng.expovariate(1 / 0.004), self.client, self.release)

        self.task = self.client.spawn(flow, f"{self.name}.re", done)

    def _reenter_lock(self) -> None:
        """One more hold of its Lock, FairLock or FencedLock: blocking (within a timeout)
        or not, with the watchdog or a lease."""
        sim, rng = self.sim, self.sim.rng
        started = sim.now
        blocking = rng.random() < 0.5
        timeout = rng.uniform(0.01, 1.0) if blocking else None
        lease = rng.choice((None, rng.uniform(0.05, 2.0)))
        sim.note(
            self.client, "re-enter", self.name, _short(self.owner), self.lock,
            f"blocking={blocking} timeout={timeout} lease={lease}",
        )  # fmt: skip
        flow = self.core().acquire(self.owner, blocking, timeout, lease)

        def done(result: Any, error: BaseException | None) -> None:
            asked = self.task is not None and self.task.asked
            self.task = None
            if error is not None and not isinstance(error, BackendError | LockLostError):
                raise error  # (LockLostError: the hold it re-enters was lost, `heard()`)
            if result and error is None:
                sim.acquisitions += 1
                self.held.append("")
                sim.note(self.client, "holds", self.name, _short(self.owner), self.lock)
                sim.check_exclusion(self)
            else:
                sim.note(self.client, "not re-entered", self.name, error)
            if asked:  # (refused before its script ran, a reconcile under way: no answer)
                sim.heard(self, "", started, "re-entry", result, error)
            sim.at(sim.now + rng.expovariate(1 / 0.004), self.client, self.release)

        self.task = self.client.spawn(flow, f"{self.name}.re", done)

    def believes(self) -> bool:
        """Holding (a hold left while it releases another), told of no loss, its hold in
        the client's table, and its lease still valid on its client's clock (less the drift
        allowance); unless a drop deleted the hold and it has not asked the server since
        (`Sim.dropped`: it cannot know yet)."""
        if self.state not in ("holding", "releasing") or self.loss_told or not self.held:
            return False
        core = self.client.cores[self.lock]
        field = core.field(self.owner)
        if (self.lock, field) in self.sim.dropped:
            return False
        hold = self.client.ctx.holds.get(core.key, field)
        return hold is not None and self.client.local() < hold.valid_until

    def beliefs(self) -> set[str]:
        """The sides of its ReadWriteLock it believes it holds: told of no loss, the hold in
        the client's table, its lease still valid on its client's clock."""
        if self.state not in ("holding", "releasing") or self.loss_told or not self.held:
            return set()
        sides = set()
        for side in set(self.held):
            core = self.core(side)
            field = core.field(self.owner)
            if (self.lock, field) in self.sim.dropped:
                continue  # deleted by a drop, and not asked about since (`believes()`)
            hold = self.client.ctx.holds.get(core.key, field)
            if hold is not None and self.client.local() < hold.valid_until:
                sides.add(side)
        return sides

    def release(self) -> None:
        self.state = "releasing"
        side = ""
        if self.held:  # the newest hold, or the write hold first (a downgrade)
            downgrade = self.held[:2] == [WRITE, READ] and self.sim.rng.random() < 0.5
            side = self.held.pop(0 if downgrade else -1)
        core = self.core(side or None)
        started = self.sim.now
        self.task = self.client.spawn(
            core.release(self.owner),
            f"{self.name}.rel",
            lambda r, e: self.released(r, e, side, started),
        )

    def released(
        self, result: Any, error: BaseException | None, side: str = "", started: float = 0.0
    ) -> None:
        sim = self.sim
        self.task = None
        if isinstance(error, LockLostError | NotOwnedError | BackendError):
            self.loss_told = True  # (a release that failed confirms nothing either)
        elif error is not None:
            raise error
        sim.note(self.client, "released", self.name, side, error)
        sim.heard(self, side, started, "release", result, error)
        if side not in self.held:  # (a hold of the same field left: checked at its release,
            sim.check_loss_told(self, self.field(side or None))  # as the field ends then)
        if self.held:
            self.state = "holding"
            sim.at(sim.now + sim.rng.expovariate(1 / 0.004), self.client, self.release)
            return
        self.state = "idle"
        if self.side and self.loss_told:
            self.new_owner()  # a hold it was told lost may still have its field (see told_lost)
        self._again()

    def told_lost(self, name: str) -> None:
        granted = self.sim.granted.get((name, self.owner), -1.0)
        if self.side:
            granted = max(granted, self.sim.granted.get((name, self.field(WRITE)), -1.0))
        if self.lock == name and (
            self.state in ("holding", "releasing")
            or (self.state == "acquiring" and granted >= self.since)
        ):  # (a grant not yet returned to the caller may be lost already)
            self.loss_told = True
            return
        self.sim.violate(
            "loss reported for no loss",
            f"{self.name} ({self.owner}) was told its hold on {name!r} was lost, "
            f"but it is {self.state} on {self.lock!r}",
        )

    def _again(self) -> None:
        self.sim.at(self.sim.now + self.sim.rng.expovariate(1 / 0.003), self.client, self.start)


# ------------------------------------------------------------------ candidates
class Candidate:
    """One Election object of a client campaigning in a loop: campaign (with a timeout or
    none), lead a while (renewed by the client's watchdog; now and then proclaiming a new
    value), resign, a pause. It is also what the election checkers look at."""

    def __init__(self, client: SimClient, index: int) -> None:
        self.client = client
        self.sim = client.sim
        self.name = f"{client.name}e{index}"
        self.state = "idle"
        """idle, campaigning, leading, resigning, or dead (its client crashed)."""
        self.election = ""
        self.owner = ""
        self.term = 0
        self.since = 0.0
        self.deadline = math.inf
        self.loss_told = False
        self.new_owner()

    def new_owner(self) -> None:
        token = _Thread()  # a new Election object: a new owner field
        self._token = token
        self.owner = self.client.ctx.identity.owner_of(token, running=lambda _: True)
        self.client.owners[self.owner] = self

    def core(self) -> ElectionCore:
        return self.client.elections[self.election]

    def start(self) -> None:
        if self.state == "dead":
            return
        sim, rng = self.sim, self.sim.rng
        if rng.random() < 0.3:
            self.new_owner()
        self.election = rng.choice(sim.elections)
        timeout = rng.choice((None, None, 5.0, rng.uniform(0.01, 1.0)))
        self.state, self.since, self.loss_told = "campaigning", sim.now, False
        self.deadline = math.inf if timeout is None else sim.now + timeout / self.client.rate
        value = f"{self.name}@{sim.now:.3f}"
        sim.note(
            self.client, "campaign", self.name, _short(self.owner), self.election,
            f"timeout={timeout}",
        )  # fmt: skip
        flow = self.core().campaign(self.owner, value, timeout)
        self.client.spawn(flow, f"{self.name}.campaign", self.elected)

    def elected(self, term: Any, error: BaseException | None) -> None:
        sim = self.sim
        if self.state == "dead":
            return
        if error is not None or term is None:
            sim.note(self.client, "not elected", self.name, error)
            self.state = "idle"
            if error is not None and not isinstance(error, BackendError):
                raise error
            self._again()
            return
        self.state, self.term = "leading", int(term)
        sim.elected += 1
        sim.note(self.client, "leads", self.name, _short(self.owner), self.election, term)
        sim.check_leaders(self)
        long = sim.rng.random() < 0.1
        lead_for = sim.rng.uniform(0.5, 5.0) if long else sim.rng.expovariate(1 / 0.1)
        sim.at(sim.now + lead_for, self.client, self.step_down)

    def believes(self) -> bool:
        """Leading, told of no loss, its leadership in the client's hold table, and its
        lease still valid on its client's clock (less the drift allowance)."""
        if self.state != "leading" or self.loss_told:
            return False
        core = self.core()
        hold = self.client.ctx.holds.get(core.key, core.field(self.owner))
        return hold is not None and self.client.local() < hold.valid_until

    def step_down(self) -> None:
        if self.state != "leading":
            return
        self.state = "resigning"
        core, owner = self.core(), self.owner
        proclaim = self.sim.rng.random() < 0.2

        def flow() -> Generator[Any, Any, None]:
            if proclaim:  # then resign whatever it answered, as leadership() does
                try:
                    yield from core.proclaim(owner, f"{self.name}@{self.sim.now:.3f}")
                except (LockLostError, NotOwnedError, BackendError):
                    self.loss_told = True
            yield from core.resign(owner)

        self.client.spawn(flow(), f"{self.name}.resign", self.resigned)

    def resigned(self, result: Any, error: BaseException | None) -> None:
        sim = self.sim
        if self.state == "dead":
            return
        if isinstance(error, LockLostError | NotOwnedError | BackendError):
            self.loss_told = True  # (a resign that failed confirms nothing either)
        elif error is not None:
            raise error
        sim.note(self.client, "resigned", self.name, error)
        ended = (self.election, self.owner) in sim.lost_on_server
        sim.lost_on_server.discard((self.election, self.owner))
        if ended and not self.loss_told:
            sim.violate(
                "loss not reported",
                f"{self.name}'s leadership of {self.election!r} ended on the server before "
                "its resign, and neither on_lost nor resign said so",
            )
        self.state = "idle"
        self._again()

    def told_lost(self, name: str) -> None:
        if self.state == "dead":
            return
        granted = self.sim.granted.get((name, self.owner), -1.0) >= self.since
        if self.election == name and (
            self.state in ("leading", "resigning") or (self.state == "campaigning" and granted)
        ):
            self.loss_told = True
            return
        self.sim.violate(
            "loss reported for no loss",
            f"{self.name} ({self.owner}) was told its leadership of {name!r} was lost, "
            f"but it is {self.state} for {self.election!r}",
        )

    def _again(self) -> None:
        self.sim.at(self.sim.now + self.sim.rng.expovariate(1 / 0.2), self.client, self.start)


# ------------------------------------------------------------------ the simulation
class Sim:
    """One run: ``Sim(seed, options).run()`` returns its `Result` or raises
    `Violation`."""

    def __init__(self, seed: int, options: Options | None = None) -> None:
        self.seed = seed
        self.options = options or Options()
        self.rng = random.Random(seed)
        self.now = 0.0
        self._events: list[
            tuple[float, int, SimClient | None, Callable[..., None], tuple[Any, ...]]
        ] = []
        self._seq = itertools.count()
        self.history: deque[tuple[float, str, str, tuple[Any, ...]]] = deque(
            maxlen=self.options.history
        )
        self.acquisitions = 0
        rng, options = self.rng, self.options
        count = rng.randint(1, 3) if options.locks is None else options.locks
        kinds = sorted(options.kinds or KINDS)
        self.locks = {f"lock{i}": rng.choice(kinds) for i in range(count)}
        count = rng.randint(1, 2) if options.rwlocks is None else options.rwlocks
        self.locks.update({f"rw{i}": RW for i in range(count)})
        if not self.locks and (options.workers is None or options.workers > 0):
            raise ValueError("workers need a lock: set locks or rwlocks above 0")
        count = rng.randint(1, 2) if options.elections is None else options.elections
        self.elections = [f"election{i}" for i in range(count)]
        self.server = Server(self)
        if self.options.plant == "release_without_owner_check":
            source = scripts.get("lock_release").source
            # release_hold (_release_hold.lua) counts the owner's holds, inside a function
            bug = "    if not count then\n        count = 1\n    end"
            self.server.sources["lock_release"] = source.replace(
                "    if not count then\n        return nil\n    end", bug
            )
            assert bug in self.server.sources["lock_release"]
        elif self.options.plant == "campaign_without_leader_check":
            source = scripts.get("election_campaign").source
            check = "    if redis.call('exists', KEYS[1]) == 1 then\n        return nil\n    end\n"
            assert source.count(check) == 1  # settle(): elect only while nobody leads
            self.server.sources["election_campaign"] = source.replace(check, "")
        elif self.options.plant == "resign_without_handover":
            source = scripts.get("election_resign").source
            handover = "if settle(now_ms(), ARGV[2]) then\n    return 2\nend\nlog_vacant()\n"
            told = "redis.pcall('publish', ARGV[2], '0')\n"
            assert source.count(handover + told) == 1  # elect the next, or tell everyone
            self.server.sources["election_resign"] = source.replace(handover + told, "")
        elif self.options.plant == "rw_release_wakes_nobody":
            for name in ("rw_read_release", "rw_write_release"):
                self.server.patches[name] = _publish_nothing
        elif self.options.plant == "rw_unlock_ignores_waiting_readers":
            mark = "if redis.call('zscore', queue, READERS) then"
            for name in ("rw_read_release", "rw_write_release"):
                assert scripts.get(name).source.count(mark) == 1  # rw_wake (_rw_wake.lua)
                self.server.patches[name] = lambda source: source.replace(mark, "if false then")
        elif self.options.plant == "rw_read_granted_beside_writer":
            refusal = "if mode == 'write' and not found[2] then"  # another writer holds
            assert scripts.get("rw_read_acquire").source.count(refusal) == 1
            self.server.patches["rw_read_acquire"] = lambda source: source.replace(
                refusal, "if false then"
            )
        elif self.options.plant == "reentry_granted_afresh":
            # The acquire script before 0d55485: a re-entry whose hold is gone on the server
            # is granted afresh (the same nil as a re-entry), and its client counts it on
            # top of the lost hold (reviewer R8, F1).
            lost = "    if ARGV[3] == '2' then\n        return 'lost'\n    end\n"
            assert scripts.get("lock_acquire").source.count(lost) == 2
            self.server.sources["lock_acquire"] = scripts.get("lock_acquire").source.replace(
                lost, ""
            )
        elif self.options.plant is not None and self.options.plant not in PLANTS:
            raise ValueError(f"unknown plant {self.options.plant!r}; one of {PLANTS}")
        self.down_until = -1.0
        self.server_paused_until = 0.0
        self.faulty = 0
        """Faults under way (a pub/sub connection not yet re-subscribed, a pause...)."""
        self.calm_since = 0.0
        """Virtual time since which no fault has been under way."""
        self.clients = [SimClient(self, i) for i in range(options.clients or rng.randint(1, 4))]
        self.current = self.clients[0]
        per_client = rng.randint(1, 4) if options.workers is None else options.workers
        self.workers = [Worker(c, i) for c in self.clients for i in range(per_client)]
        self.candidates: list[Candidate] = []
        self.elected = 0
        """Leaderships that reached their candidate (campaign returned a term)."""
        self.terms: dict[str, int] = {}
        """Election -> the highest term the server handed out (since the last restart)."""
        self.vacant_since: dict[str, float] = {}
        """Election -> since when the probe has seen it vacant (and calm)."""
        self.leader_names = {
            ElectionCore(self.clients[0].ctx, name).key: name for name in self.elections
        }
        self.made = len(self.clients)
        """Clients made so far (crashed ones included): the next one's index."""
        self.caller: SimClient | None = None
        """The client whose script the server runs now."""
        self.attempted: dict[tuple[str, SimClient], float] = {}
        """(Lock, client) -> when an acquire script of that client last ran on the server."""
        self.unlocked: dict[str, tuple[float, SimClient | None]] = {}
        """Lock -> when an unlock was last published, and for which client (None: all)."""
        self.by_id = {client.ctx.identity.client_id: client for client in self.clients}
        self.free_since: dict[str, float] = {}
        self.lost_on_server: set[tuple[str, str]] = set()
        self.cancelled: dict[tuple[str, str], float] = {}
        """(Owner, lock) -> when its last acquire was cancelled."""
        self.restarted_at = -1.0
        self.tokens: dict[str, int] = {}
        """Lock -> the highest fencing token granted (since the last restart)."""
        self.granted: dict[tuple[str, str], float] = {}
        """(Lock, owner) -> when the server last granted it."""
        self.freed_by: dict[str, str] = {}
        """Lock -> how it was last freed: "release" (an unlock message) or "expiry"."""
        """(lock, owner) whose hold ended on the server other than by its own release."""
        self.dropped: dict[tuple[str, str], _Drop] = {}
        """(Lock, field) -> the drop that deleted that hold, while its owner has neither been
        told nor asked the server about it since (`heard()`): its belief is stale, and it
        cannot know yet."""
        self.drops = 0
        """Holds deleted by drops (`Faults.drops`)."""
        self.lost_reentries = 0
        """Re-entries made after a drop deleted the hold they re-enter."""
        self.overtaken = 0
        """Of those, re-entries made after another owner was granted the lock since the drop."""
        self.violation: Violation | None = None
        if self.elections:
            for _ in range(options.candidates or rng.randint(2, 3)):
                self._new_candidates(rng.randint(1, 2))

    # ---- scheduling
    def at(
        self, when: float, client: SimClient | None, fn: Callable[..., None], *args: Any
    ) -> None:
        heapq.heappush(self._events, (when, next(self._seq), client, fn, args))

    def delay(self) -> float:
        low, high = self.options.faults.delay
        if self.rng.random() < self.options.faults.slow:
            return self.rng.uniform(high, 10 * high)
        return self.rng.uniform(low, high)

    def note(self, client: SimClient | None, what: str, *detail: Any) -> None:
        """Record an event for the report (formatted only if a rule breaks)."""
        self.history.append((self.now, client.name if client else "server", what, detail))

    def run(self) -> Result:
        started = real_time.perf_counter()
        with _virtual_time(self), _quiet_log(self):
            for worker in self.workers:
                self.at(self.rng.uniform(0, 0.01), worker.client, worker.start)
            for candidate in self.candidates:
                self.at(self.rng.uniform(0, 0.01), candidate.client, candidate.start)
            self._plan_faults()
            self.at(0.05, None, self._probe)
            if self.elections:
                self.at(0.05, None, self._probe_elections)
            events = self._events
            end = self.options.seconds
            while events and self.violation is None:
                when, seq, client, fn, args = heapq.heappop(events)
                if when > end:
                    break
                if client is not None and client.dead:
                    continue
                if client is not None and client.paused_until > when:
                    heapq.heappush(events, (client.paused_until, seq, client, fn, args))
                    continue
                self.now = when
                if client is not None:
                    self.current = client
                fn(*args)
        if self.violation is not None:
            raise self.violation
        took = real_time.perf_counter() - started
        return Result(
            self.seed,
            self.acquisitions,
            self.now,
            took,
            self.elected,
            self.drops,
            self.lost_reentries,
            self.overtaken,
        )

    # ---- the server's side of the network
    def server_down(self) -> bool:
        return self.now < self.down_until

    def server_call(self, client: SimClient, task: Task, tick: int, effect: Any) -> None:
        if self.now < self.server_paused_until:
            self.at(self.server_paused_until, None, self.server_call, client, task, tick, effect)
            return
        value: Any = None
        error: BaseException | None = None
        if self.server_down():
            error = BackendError("Error 111 connecting to the simulated server")
        else:
            self.caller = client
            try:
                value = self.server.run(effect)
                task.asked = task.asked or isinstance(effect, Call)
            except BackendError as failure:
                error = failure
            self.caller = None
        self.at(self.now + self.delay(), client, client.reply, task, tick, value, error)

    def server_pubsub(self, conn: _PubSubConn, verb: str, channels: list[str]) -> None:
        if self.now < self.server_paused_until:
            self.at(self.server_paused_until, None, self.server_pubsub, conn, verb, channels)
            return
        if not conn.alive:
            return
        for channel in channels:
            subs = self.server.subs.setdefault(channel, {})
            if verb == "subscribe":
                subs[conn] = None
            else:
                subs.pop(conn, None)
                if not subs:
                    del self.server.subs[channel]
            conn.push(verb, channel, "1")

    def server_drop(self, conn: _PubSubConn) -> None:
        for channel in [c for c, subs in self.server.subs.items() if conn in subs]:
            del self.server.subs[channel][conn]
            if not self.server.subs[channel]:
                del self.server.subs[channel]

    # ---- faults
    def _plan_faults(self) -> None:
        faults, end = self.options.faults, self.options.seconds
        plans: list[tuple[float, Callable[[], None]]] = [
            (faults.resets, self._reset),
            (faults.server_pauses, self._server_pause),
            (faults.client_pauses, self._client_pause),
            (faults.cancels, self._cancel),
            (faults.interrupts, self._interrupt),
            (faults.restarts, self._restart),
            (faults.crashes if self.elections else 0.0, self._crash),
            (faults.drops, self._drop),
        ]
        for rate, fn in plans:
            if rate <= 0:
                continue
            t = self.rng.expovariate(rate)
            while t < end:
                self.at(t, None, fn)
                t += self.rng.expovariate(rate)

    def fault_started(self) -> None:
        self.faulty += 1

    def fault_ended(self) -> None:
        self.faulty = max(0, self.faulty - 1)
        if not self.faulty:
            self.calm_since = self.now

    def _fault_for(self, seconds: float) -> None:
        self.fault_started()
        self.at(self.now + seconds, None, self.fault_ended)

    def _reset(self) -> None:
        self.rng.choice(self.clients).listener.reset()

    def _server_pause(self) -> None:
        seconds = self.rng.uniform(*self.options.faults.pause)
        self.note(None, "server paused", f"{seconds:.3f} s")
        self.server_paused_until = max(self.server_paused_until, self.now + seconds)
        self._fault_for(seconds)

    def _client_pause(self) -> None:
        client = self.rng.choice(self.clients)
        seconds = self.rng.uniform(*self.options.faults.pause)
        self.note(client, "client paused", f"{seconds:.3f} s")
        client.paused_until = max(client.paused_until, self.now + seconds)
        self._fault_for(seconds)

    def _new_candidates(self, count: int) -> None:
        """A new client (a process) with ``count`` candidates."""
        client = SimClient(self, self.made)
        self.made += 1
        self.clients.append(client)
        self.by_id[client.ctx.identity.client_id] = client
        for i in range(count):
            self.candidates.append(Candidate(client, i))

    def _crash(self) -> None:
        """A candidates' client dies; another starts within 2 s (once the server is up)."""
        alive = [c for c in self.candidates if c.state != "dead"]
        if not alive:
            return
        client = self.rng.choice(alive).client
        mine = [c for c in self.candidates if c.client is client]
        self.note(client, "crashed", f"{len(mine)} candidates")
        client.crash()
        self.clients.remove(client)
        for candidate in mine:
            candidate.state = "dead"
        self.candidates = [c for c in self.candidates if c.client is not client]
        self.at(self.now + self.rng.uniform(0.1, 2.0), None, self._restarted, len(mine))

    def _restarted(self, count: int) -> None:
        if self.server_down():
            self.at(self.down_until + 0.01, None, self._restarted, count)
            return
        self._new_candidates(count)
        for candidate in self.candidates[-count:]:
            self.note(candidate.client, "started", candidate.name)
            candidate.start()

    def _drop(self) -> None:
        """Fault ``drops``: a lock held now loses its holds on the server, unknown to its
        holders' clients: a force-release (half of the drops) or a failover."""
        held = [name for name in sorted(self.locks) if self._holders(name)]
        if held:
            self.drop_held(self.rng.choice(held))

    def _holders(self, name: str) -> set[str]:
        """The holders' fields of lock ``name`` on the server now."""
        return self.server.fields(name).keys() - {keys.RW_MODE_FIELD}

    def drop_held(self, name: str) -> None:
        """Lock ``name``, if held, loses its holds: by a force-release or a failover."""
        if not self._holders(name) or self.server_down():
            return
        if self.rng.random() < 0.5:
            self.force_release(name, self.rng.choice(self.clients))
        else:
            self.drop(name)

    def force_release(self, name: str, client: SimClient) -> None:
        """An operator's ``force-release`` of lock ``name`` from ``client``: the real flow
        and script (the hash deleted whoever holds it, its waiters told); `ran()` counts
        the holds it deletes as dropped. A ReadWriteLock in read mode is dropped by `drop()`
        instead (its force-release declares the readers its client knows)."""
        if self.locks[name] == RW:
            if self.server.fields(name).get(keys.RW_MODE_FIELD) != keys.RW_WRITE_MODE:
                self.drop(name)
                return
            core: LockCore = client.sides[name][WRITE]
        else:
            core = client.cores[name]
        self.note(client, "force-release", name)
        client.spawn(core.force_release(), f"{client.name}/force")

    def drop(self, name: str) -> None:
        """A failover to a replica that missed the writes of lock ``name``: its hash is gone
        now (a ReadWriteLock's read-timeout keys with it) and no message says so. Its
        waiters learn it at the lease end they were told: a fault until then."""
        server = self.server
        server.now_ms = EPOCH_MS + int(self.now * 1000)
        fields = server.fields(name)
        ttl = server.cmd_pttl(name)
        gone = [name]
        if self.locks[name] == RW:
            for reader in fields:
                if keys.rw_is_reader_field(reader):
                    prefix = keys.rw_read_timeout_prefix(name, reader) + ":"
                    gone += [key for key in server.data if key.startswith(prefix)]
        server.cmd_del(*gone)
        self.note(None, "failover", name, f"lost {sorted(_short(f) for f in fields)}")
        self.dropped_now(name, fields)
        self.freed_by[name] = "expiry"  # (its waiters re-check at the lease end)
        self._fault_for(max(ttl, 0) / 1000 * (1 + 2 * self.options.faults.drift) + 0.01)

    def dropped_now(self, name: str, fields: dict[str, str]) -> None:
        """The holds of ``fields`` on lock ``name`` were deleted by a drop, now."""
        for gone in fields.keys() - {keys.RW_MODE_FIELD}:
            self.lost_on_server.add((name, gone))
            self.dropped[name, gone] = _Drop(self.now)
            self.drops += 1

    def forget_drop(self, worker: Worker, side: str) -> None:
        """``worker`` was granted a hold of ``side``: a drop of that field made before its
        acquire began, or before the server granted it this hold (an earlier grant of the
        same acquire dropped, found late and given up by the flow), was of another hold."""
        key = (worker.lock, worker.field(side or None))
        drop = self.dropped.get(key)
        if drop is not None and drop.at < max(worker.since, self.granted.get(key, -1.0)):
            del self.dropped[key]

    def heard(
        self,
        worker: Worker,
        side: str,
        started: float,
        what: str,
        result: Any,
        error: BaseException | None,
        rule: str = "loss not reported",
    ) -> None:
        """``worker``'s re-entry or release of ``side``, begun at ``started``, came back:
        if a drop had deleted that hold before it began, the server's answer reflected the
        loss, so the worker must have been told of it by now (no silent loss: a re-entry
        granted afresh and counted on top of the lost hold, a release that freed the lock
        while the caller still counts a hold). ``rule`` skipped: not heard (its owner's
        belief stays stale, as if it had not asked)."""
        if rule != "loss not reported" and rule in self.options.skip:
            return
        key = (worker.lock, worker.field(side or None))
        drop = self.dropped.get(key)
        if drop is None or drop.at > started or isinstance(error, BackendError):
            return  # (BackendError: no answer from the server, whatever the script did)
        del self.dropped[key]
        if what == "re-entry":
            self.lost_reentries += 1
            self.overtaken += drop.overtaken
        if not worker.loss_told:
            after = "another owner held it since; " if drop.overtaken else ""
            self.violate(
                rule,
                f"{worker.name}'s {side + ' ' if side else ''}hold on {worker.lock!r} was "
                f"deleted at {drop.at:.6f} (a "
                f"drop); {after}its {what} begun at {started:.6f} answered {result!r} "
                f"({error!r}) and nobody told it the hold was lost",
            )

    def _interrupt(self) -> None:
        self._cancel(anywhere=True)

    def _cancel(self, anywhere: bool = False) -> None:
        acquiring = [
            w
            for w in self.workers
            if w.state == "acquiring"
            and w.task is not None
            and w.task.doomed is None  # (one cancellation per acquire)
            and w.client.paused_until <= self.now
        ]
        if acquiring:
            worker = self.rng.choice(acquiring)
            task = worker.task
            assert task is not None

            def cancelled() -> None:
                worker.state = "cancelled"  # its flow cleans up, then raises

            if self.rng.random() < 0.5 and task.effect is not None:
                cancelled()  # where it waits now
                worker.client.cancel(task)
            else:  # as it asks for its next effect (a mutex, a send...)
                task.doomed, task.anywhere = cancelled, anywhere

    def _restart(self) -> None:
        longest = max(2.0, self.options.watchdog_timeout) + 0.1
        self.note(None, "server restart", f"empty, back in {longest:.1f} s")
        self.server.flush()
        self.tokens.clear()  # the counters start over: no persistence
        self.terms.clear()
        self.restarted_at = self.now
        self.down_until = self.now + longest
        for client in self.clients:
            client.listener.reset()
        # Then the clients' back-offs: reconnecting, and reconciling what failed (to 1 s each).
        self._fault_for(longest + MAX_RETRY + lock.RECONCILE_PAUSE[1] + lock.RECONCILE_RECHECK)

    # ---- checkers
    def violate(self, rule: str, detail: str) -> None:
        if self.violation is None and rule not in self.options.skip:
            self.violation = Violation(rule, detail, self.report())

    def report(self) -> str:
        lines = [
            f"seed {self.seed}, plant {self.options.plant}, at t={self.now:.6f} s; "
            f"the last {len(self.history)} events:"
        ]
        for at, who, what, detail in self.history:
            text = " ".join(_describe(d) for d in detail)
            lines.append(f"  {at:10.6f} {who:>6} {what:<14} {text}")
        return "\n".join(lines)

    def ran(self, effect: Call, before: dict[str, str] | None, reply: Any) -> None:
        """After every script: at most one owner in a lock hash; FIFO at a fair grant."""
        if before is None:
            return
        name = effect.keys[0]
        fields = self.server.fields(name)
        if self.locks.get(name) == RW:
            self._ran_rw(effect, name, before, fields)
            return
        releaser = effect.args[2] if effect.script.name.startswith(RELEASES) else None
        for owner in before.keys() - fields.keys():
            if owner != releaser:  # ended, and not by its owner's release: a loss
                self.lost_on_server.add((name, owner))
        if effect.script.name in FORCE_RELEASES:
            self.dropped_now(name, {f: "" for f in before.keys() - fields.keys()})
        for owner in fields.keys() - before.keys():
            self.lost_on_server.discard((name, owner))  # a new grant
            self.granted[name, owner] = self.now
            self._overtaken(name, owner)
        if fields:
            self.free_since.pop(name, None)  # held, if only between two probes
        elif before:
            self.freed_by[name] = "release"
        if not fields and self.locks.get(name) in ("lock", "fenced"):
            self._unlocked(name)
        if effect.script.name in ("lock_acquire", "fenced_acquire") and self.caller:
            self.attempted[name, self.caller] = self.now
        if len(fields) > 1:
            self.violate("mutual exclusion", f"{name} has {len(fields)} owners: {fields}")
        if (
            effect.script.name == "fair_acquire"
            and self.server.fields(name)
            and (reply is None or reply == b"W")
        ):
            owner = str(effect.args[1])
            if owner in before:
                return  # a re-entry
            queue_key = keys.fair_queue_key(name)
            mine = self.server.joins.pop((queue_key, owner), math.inf)
            for other, _ in self.server.queue(name):
                if self.server.joins.get((queue_key, other), math.inf) < mine:
                    self.violate(
                        "FIFO",
                        f"{owner} was granted {name} ahead of {other}, queued before it and alive",
                    )

    def _ran_rw(
        self, effect: Call, name: str, before: dict[str, str], after: dict[str, str]
    ) -> None:
        """After every script on ReadWriteLock hash ``name``: a writer field is the only
        holder but for its own owner's read field; a holder's field gone other than by its
        own release is a loss; an unlock published is noted for `_woken()`."""
        script = effect.script.name.split("+")[0]
        releaser = None
        if script == "rw_write_release":
            releaser = str(effect.args[2])  # the writer field
        elif script == "rw_read_release":
            releaser = str(effect.args[1])  # the reader field
        held_before = before.keys() - {keys.RW_MODE_FIELD}
        held = after.keys() - {keys.RW_MODE_FIELD}
        for gone in held_before - held:
            if gone != releaser:  # ended, and not by its owner's release: a loss
                self.lost_on_server.add((name, gone))
        if script in FORCE_RELEASES:
            self.dropped_now(name, {f: "" for f in held_before - held})
        for new in held - held_before:
            self.lost_on_server.discard((name, new))  # a new grant
            self.granted[name, new] = self.now
            self._overtaken(name, new)
        if after.get(keys.RW_MODE_FIELD) == keys.RW_WRITE_MODE or (
            held - held_before and before.get(keys.RW_MODE_FIELD) != keys.RW_READ_MODE
        ):  # taken (if only between two probes); readers joining readers do not count
            self.free_since.pop(name, None)
            self.free_since.pop(name + READ_HELD, None)
        elif before and not after:
            self.freed_by[name] = "release"
        if script in RW_ACQUIRES and self.caller:
            self.attempted[name, self.caller] = self.now
        channel = keys.rw_channel(name)
        for sent, payload in self.server.publishing:
            if payload not in RW_MESSAGES:
                continue  # (a renewal's new lease)
            if sent == channel:
                self.unlocked[name] = (self.now, None)
            elif sent.startswith(channel + ":tenure:"):
                self.unlocked[name] = (self.now, self.by_id.get(sent[len(channel) + 8 :]))
        mode = after.get(keys.RW_MODE_FIELD)
        writers = [f for f in held if not keys.rw_is_reader_field(f)]
        readers = held - set(writers)
        if mode == keys.RW_WRITE_MODE:
            own = {writers[0][: -len(":write")]} if len(writers) == 1 else set()
            wrong = len(writers) != 1 or not readers <= own
        else:
            wrong = bool(writers) or (mode is None and bool(held))
        if wrong:
            self.violate(
                "mutual exclusion",
                f"{name} after {script} holds {sorted(held)} in mode {mode}: a writer beside "
                "another holder",
            )

    def _overtaken(self, name: str, field: str) -> None:
        """``field`` was granted lock ``name``: a dropped hold of another owner there was
        overtaken (the scenario the re-entry after a loss needs: tests/test_sim.py)."""
        for (on, dropped), drop in self.dropped.items():
            if on == name and _owner_of(dropped) != _owner_of(field):
                drop.overtaken = True

    def expired(self, key: str, entry: tuple[str, Any] | None) -> None:
        self.note(None, "expired", key)
        name = self.leader_names.get(key)
        if name is not None and entry is not None and entry[0] == "hash":
            self.lost_on_server.add((name, entry[1].get("owner", "")))
        if key in self.locks and entry is not None and entry[0] == "hash":
            self.lost_on_server.update((key, owner) for owner in entry[1])
            self.freed_by[key] = "expiry"

    def ran_election(self, effect: Call, before: tuple[str, int] | None) -> None:
        """After every election script but the renewal: a leadership that ended other than
        by its leader's resign is a loss; a new one has a term above every earlier one."""
        name = self.leader_names.get(effect.keys[0])
        after = self.server.leader(effect.keys[0])
        if name is None or after == before:
            return
        resigner = effect.args[0] if effect.script.name == "election_resign" else None
        ended = before is not None and (after is None or after[0] != before[0])
        if before is not None and ended and before[0] != resigner:
            self.lost_on_server.add((name, before[0]))
        if after is None or (before is not None and after[1] == before[1]):
            return  # vacant, or a new value (proclaimed) in the same term
        self.granted[name, after[0]] = self.now
        self.lost_on_server.discard((name, after[0]))
        last = self.terms.get(name, 0)
        if after[1] <= last:
            self.violate(
                "terms increase",
                f"{_short(after[0])} was elected for {name!r} with term {after[1]}, "
                f"not above {last}",
            )
        self.terms[name] = max(last, after[1])

    def check_leaders(self, candidate: Candidate | None = None) -> None:
        """Never two leaders at one moment: at most one candidate of an election believes
        it leads (each on its own clock), and the one that does is the leader the server
        names (unless the server restarted empty since it was elected)."""
        for name in [candidate.election] if candidate else self.elections:
            believers = [c for c in self.candidates if c.election == name and c.believes()]
            if len(believers) > 1:
                self.violate(
                    "two leaders",
                    f"{', '.join(c.name for c in believers)} all believe they lead {name!r} "
                    "with a valid lease",
                )
            leader = self.server.leader(self.elections_key(name))
            for c in believers:
                if leader is not None and leader[0] == c.owner:
                    continue
                if leader is None and self.granted.get((name, c.owner), 0.0) < self.restarted_at:
                    continue  # the server restarted empty since (no persistence)
                self.violate(
                    "two leaders",
                    f"{c.name} believes it leads {name!r} (term {c.term}) while the server "
                    f"names {_short(leader[0]) if leader else 'nobody'}",
                )

    def elections_key(self, name: str) -> str:
        return next(key for key, n in self.leader_names.items() if n == name)

    def _probe_elections(self) -> None:
        """Every 10 ms: `check_leaders()` and `check_elected()` for every election."""
        self.check_leaders()
        for name in self.elections:
            self.check_elected(name)
        self.at(self.now + 0.01, None, self._probe_elections)

    def check_elected(self, name: str) -> None:
        """A vacant leadership with a live candidate campaigning is filled within the
        bound of a lock's wake-up (counted from the vacancy, the candidate's start and the
        last fault): the resign script elects the next, a waiter re-checks at the lease end."""
        if self.faulty or self.server.leader(self.elections_key(name)) is not None:
            self.vacant_since.pop(name, None)
            return
        since = self.vacant_since.setdefault(name, self.now)
        campaigning = [
            c
            for c in self.candidates
            if c.election == name and c.state == "campaigning" and c.deadline - self.now > 1.0
        ]
        if not campaigning:
            return
        oldest = min(campaigning, key=lambda c: c.since)
        bound = self.election_bound()
        if self.now - max(since, oldest.since, self.calm_since) > bound:
            self.violate(
                "no leader elected",
                f"{name!r} vacant for {self.now - since:.3f} s (bound {bound:.3f} s) while "
                f"{oldest.name} campaigns since {oldest.since:.3f}",
            )

    def election_bound(self) -> float:
        """How long a leadership may stay vacant while a live candidate campaigns: message
        delays for the news and two round trips, and the drift of a lease-end re-check."""
        faults = self.options.faults
        slowest = 10 * faults.delay[1] if faults.slow else faults.delay[1]
        return 5 * slowest + faults.drift * self.options.watchdog_timeout + 0.02

    def check_exclusion(self, worker: Worker) -> None:
        if (worker.lock, worker.field()) in self.dropped:
            return  # a grant a drop deleted since (a re-entry's): `check_holders()` looks on
        for other in self.workers:
            if other is not worker and other.lock == worker.lock and other.believes():
                self.violate(
                    "mutual exclusion",
                    f"{worker.name} was granted {worker.lock!r} while {other.name} "
                    "believes it holds it with a valid lease",
                )

    def check_rw_exclusion(self, worker: Worker, side: str) -> None:
        """A ReadWriteLock grant of ``side``: no other owner believes it holds the write
        side, nor, for a write grant, any side (each on its own clock)."""
        if (worker.lock, worker.field(side)) in self.dropped:
            return  # a grant a drop deleted since (a re-entry's): `check_holders()` looks on
        for other in self.workers:
            if other is worker or other.lock != worker.lock:
                continue
            sides = other.beliefs()
            if sides and (side == WRITE or WRITE in sides):
                self.violate(
                    "mutual exclusion",
                    f"{worker.name} was granted the {side} side of {worker.lock!r} while "
                    f"{other.name} believes it holds {'/'.join(sorted(sides))} with a valid lease",
                )

    def check_token(self, worker: Worker, token: int) -> None:
        """A FencedLock's tokens strictly increase per lock (since the last restart: the
        server persists nothing, as the client's warning says)."""
        if self.granted.get((worker.lock, worker.owner), 0.0) < self.restarted_at:
            return  # granted by the server before it restarted empty
        last = self.tokens.get(worker.lock, 0)
        if token <= last:
            self.violate(
                "fencing token",
                f"{worker.name} was granted {worker.lock!r} with token {token}, not above {last}",
            )
        self.tokens[worker.lock] = token

    def check_loss_told(self, worker: Worker, field: str) -> None:
        """A worker whose hold (hash ``field``) ended on the server before its release must
        have been told."""
        ended = (worker.lock, field) in self.lost_on_server
        self.lost_on_server.discard((worker.lock, field))
        self.dropped.pop((worker.lock, field), None)  # (its last hold there is given up)
        if ended and not worker.loss_told:
            self.violate(
                "loss not reported",
                f"{worker.name}'s hold on {worker.lock!r} ended on the server before "
                "its release, and neither on_lost nor release said so",
            )

    def after_cancel(self, worker: Worker) -> None:
        """After a cancelled acquire: no hold or queue entry of its owner left, within the
        bound (0.5 s after the server answers again)."""
        self.cancelled[worker.owner, worker.lock] = self.now
        field = worker.field()
        self._orphans(worker, worker.owner, worker.lock, self.now, self.now, field)

    def _orphans(
        self, worker: Worker, owner: str, name: str, cancelled: float, at: float, field: str
    ) -> None:
        bound = 0.5 + 4 * self.options.faults.delay[1]
        if self.faulty or self.now - max(at, self.calm_since) < bound:
            when = max(at, self.calm_since, self.now) + bound
            self.at(when, None, self._orphans, worker, owner, name, cancelled, self.now, field)
            return
        if self.cancelled[owner, name] > cancelled or (
            worker.owner == owner and worker.since > cancelled
        ):
            return  # this owner asked again since: what is left may be that acquire's
        if field in self.server.fields(name):
            self.violate("orphan hold", f"{field} still holds {name!r} after its cancelled acquire")
        if any(o == owner for o, _ in self.server.queue(name)):
            self.violate(
                "orphan queue entry",
                f"{owner} is still queued on {name!r} after its cancelled acquire",
            )

    def bound(self, name: str) -> float:
        """How long a free lock with live waiters may stay free: message delay for the
        unlock and two round trips, the drift of a lease-end re-check, and for a FairLock the
        turn watcher's first look and a dead head's grace."""
        faults = self.options.faults
        slowest = 10 * faults.delay[1] if faults.slow else faults.delay[1]
        base = 5 * slowest + faults.drift * max(2.0, self.options.watchdog_timeout) + 0.02
        if self.locks[name] == "fair":
            base += self.options.watchdog_timeout / 3 + fair.FIRST_LOOK + 2 * fair.TURN_SLACK
        return base

    def check_holders(self) -> None:
        """Never two holders at one moment: of the owners that believe they hold a lock
        (each on its own clock; a belief made stale by a drop it cannot know of yet left
        out), at most one, or only readers; and the server agrees with each (its field is
        in the hash), unless the server restarted empty since its grant."""
        by_lock: dict[str, list[tuple[Worker, set[str]]]] = {}
        for w in self.workers:
            if w.held and not w.loss_told and w.state in ("holding", "releasing"):
                sides = w.beliefs() if w.side else ({""} if w.believes() else set())
                if sides:
                    by_lock.setdefault(w.lock, []).append((w, sides))
        for name, believers in by_lock.items():
            kind = self.locks[name]
            if len(believers) > 1 and (kind != RW or any(WRITE in s for _, s in believers)):
                said = ", ".join(f"{w.name} ({'/'.join(sorted(s)) or kind})" for w, s in believers)
                self.violate("mutual exclusion", f"{said} all believe they hold {name!r}")
            fields = self.server.fields(name)
            for w, sides in believers:
                for side in sides:
                    field = w.field(side or None)
                    if field in fields or self.granted.get((name, field), 0.0) < self.restarted_at:
                        continue
                    self.violate(
                        "mutual exclusion",
                        f"{w.name} believes it holds {name!r} {side} with a valid lease, and "
                        f"the server has no hold of it: {sorted(_short(f) for f in fields)}",
                    )

    def _probe(self) -> None:
        """Every 10 ms: `check_holders()`; a free lock with live waiters is taken within
        `bound()` (counted from when it was free, its oldest waiter began and the last fault
        ended); so is a ReadWriteLock in read mode with a live reader waiting."""
        self.check_holders()
        for name in self.locks:
            bound = self.bound(name)
            # Live waiters: not about to time out, and not held up by their own reconcile (an
            # earlier acquire's unknown outcome, being undone with a back-off up to 1 s).
            waiters = []
            for w in self.workers:
                if w.state == "acquiring" and w.lock == name and w.deadline - self.now > bound:
                    if (name, w.field()) in w.client.ctx.reconciling:
                        w.since = self.now  # waits anew once the reconcile is over
                    else:
                        waiters.append(w)
            if self.faulty or not waiters:
                self.free_since.pop(name, None)
                continue
            if self.locks[name] != "fair":
                self._woken(name, waiters, bound)
            fields = self.server.fields(name)
            key = name  # free since; read-held with a reader waiting since (READ_HELD)
            if fields and self.locks[name] == RW:  # taken, unless by readers and one waits
                waiters = [w for w in waiters if w.side == READ]
                self.free_since.pop(name, None)
                key = name + READ_HELD
                if fields.get(keys.RW_MODE_FIELD) != keys.RW_READ_MODE or not waiters:
                    self.free_since.pop(key, None)
                    continue
            elif fields:
                self.free_since.pop(name, None)
                continue
            else:
                self.free_since.pop(name + READ_HELD, None)
            since = self.free_since.setdefault(key, self.now)
            oldest = min(waiters, key=lambda w: w.since)
            if self.now - max(since, self.calm_since, oldest.since) > bound:
                # A key still there has expired (and nobody looked since); else the last
                # script or expiry that emptied it says.
                freed = "expiry" if name in self.server.data else self.freed_by.get(name)
                rule = "lost wake-up" if freed == "release" else "late lease-end re-check"
                if fields:  # in read mode, and a reader waits
                    rule = "reader left waiting"
                state = "read-held" if fields else "free"
                self.violate(
                    rule,
                    f"{name!r} {state} for {self.now - since:.3f} s (bound {bound:.3f} s) "
                    f"while {oldest.name} waits since {oldest.since:.3f}",
                )
        self.at(self.now + 0.01, None, self._probe)

    def _unlocked(self, name: str) -> None:
        """After a script that left Lock ``name`` free: the clients its unlock message (if
        it sent one) was for: every client on the lock's channel, or the one client whose
        own channel it went to (the wake queue: docs/wire.md)."""
        channel = keys.lock_channel(name)
        own = keys.lock_client_channel_prefix(name)
        for sent, payload in self.server.publishing:
            if payload != keys.UNLOCK_MESSAGE:
                continue
            if sent == channel:
                self.unlocked[name] = (self.now, None)
            elif sent.startswith(own):
                client = self.by_id.get(sent[len(own) :])
                self.unlocked[name] = (self.now, client)

    def _woken(self, name: str, waiters: list[Worker], bound: float) -> None:
        """An unlock wakes a waiter in every client it was for (the lock's channel reaches
        each client, a client's own channel that client; its table gives the wake-up to one
        of its waiters), who tries again within `bound()`, even when another client's
        waiter takes the lock first."""
        if name not in self.unlocked:
            return
        unlocked, target = self.unlocked[name]
        if self.now - max(unlocked, self.calm_since) <= bound:
            return
        for worker in waiters:
            client = worker.client
            if target is not None and client is not target:
                continue
            if worker.since < unlocked and self.attempted.get((name, client), -1) < unlocked:
                self.violate(
                    "lost wake-up",
                    f"{name!r} was unlocked at {unlocked:.6f} and no waiter of "
                    f"{client.name} (such as {worker.name}, waiting since "
                    f"{worker.since:.6f}) tried again within {bound:.3f} s",
                )


@dataclass
class _Drop:
    """A hold deleted by a drop (`Sim.dropped`)."""

    at: float
    overtaken: bool = False
    """Another owner was granted the lock since."""


@dataclass
class Result:
    seed: int
    acquisitions: int
    virtual_seconds: float
    seconds: float
    """Real seconds the run took."""
    elections: int = 0
    """Leaderships won (a campaign that returned a term)."""
    drops: int = 0
    """Holds deleted by drops (`Faults.drops`)."""
    lost_reentries: int = 0
    """Re-entries made after a drop deleted the hold they re-enter."""
    overtaken: int = 0
    """Of those, re-entries made after another owner was granted the lock since the drop."""


@contextmanager
def _quiet_log(sim: Sim) -> Iterator[None]:
    """tenure's log records go to the history instead of the log."""

    class ToHistory(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sim.note(sim.current, "log", record.getMessage()[:160])

    handler = ToHistory()
    saved = log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.propagate = saved


def run(seed: int, options: Options | None = None) -> Result:
    """Run one seed; raises `Violation` with the history when a rule broke."""
    return Sim(seed, options).run()


def search(
    seeds: range, options: Options | None = None, budget: float = math.inf
) -> tuple[list[Result], Violation | None]:
    """Run ``seeds`` in order until one breaks a rule or ``budget`` real seconds pass."""
    results: list[Result] = []
    started = real_time.perf_counter()
    for seed in seeds:
        if real_time.perf_counter() - started > budget:
            break
        try:
            results.append(run(seed, options))
        except Violation as violation:
            return results, violation
    return results, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tenure.testing.sim", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument(
        "--seconds", type=float, default=Options.seconds, help="virtual seconds per seed"
    )
    parser.add_argument("--plant", choices=PLANTS, help="swap in a known bug")
    parser.add_argument(
        "--elections", type=int, help="election names (default 1 or 2 by the seed; 0: none)"
    )
    parser.add_argument(
        "--workers", type=int, help="lock workers per client (default 1 to 4; 0: none)"
    )
    parser.add_argument("--locks", type=int, help="lock names (default 1 to 3 by the seed)")
    parser.add_argument(
        "--rwlocks", type=int, default=0, help="ReadWriteLock names (default 0; -1: 1 or 2)"
    )
    parser.add_argument(
        "--drops",
        type=float,
        default=0.0,
        help="holds deleted on the server per second (force-releases, failovers); owners then "
        "re-enter half their Lock holds, and 3 in 10 re-entries follow a drop",
    )
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="RULE",
        help="a rule not to check (e.g. 'orphan queue entry')",
    )
    args = parser.parse_args(argv)
    options = Options(
        seconds=args.seconds,
        plant=args.plant,
        elections=args.elections,
        workers=args.workers,
        locks=args.locks,
        rwlocks=None if args.rwlocks < 0 else args.rwlocks,
        skip=frozenset(args.skip),
        faults=Faults.none() if args.no_faults else Faults(),
    )
    if args.drops:
        drops = {"drops": args.drops, "drops_before_reentry": 0.3}
        options.faults = replace(options.faults, **drops)
        options.lock_reentries = 0.5
    seeds = (
        range(args.seed, args.seed + 1)
        if args.seed is not None
        else range(args.first, args.first + args.seeds)
    )
    started = real_time.perf_counter()
    results, violation = search(seeds, options)
    took = real_time.perf_counter() - started
    acquisitions = sum(r.acquisitions for r in results)
    elections = sum(r.elections for r in results)
    print(
        f"{len(results)} seeds passed, {acquisitions} acquisitions and {elections} elections "
        f"in {took:.1f} s ({acquisitions / took * 60:,.0f} and {elections / took * 60:,.0f} "
        "per minute)"
    )
    if violation is not None:
        print(f"seed {seeds[len(results)]} broke a rule: {violation}\n{violation.history}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
