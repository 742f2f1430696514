"""What ``client.inspect(name)`` reports, and how it reads it, sans I/O.

Rules (docs/wire.md is the layout read here):

- One read-only script (``inspect.lua``) reads the name's key, its fencing token, its fair
  queue and deadlines and a permit-expirable semaphore's permits in one atomic step, with the
  server's clock. A read-write lock's per-read-hold timeout keys are named by the reader
  fields of its hash, so for such a lock the script runs a second time with those keys
  declared; if the hash changed in between it runs again (three reads at most).
- Then ``PUBSUB NUMSUB`` (and ``PUBSUB SHARDNUMSUB`` where the server has it) counts the
  connections subscribed to the kind's channels: the waiting clients (a tenure client waits
  on one connection for all its threads or tasks).
- The kind comes from the key types and fields alone:
  a HASH with a ``mode`` field is a read-write lock (``rw``); another HASH with a fencing
  token is ``fenced``, with a fair queue or deadlines ``fair``, else ``lock`` (a fair lock
  nobody waits for looks like a plain lock; the layouts are the same then). A STRING with
  permit expiries is a ``permit_expirable_semaphore``; another integer STRING is a
  ``latch`` when clients wait on the latch channel and none on the semaphore channel, else
  a ``semaphore`` (both share that layout; a note says so when nobody waits). No key: a
  fencing token alone is a free ``fenced`` lock, a queue alone a free ``fair`` lock, an
  election's keys (a leader, a term counter or candidates: ``tenure.core.election``) an
  ``election``, else ``free``. Anything else is ``unknown``.

Nothing here changes a key: inspecting never disturbs holders or waiters.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tenure import keys, scripts
from tenure.core.args import check_name
from tenure.core.context import Context
from tenure.core.effects import UNSURE_COUNT, Call, Command, Flow, Settle
from tenure.core.election import election_channel, election_keys
from tenure.core.fair import alive_key
from tenure.core.watchdog import registration_key
from tenure.errors import BackendError, ServerError

KINDS = (
    "lock",
    "fair",
    "rw",
    "fenced",
    "semaphore",
    "permit_expirable_semaphore",
    "latch",
    "election",
    "free",
    "unknown",
)
"""Every value of `LockInfo.kind`."""

INSPECT_SCRIPT = scripts.get("inspect")
OWNER = re.compile(r"^([0-9a-fA-F-]{36}):(\d+)(:write)?$")
READS = 3
"""Reads of a read-write lock before giving up on matching its read-hold keys."""


@dataclass(frozen=True, slots=True)
class Holder:
    """One owner holding a lock.

    Attributes:
        owner: the owner field as on the wire (``<client uuid>:<number>``; a read-write
            lock's writer field without its ``:write`` suffix).
        client_id: the client uuid of the owner field; None if the field has another form.
        number: the thread (sync) or task (asyncio) number within that client; None as above.
        hold_count: how many holds the owner has (reentrancy count).
        mode: ``"read"`` or ``"write"`` for a read-write lock, None for other locks.
        remaining_lease: seconds until the hold expires (a reader: its longest read hold;
            others: the lock key's); ``math.inf`` without expiry; None if unknown.
        client_name, host, pid: who holds it: the holder's client name
            (``Client(name=...)``, default ``"<hostname>:<pid>"``), host name and process
            id, as its client registered them; None for a client that registers nothing
            (a foreign client such as Java Redisson, or a registration run out). An
            election's leader: the client name it wrote beside its leadership, until a
            registration names it.
    """

    owner: str
    client_id: str | None
    number: int | None
    hold_count: int
    mode: str | None = None
    remaining_lease: float | None = None
    client_name: str | None = None
    host: str | None = None
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class QueuedWaiter:
    """One entry of a fair lock's queue, or an election's candidate, head first.

    Attributes:
        owner, client_id, number: as in `Holder`.
        deadline: server epoch seconds at which the waiter's queue entry runs out and it
            is dropped as dead, unless its client (alive) pushes it forward first (every
            renewal period) or it takes the lock; None if it has no entry.
        remaining: seconds from the read until that deadline (negative once passed).
        client_name, host, pid: who waits, as in `Holder`.
        value: an election candidate's value (str; what it campaigns with); None for a
            fair lock's waiter.
    """

    owner: str
    client_id: str | None
    number: int | None
    deadline: float | None
    remaining: float | None
    client_name: str | None = None
    host: str | None = None
    pid: int | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True)
class Permit:
    """One permit taken from a permit-expirable semaphore.

    Attributes:
        permit_id: 32 lower-case hex digits (what ``acquire`` returned to its taker).
        remaining_lease: seconds until it expires; ``math.inf`` for a permit without lease.
    """

    permit_id: str
    remaining_lease: float


@dataclass(frozen=True, slots=True)
class LockInfo:
    """What a name holds on the server, as read at one moment by ``client.inspect(name)``.

    Attributes:
        name: the name as given; ``key``: the key on the wire (with the client's prefix).
        kind: one of `KINDS`: ``lock``, ``fair``, ``rw``, ``fenced``, ``semaphore``,
            ``permit_expirable_semaphore``, ``latch``, ``election``, ``free`` (no key) or
            ``unknown`` (a key tenure did not write).
        exists: True if the name's own key exists (a free fenced or fair lock may keep its
            token or queue without it; an election's own key is its leader hash).
        held: True if a lock kind has at least one holder; an election, a leader.
        holders: the holders (locks only), in the hash's order; an election's leader.
        remaining_lease: seconds until the key expires; ``math.inf`` without expiry; None
            when there is no key. An election: the leader's lease.
        mode: ``"read"`` / ``"write"`` for a held read-write lock, else None.
        queue: a fair lock's queued waiters, head first; an election's candidates, in the
            order they will be elected (each with its value and deadline).
        fencing_token: the last fencing token handed out for this name (None if none).
        permits: a semaphore's available permits (None for other kinds).
        permit_leases: a permit-expirable semaphore's taken permits.
        count: a count-down latch's count (None for other kinds).
        value: an election leader's value (None for other kinds, or when vacant).
        term: an election's term: the leader's, or when vacant the last one handed out
            (None for other kinds, or an election that never had a leader).
        waiters: clients subscribed to the kind's channels (waiting), from ``PUBSUB NUMSUB``
            (plus ``SHARDNUMSUB``); each client counts once however many of its threads or
            tasks wait.
        server_time: the server's clock at the read, epoch seconds.
        notes: remarks on what could not be told apart or read exactly.
    """

    name: str
    key: str
    kind: str
    exists: bool = False
    held: bool = False
    holders: tuple[Holder, ...] = ()
    remaining_lease: float | None = None
    mode: str | None = None
    queue: tuple[QueuedWaiter, ...] = ()
    fencing_token: int | None = None
    permits: int | None = None
    permit_leases: tuple[Permit, ...] = ()
    count: int | None = None
    waiters: int = 0
    server_time: float = 0.0
    notes: tuple[str, ...] = field(default=())
    value: str | None = None
    term: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the attribute names as keys (the stable ``--json`` form).

        Seconds stay floats; ``math.inf`` (no expiry) becomes None (``null``): with
        ``exists`` true, a null ``remaining_lease`` means the key never expires.
        """
        data: dict[str, Any] = _finite(asdict(self))
        return data


def _finite(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


# ------------------------------------------------------------------- reading
@dataclass(frozen=True, slots=True)
class Snapshot:
    """The reply of ``inspect.lua``, decoded."""

    now_ms: int
    type: str
    pttl: int
    hash: dict[str, str] | None
    string: str | None
    token: str | None
    queue: list[str]
    deadlines: dict[str, int]
    permits: dict[str, int]
    ttls: list[int]
    election: ElectionSnapshot | None = None


@dataclass(frozen=True, slots=True)
class ElectionSnapshot:
    """The election part of ``inspect.lua``'s reply, decoded."""

    leader: dict[str, str]
    pttl: int
    term: str | None
    candidates: list[str]
    deadlines: dict[str, int]
    values: dict[str, str]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def decode(reply: Any) -> Snapshot:
    """The script's reply as a `Snapshot`."""
    now, kind, pttl, content, token, queue, deadlines, permits, ttls, election = reply
    kind = _text(kind)
    flat = [_text(v) for v in content] if kind == "hash" and content else []
    return Snapshot(
        now_ms=int(now),
        type=kind,
        pttl=int(pttl),
        hash=dict(zip(flat[::2], flat[1::2], strict=True)) if kind == "hash" else None,
        string=_text(content) if kind == "string" and content is not None else None,
        token=_text(token) if token else None,
        queue=[_text(v) for v in queue],
        deadlines=_scores(deadlines),
        permits=_scores(permits),
        ttls=[int(t) for t in ttls],
        election=_election(election) if election else None,
    )


def _pairs(flat: Any) -> dict[str, str]:
    items = [_text(v) for v in flat]
    return dict(zip(items[::2], items[1::2], strict=True))


def _election(reply: Any) -> ElectionSnapshot:
    leader, pttl, term, candidates, deadlines, values = reply
    return ElectionSnapshot(
        leader=_pairs(leader),
        pttl=int(pttl),
        term=_text(term) if term else None,
        candidates=[_text(v) for v in candidates],
        deadlines=_scores(deadlines),
        values=_pairs(values),
    )


def _scores(flat: Any) -> dict[str, int]:
    """ZRANGE ... WITHSCORES (member, score, ...) as member -> integer score."""
    items = list(flat)
    return {_text(m): int(float(_text(s))) for m, s in zip(items[::2], items[1::2], strict=True)}


def read_call(key: str, extra: list[str]) -> Call:
    """The read-only script call for ``key``, with ``extra`` keys whose PTTL is wanted."""
    return Call(
        INSPECT_SCRIPT,
        [
            key,
            keys.token_key(key),
            keys.fair_queue_key(key),
            keys.fair_timeout_key(key),
            keys.permit_timeout_key(key),
            alive_key(key),
            *election_keys(key)[:5],
            *extra,
        ],
        [],
    )


def reader_counts(snapshot: Snapshot) -> dict[str, int]:
    """A read-write lock's reader fields and their read hold counts."""
    if snapshot.hash is None or keys.RW_MODE_FIELD not in snapshot.hash:
        return {}
    return {
        f: int(v)
        for f, v in snapshot.hash.items()
        if keys.rw_is_reader_field(f) and v.lstrip("-").isdigit()
    }


def read_timeout_keys(key: str, readers: dict[str, int]) -> list[str]:
    """Every read-hold timeout key of ``readers``, reader after reader."""
    return [k for owner, n in readers.items() for k in keys.rw_read_timeout_keys(key, owner, n)]


def channels(key: str, snapshot: Snapshot) -> list[str]:
    """Channels whose subscribers count as waiters: every kind's, and each fair waiter's."""
    queued = list(dict.fromkeys([*snapshot.queue, *snapshot.deadlines]))
    return [
        keys.lock_channel(key),
        keys.rw_channel(key),
        keys.semaphore_channel(key),
        keys.latch_channel(key),
        election_channel(key),
        *(keys.fair_waiter_channel(key, owner) for owner in queued),
    ]


def inspect(ctx: Context, name: str) -> Flow[LockInfo]:
    """The flow behind ``client.inspect(name)``: reads, then `build()`.

    Raises TypeError/ValueError for a bad name (before I/O); BackendError from the server.
    """
    check_name(name)
    key = ctx.wire_name(name)
    snapshot = decode((yield read_call(key, [])))
    notes: list[str] = []
    readers = reader_counts(snapshot)
    for attempt in range(READS):
        if not readers:
            break
        again = decode((yield read_call(key, read_timeout_keys(key, readers))))
        if reader_counts(again) == readers:
            snapshot = again
            break
        snapshot, readers = again, reader_counts(again)
        if attempt == READS - 1:
            notes.append("readers changed while reading: read-hold leases not shown")
    wanted = channels(key, snapshot)
    counts = _numsub((yield Command(("PUBSUB", "NUMSUB", *wanted))))
    try:
        sharded = _numsub((yield Command(("PUBSUB", "SHARDNUMSUB", *wanted))))
    except BackendError as error:  # Redis 6.2 has no sharded pub/sub
        if "unknown" not in str(error).lower():
            raise
        sharded = {}
    for channel, n in sharded.items():
        counts[channel] = counts.get(channel, 0) + n
    for channel, n in list(counts.items()):
        if n >= UNSURE_COUNT:  # Valkey 9.0-9.1 miscounts while the channel's table resizes
            settled = yield Settle(channel)
            if settled is not None and settled < UNSURE_COUNT:
                counts[channel] = settled + sharded.get(channel, 0)
            else:
                counts[channel] = 0
                notes.append(f"the server miscounts the listeners of {channel}: not counted")
    info = build(name, key, snapshot, counts, notes)
    entries: list[Holder | QueuedWaiter] = [*info.holders, *info.queue]
    ids = list(dict.fromkeys(e.client_id for e in entries if e.client_id))
    who: dict[str, dict[str, Any]] = {}
    for client_id in ids:  # one GET each: in a cluster the registrations are on any slot
        try:
            found = named((yield Command(("GET", registration_key(client_id)))))
        except (BackendError, ServerError):  # an ACL may refuse it: left unnamed
            continue
        if found is not None:
            who[client_id] = found
    return with_names(info, who)


def named(reply: Any) -> dict[str, Any] | None:
    """A registration's value (`tenure.core.watchdog.register()`), or None when there
    is none or it is not one."""
    if reply is None:
        return None
    try:
        value = json.loads(_text(reply))
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    pid = value.get("pid")
    return {
        "client_name": str(value["name"]) if value.get("name") is not None else None,
        "host": str(value["host"]) if value.get("host") is not None else None,
        "pid": pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
    }


def with_names(info: LockInfo, who: dict[str, dict[str, Any]]) -> LockInfo:
    """``info`` with each holder and queued waiter named by its client's registration."""
    if not who:
        return info
    holders = tuple(
        replace(h, **who[h.client_id]) if h.client_id in who else h for h in info.holders
    )
    queue = tuple(
        replace(q, **who[q.client_id]) if q.client_id in who else q for q in info.queue
    )
    return replace(info, holders=holders, queue=queue)


def _numsub(reply: Any) -> dict[str, int]:
    flat = list(reply)
    return {_text(c): int(n) for c, n in zip(flat[::2], flat[1::2], strict=True)}


def _owner(field: str) -> tuple[str, str | None, int | None]:
    match = OWNER.match(field)
    if match is None:
        return field, None, None
    owner = f"{match.group(1)}:{match.group(2)}"
    return owner, match.group(1).lower(), int(match.group(2))


def _seconds(pttl: int) -> float | None:
    """PTTL as seconds: None when the key is missing (-2), ``math.inf`` without expiry."""
    if pttl == -2:
        return None
    if pttl == -1:
        return math.inf
    return pttl / 1000


def _integer(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def build(
    name: str, key: str, snap: Snapshot, subscribers: dict[str, int], notes: list[str]
) -> LockInfo:
    """Decide the kind and fill a `LockInfo` from one read (see the module rules)."""
    now = snap.now_ms

    def waiting(*channel: str) -> int:
        return sum(subscribers.get(c, 0) for c in channel)

    lock_ch, rw_ch = keys.lock_channel(key), keys.rw_channel(key)
    sem_ch, latch_ch = keys.semaphore_channel(key), keys.latch_channel(key)
    fair_chs = [keys.fair_waiter_channel(key, o) for o in {*snap.queue, *snap.deadlines}]
    queue = tuple(
        QueuedWaiter(
            *_owner(o),
            deadline=snap.deadlines[o] / 1000 if o in snap.deadlines else None,
            remaining=(snap.deadlines[o] - now) / 1000 if o in snap.deadlines else None,
        )
        for o in snap.queue
    )
    token = _integer(snap.token)
    common: dict[str, Any] = {
        "name": name,
        "key": key,
        "exists": snap.type != "none",
        "remaining_lease": _seconds(snap.pttl),
        "server_time": now / 1000,
        "fencing_token": token,
    }
    fair_state = bool(snap.queue or snap.deadlines)

    if snap.type == "hash":
        assert snap.hash is not None
        lease = _seconds(snap.pttl)
        if keys.RW_MODE_FIELD in snap.hash:
            mode = snap.hash[keys.RW_MODE_FIELD]
            holders: list[Holder] = []
            ttls = iter(snap.ttls)
            for f, v in snap.hash.items():
                if f == keys.RW_MODE_FIELD:
                    continue
                count = _integer(v) or 0
                if f.endswith(":write"):
                    holders.append(Holder(*_owner(f), count, "write", lease))
                    continue
                own = [t for _, t in zip(range(count), ttls, strict=False)] if snap.ttls else []
                longest = max((_seconds(t) or 0.0 for t in own), default=None)
                holders.append(Holder(*_owner(f), count, "read", longest))
            return LockInfo(
                kind="rw",
                held=bool(holders),
                holders=tuple(holders),
                mode=mode,
                waiters=waiting(rw_ch),
                notes=tuple(notes),
                **common,
            )
        holders = [Holder(*_owner(f), _integer(v) or 0, None, lease) for f, v in snap.hash.items()]
        if token is not None:
            kind = "fenced"
        elif fair_state:
            kind = "fair"
        else:
            kind = "lock"
        return LockInfo(
            kind=kind,
            held=bool(holders),
            holders=tuple(holders),
            queue=queue,
            waiters=waiting(lock_ch, *fair_chs),
            notes=tuple(notes),
            **common,
        )

    if snap.type == "string":
        value = _integer(snap.string)
        if value is None:
            return LockInfo(kind="unknown", notes=("a STRING that is not a count",), **common)
        if snap.permits:
            permits = tuple(
                Permit(
                    pid,
                    math.inf if score >= keys.PERMIT_NO_LEASE_SCORE else (score - now) / 1000,
                )
                for pid, score in snap.permits.items()
            )
            return LockInfo(
                kind="permit_expirable_semaphore",
                permits=value,
                permit_leases=permits,
                waiters=waiting(sem_ch),
                notes=tuple(notes),
                **common,
            )
        on_sem, on_latch = waiting(sem_ch), waiting(latch_ch)
        if on_latch and not on_sem:
            return LockInfo(
                kind="latch", count=value, waiters=on_latch, notes=tuple(notes), **common
            )
        if not on_sem:
            notes.append(
                "a Semaphore and a CountDownLatch share this layout (an integer STRING); "
                "with nobody waiting they look alike: shown as semaphore"
            )
        return LockInfo(
            kind="semaphore", permits=value, waiters=on_sem, notes=tuple(notes), **common
        )

    if snap.type == "none" and snap.election is not None:
        return _election_info(snap.election, common, waiting(election_channel(key)), notes)

    if snap.type == "none":
        if token is not None:
            kind = "fenced"
        elif fair_state:
            kind = "fair"
        else:
            kind = "free"
        return LockInfo(
            kind=kind,
            queue=queue,
            waiters=sum(subscribers.values()),
            notes=tuple(notes),
            **common,
        )

    return LockInfo(
        kind="unknown",
        waiters=sum(subscribers.values()),
        notes=(f"a {snap.type.upper()} key, not written by tenure",),
        **common,
    )


def _election_info(
    election: ElectionSnapshot, common: dict[str, Any], waiters: int, notes: list[str]
) -> LockInfo:
    """An election's `LockInfo`: its leader as the holder (hold count 1, named by the
    client name it wrote), its candidates as the queue, head (next elected) first."""
    now_ms = round(common["server_time"] * 1000)
    leader = election.leader
    holders: tuple[Holder, ...] = ()
    if leader.get("owner"):
        holder = Holder(*_owner(leader["owner"]), 1, None, _seconds(election.pttl))
        holders = (replace(holder, client_name=leader.get("client") or None),)
    values, deadlines = election.values, election.deadlines
    queue = tuple(
        QueuedWaiter(
            *_owner(o),
            deadline=deadlines[o] / 1000 if o in deadlines else None,
            remaining=(deadlines[o] - now_ms) / 1000 if o in deadlines else None,
            client_name=values.get(o + "|client") or None,
            value=values.get(o),
        )
        for o in election.candidates
    )
    found = {
        **common,
        "exists": bool(holders),
        "remaining_lease": _seconds(election.pttl) if holders else None,
    }
    return LockInfo(
        kind="election",
        held=bool(holders),
        holders=holders,
        queue=queue,
        waiters=waiters,
        notes=tuple(notes),
        value=leader.get("value") if holders else None,
        term=_integer(leader.get("term")) if holders else _integer(election.term),
        **found,
    )
