"""``tenure status``, ``tenure list``, ``tenure force-release``: what a server holds."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import replace

import click
from rich.console import Console
from rich.table import Table

import tenure
from tenure import keys
from tenure.cli.common import client, json_option, print_json, seconds, url_option
from tenure.core.election import LEADER as ELECTION
from tenure.core.election import election_keys
from tenure.core.fair import ALIVE as FAIR_ALIVE
from tenure.core.watchdog import REGISTRY_PREFIX

SCAN_COUNT = 1000
"""Keys the server looks at per SCAN step (never KEYS: it blocks the server)."""

AUX_PREFIXES = (keys.LOCK_TOKEN, keys.FAIR_QUEUE, keys.FAIR_TIMEOUT, FAIR_ALIVE)
READ_TIMEOUT = re.compile(r"^(.*):[0-9a-fA-F-]{36}:\d+:rwlock_timeout:\d+$")
PERMIT_TIMEOUT = re.compile(r"^(.*):timeout$")
ELECTION_KEY = re.compile(rf"^(.*):{ELECTION}(?:_term|_queue|_deadlines|_candidates|_log)?$")


# ------------------------------------------------------------------ status
@click.command()
@click.argument("name")
@url_option
@json_option
def status(name: str, url: str, as_json: bool) -> None:
    """Show what the server holds under NAME: kind, holders (who: client name, host and
    pid; owner, client id, thread or task number, hold count, remaining lease), fair queue
    with deadlines, read-write mode, fencing token, permits, latch count and waiting
    clients. Changes nothing.

    --json prints LockInfo.to_dict(): name, key, kind (lock | fair | rw | fenced |
    semaphore | permit_expirable_semaphore | latch | free | unknown), exists, held, holders
    [{owner, client_id, number, hold_count, mode, remaining_lease, client_name, host, pid}],
    remaining_lease (seconds; null without expiry or key), mode, queue [{owner, client_id,
    number, deadline, remaining, client_name, host, pid}], fencing_token, permits,
    permit_leases [{permit_id, remaining_lease}], count, waiters, server_time (epoch
    seconds), notes, value, term. client_name, host and pid are null for a client that
    registers nothing (Java Redisson). An election (kind election): its leader is the one
    holder, value and term are the leader's, queue lists the candidates in the order they
    will be elected, each with its value.

    \b
    Example:
      tenure status orders:42 --url redis://10.0.0.5:6379/0
    """
    with client(url) as c:
        info = c.inspect(name)
        election = shared_election(c, info)
    if election is not None:
        info = replace(info, notes=(*info.notes, f"{name!r} is also an election's name"))
    if as_json:
        print_json(info.to_dict())
        return
    console = Console()
    console.print(status_table(info))
    if election is not None:
        console.print(status_table(election))


def status_table(info: tenure.LockInfo) -> Table:
    """The information of one name as a rich table."""
    table = Table(title=f"{info.name}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    held = "held" if info.held else ("free" if info.kind not in SYNCHRONIZERS else "-")
    table.add_row("kind", info.kind)
    if info.key != info.name:
        table.add_row("key", info.key)
    table.add_row("state", held if info.exists or info.kind == "free" else f"{held} (no key)")
    if info.mode is not None:
        table.add_row("mode", info.mode)
    if info.kind == "election":
        return _election_rows(table, info)
    if info.exists:
        table.add_row("remaining lease", seconds(info.remaining_lease))
    for holder in info.holders:
        mode = f" {holder.mode}" if holder.mode else ""
        table.add_row(
            f"holder{mode}",
            f"{who(holder)}{holder.owner}  x{holder.hold_count}  "
            f"lease {seconds(holder.remaining_lease)}",
        )
    for position, waiter in enumerate(info.queue, 1):
        table.add_row(
            f"queued #{position}",
            f"{who(waiter)}{waiter.owner}  deadline in {seconds(waiter.remaining)}",
        )
    if info.fencing_token is not None:
        table.add_row("fencing token", str(info.fencing_token))
    if info.permits is not None:
        table.add_row("available permits", str(info.permits))
    for permit in info.permit_leases:
        table.add_row("permit", f"{permit.permit_id}  lease {seconds(permit.remaining_lease)}")
    if info.count is not None:
        table.add_row("count", str(info.count))
    table.add_row("waiting clients", str(info.waiters))
    for note in info.notes:
        table.add_row("note", note)
    return table


def _election_rows(table: Table, info: tenure.LockInfo) -> Table:
    """An election's rows: leader, value, term, lease; candidates, next elected first."""
    for leader in info.holders:
        table.add_row("leader", f"{who(leader)}{leader.owner}")
        table.add_row("value", info.value or "")
        table.add_row("remaining lease", seconds(info.remaining_lease))
    if info.term is not None:
        table.add_row("term" if info.held else "last term", str(info.term))
    for position, candidate in enumerate(info.queue, 1):
        table.add_row(
            f"candidate #{position}",
            f"{who(candidate)}{candidate.owner}  value {candidate.value or ''!r}  "
            f"deadline in {seconds(candidate.remaining)}",
        )
    table.add_row("waiting clients", str(info.waiters))
    for note in info.notes:
        table.add_row("note", note)
    return table


SYNCHRONIZERS = ("semaphore", "permit_expirable_semaphore", "latch")


def who(entry: tenure.Holder | tenure.QueuedWaiter) -> str:
    """``billing-worker (host-a pid 4242)  `` for a named holder or waiter; '' when its
    client registered nothing (a foreign client such as Java Redisson)."""
    if entry.client_name is None:
        return ""
    where = " ".join(
        part for part in (entry.host, f"pid {entry.pid}" if entry.pid is not None else None)
        if part
    )
    return f"{entry.client_name}{f' ({where})' if where else ''}  "


def shared_election(c: tenure.Client, info: tenure.LockInfo) -> tenure.LockInfo | None:
    """The election named as ``info`` when ``info`` is of another kind, or None.
    ``Client.inspect()`` reports a name's own key, and an election only when there is none:
    a Lock that shares an election's name hides it. Read here from the election's leader
    and term counter (docs/wire.md); its candidates are counted, not listed."""
    if info.kind in ("election", "free"):
        return None
    _, term_key, queue_key, *_ = election_keys(info.key)
    leader = c.election(info.name).leader()
    last_term = c.redis.get(term_key)
    if leader is None and last_term is None:
        return None
    candidates = int(c.redis.llen(queue_key))
    notes = [f"{info.name!r} is also a {info.kind}'s name: candidates not listed"]
    if candidates:
        notes.append(f"{candidates} candidate{'s' if candidates > 1 else ''} waiting")
    holders: tuple[tenure.Holder, ...] = ()
    if leader is not None:
        client_id, _, number = leader.owner.rpartition(":")
        known = bool(client_id) and number.isdigit()
        holder = tenure.Holder(
            owner=leader.owner,
            client_id=client_id if known else None,
            number=int(number) if known else None,
            hold_count=1,
            remaining_lease=leader.remaining_lease,
            client_name=leader.client_name,
        )
        holders = (holder,)
    return tenure.LockInfo(
        name=info.name,
        key=info.key,
        kind="election",
        exists=leader is not None,
        held=leader is not None,
        holders=holders,
        remaining_lease=None if leader is None else leader.remaining_lease,
        value=None if leader is None else leader.value,
        term=leader.term if leader is not None else int(last_term or 0),
        server_time=info.server_time,
        notes=tuple(notes),
    )


# ------------------------------------------------------------------ list
def name_of(key: str) -> str:
    """The name a key belongs to: a token, queue, deadline, read-hold or permit key gives
    its lock's name, an election's keys its name (docs/wire.md), any other key is a name
    itself."""
    for prefix in AUX_PREFIXES:
        if key.startswith(prefix + ":"):
            return _unbrace(key[len(prefix) + 1 :])
    for pattern in (READ_TIMEOUT, PERMIT_TIMEOUT, ELECTION_KEY):
        match = pattern.match(key)
        if match is not None:
            return _unbrace(match.group(1))
    return key


def _unbrace(name: str) -> str:
    if name.startswith("{") and name.endswith("}") and "{" not in name[1:]:
        return name[1:-1]
    return name


def scan_names(c: tenure.Client, pattern: str) -> Iterator[str]:
    """Names with keys matching ``pattern`` (SCAN ... COUNT, never KEYS), each once; also
    the names whose token or fair queue alone matches (a free fenced or fair lock), and
    elections (whose keys are ``{name}:tenure_election...``)."""
    patterns = [pattern]
    if "{" not in pattern and pattern != "*":
        patterns += [f"{prefix}:{{{pattern}}}" for prefix in AUX_PREFIXES]
        patterns.append(f"{{{pattern}}}:{ELECTION}*")
    seen: set[str] = set()
    for match in patterns:
        for raw in c.redis.scan_iter(match=match, count=SCAN_COUNT):
            name = name_of(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
            if name.startswith(REGISTRY_PREFIX):  # a client's registration, not a name
                continue
            if name not in seen:
                seen.add(name)
                yield name


@click.command("list")
@click.argument("pattern", default="*")
@url_option
@json_option
def list_names(pattern: str, url: str, as_json: bool) -> None:
    """List the locks, synchronizers and elections whose names match PATTERN (a Redis
    glob, default *): one line each with kind, holders (an election: its leader) and
    remaining lease; a lock and an election that share a name, a row each. Keys tenure
    did not write are left out. Uses SCAN with a COUNT, never KEYS.

    --json prints a list of the objects `tenure status --json` prints.

    \b
    Example:
      tenure list 'orders:*'
    """
    infos: list[tenure.LockInfo] = []
    with client(url) as c:
        for name in sorted(scan_names(c, pattern)):
            info = c.inspect(name)
            if info.kind not in ("free", "unknown"):
                infos.append(info)
            election = shared_election(c, info)  # hidden behind the name's own key
            if election is not None:
                infos.append(election)
    if as_json:
        print_json([info.to_dict() for info in infos])
        return
    table = Table(show_header=True)
    table.add_column("name", overflow="fold")
    table.add_column("kind", no_wrap=True)
    table.add_column("holders", overflow="fold")
    for column in ("lease", "waiting", "details"):
        table.add_column(column)
    for info in infos:
        table.add_row(
            info.name,
            info.kind,
            ", ".join(
                f"{_short(h)}{' ' + h.mode if h.mode else ''} x{h.hold_count}" for h in info.holders
            )
            or "-",
            seconds(info.remaining_lease) if info.holders else "-",
            str(info.waiters),
            _details(info),
        )
    console = Console()
    console.print(table)
    names = len({info.name for info in infos})  # a Lock may share an election's name
    console.print(f"{names} {'name' if names == 1 else 'names'} matching {pattern!r}")


def _short(holder: tenure.Holder) -> str:
    """``billing-worker:7`` (its client's name) or ``1a2b3c4d…:7`` (enough of the client id
    to tell clients apart in a list)."""
    if holder.client_id is None:
        return holder.owner
    if holder.client_name is not None:
        return f"{holder.client_name}:{holder.number}"
    return f"{holder.client_id[:8]}…:{holder.number}"


def _details(info: tenure.LockInfo) -> str:
    parts = []
    if info.kind == "election":
        if info.value is not None:
            parts.append(f"value {info.value!r}")
        if info.term is not None:
            parts.append(f"term {info.term}")
        if info.queue:
            parts.append(f"{len(info.queue)} candidate{'s' if len(info.queue) > 1 else ''}")
        return ", ".join(parts)
    if info.queue:
        parts.append(f"{len(info.queue)} queued")
    if info.fencing_token is not None:
        parts.append(f"token {info.fencing_token}")
    if info.permits is not None:
        parts.append(f"{info.permits} permits")
    if info.permit_leases:
        parts.append(f"{len(info.permit_leases)} taken")
    if info.count is not None:
        parts.append(f"count {info.count}")
    return ", ".join(parts)


# ------------------------------------------------------------------ force-release
@click.command("force-release")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@url_option
def force_release(name: str, yes: bool, url: str) -> None:
    """Release the lock NAME whoever holds it and wake its waiters. The former holder
    finds out at its next renewal or release (LockLostError). Asks first unless --yes.
    An election is refused (exit 1): tenure has no administrative step-down.

    \b
    Example:
      tenure force-release orders:42 --yes
    """
    with client(url) as c:
        info = c.inspect(name)
        if info.kind == "election":
            raise click.ClickException(
                f"not released: {name!r} is an election ({_leadership(info)}), and "
                "force-release does not end a leadership (tenure has no administrative "
                "step-down): its leader steps down with resign() (tenure elect: on SIGINT "
                "or SIGTERM), and a crashed leader's leadership ends when its lease runs out"
            )
        election = shared_election(c, info)
        if election is not None:
            click.echo(
                f"note: {name!r} is also an election's name ({_leadership(election)}): "
                "force-release leaves the election as it is",
                err=True,
            )
        if not info.held:
            if info.kind in SYNCHRONIZERS:
                raise click.ClickException(f"{name!r} is a {info.kind}: it has no holder")
            click.echo(f"{name!r} is not held ({info.kind}): nothing to release")
            return
        holders = "; ".join(
            f"{who(h)}{h.owner}{' (' + h.mode + ')' if h.mode else ''} x{h.hold_count}"
            for h in info.holders
        )
        if not yes:
            if not sys.stdin.isatty():  # a refusal (exit 1), not a usage error
                raise click.ClickException(
                    f"not released: {name!r} is held by {holders}, and with no terminal to ask "
                    "on, releasing needs --yes"
                )
            click.confirm(f"Release {info.kind} {name!r} held by {holders}?", abort=True)
        released = _release(c, info)
    if not released:
        click.echo(f"{name!r} was released by its holder in the meantime: nothing to release")
        return
    click.echo(
        f"released {info.kind} {name!r} held by {holders}; "
        f"{info.waiters} waiting {'client' if info.waiters == 1 else 'clients'} woken"
    )


def _leadership(info: tenure.LockInfo) -> str:
    """``led by host-a (client ...), term 4`` or ``vacant, last term 4``."""
    if not info.holders:
        return "vacant" if info.term is None else f"vacant, last term {info.term}"
    leader = info.holders[0]
    return f"led by {info.value!r} ({leader.client_name or leader.owner}), term {info.term}"


def _release(c: tenure.Client, info: tenure.LockInfo) -> bool:
    if info.kind == "fair":
        return c.fair_lock(info.name).force_release()
    if info.kind == "fenced":
        return c.fenced_lock(info.name).force_release()
    if info.kind == "rw":
        rw = c.read_write_lock(info.name)
        side = rw.write_lock() if info.mode == "write" else rw.read_lock()
        return side.force_release()
    return c.lock(info.name).force_release()
