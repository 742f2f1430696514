"""The read-write lock algorithm (Redisson's RReadWriteLock), sans I/O: two lock sides on
one hash.

Wire layout (docs/wire.md): HASH ``<name>`` with field ``mode`` (``read``/``write``), one field
per reader owner (its read hold count) and the writer's field ``<owner>:write``; a STRING
``{<name>}:<owner>:rwlock_timeout:<n>`` per read hold with its own expiry; channel
``redisson_rwlock:{<name>}``. Reads share, writes exclude. The writer may also take reads;
releasing its last write hold while it holds reads leaves the lock in read mode (downgrade).
A read release publishes ``0`` (wake one waiter), a write release ``1`` (wake all).

One wake-up per unlock (tenure's addition, ``scripts/_rw_wake.lua``): a waiting writer's
client is registered in the Lock's wake queue and listens on its own client channel
(``<channel>:tenure:<client uuid>``) beside the lock's channel, as a Lock's waiter does; an
unlock that frees the lock then wakes one such client instead of all. A reader refused within
a wait marks the queue, and the next unlock goes to the lock's channel: every waiting reader,
in every client, hears it (readers share). So does any unlock while a listener of the lock's
channel is no registered client (a Redisson waiter), as Redisson's own unlock does.

Differences from Redisson: a caller holding only read holds that asks for the write lock
gets [`LockUpgradeError`][tenure.errors.LockUpgradeError] at once (Redisson waits on itself
forever), or LockLostError when those read holds are gone on the server;
the watchdog renews only the caller's own read holds (Redisson renews every reader's); lock
expiries are only ever extended by renewals and read acquisitions, never shortened; a
downgrade wakes waiting readers. A Redisson reader's renewal sets the expiry (it may cut it
below a tenure reader's lease): each renewal pass also extends it back to the furthest lease
of the read holds the watchdog does not renew (``lease_time``), and reports a hold whose
field is gone lost (``scripts/rw_read_reassert.lua``; the bound in docs/wire.md).

Read-hold timeout keys: the scripts get every key they touch in KEYS (docs/internals.md), but which
timeout keys exist depends on the hash's hold counts. So a call *declares* reader fields,
each with a number n of holds, and passes the timeout keys of holds 1..n of each. The script
checks the declaration against the hash before changing anything: each declared count must
cover the reader's holds (and the one it adds), and a script that looks at every reader
(read release, force release) needs every reader declared. If not, it answers ``{'stale',
field, count, ...}`` with every reader of the hash and the flow declares again
(``scripts/_rw_readers.lua``). The first declaration is what this client knows: the holds in
its hold table. An owner is one thread or task of this client, so the server's count for its
field is the table's unless the hold was lost; readers of other clients cost a second round
trip when present.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from tenure import keys, scripts
from tenure.core.args import MAX_SECONDS, to_ms
from tenure.core.context import Context
from tenure.core.effects import Call, Command, Flow, Subscribe
from tenure.core.holds import Hold
from tenure.core.lock import REENTRY_LOST, LockCore, LossCallback, guard
from tenure.errors import BackendError, LockUpgradeError, ReplicationError

Readers = dict[str, int]
"""Reader field -> read hold count, as a call declares them."""

STALE = "stale"
"""First element of a script reply refusing a stale declaration of readers."""

DECLARATIONS = 20
"""Declarations a flow tries before giving up. A declaration goes stale only when a reader
appears, or takes more holds, between the reply that described the hash and the next call."""


class _SideCore(LockCore):
    """What both sides share: the hash, the channel, the per-side ``locked`` test."""

    mode: ClassVar[str]
    force_release_script = scripts.get("rw_force_release")
    wake_all: ClassVar[frozenset[str]] = frozenset({keys.WRITE_UNLOCK_MESSAGE})
    shares_recheck = False
    reentry_sets_expiry = False  # rw_read_acquire keeps the longer; rw_write_acquire adds
    """Readers and writers of one client wait on one channel: a writer refused at its
    lease-end re-check (the lock now read-held) says nothing of a reader behind it, which
    would get in. Each waiter re-checks at its own lease end (found by the simulator:
    tests/test_sim.py, seed 3)."""

    def __init__(self, ctx: Context, name: str, on_lost: LossCallback | None = None) -> None:
        super().__init__(ctx, name, on_lost)
        self.channel = keys.rw_channel(self.key)

    def read_holds(self, owner: str) -> int:
        """The read holds of ``owner`` recorded in this client's hold table."""
        hold = self.ctx.holds.get(self.key, owner)
        return len(hold.leases) if hold is not None else 0

    def declare(self, readers: Readers) -> tuple[list[str], list[str | int]]:
        """KEYS (every declared reader's timeout keys) and ARGV of a declaration."""
        timeout_keys: list[str] = []
        args: list[str | int] = [len(readers)]
        for field, holds in readers.items():
            timeout_keys += keys.rw_read_timeout_keys(self.key, field, holds)
            args += [field, holds]
        return timeout_keys, args

    def readers(self) -> Readers:
        """Every reader of this lock in this client's hold table, with its holds."""
        counts = self.ctx.holds.counts(self.key)
        return {f: n for f, n in counts.items() if keys.rw_is_reader_field(f)}

    def declared(
        self,
        build: Callable[[Readers], Call],
        readers: Readers,
        own: str | None = None,
        adds: int = 0,
        send: Callable[[Call], Flow[Any]] | None = None,
    ) -> Flow[Any]:
        """Send ``build(readers)`` until the script accepts the declaration; its reply.

        ``own``: the script needs only that reader, plus ``adds`` holds it adds (a stale
        reply gives its count); None: it needs every reader of the hash. ``send``: how to
        send a call (default: as is).
        """
        for _ in range(DECLARATIONS):
            call = build(readers)
            try:
                reply = yield from (send(call) if send is not None else _send(call))
            except ReplicationError as error:  # a stale reply changed nothing: declare again
                if _stale_readers(error.reply) is None:
                    raise
                reply = error.reply
            found = _stale_readers(reply)
            if found is None:
                return reply
            readers = found if own is None else {own: found.get(own, 0) + adds}
        raise BackendError(
            f"read-write lock {self.name!r}: its readers kept changing; "
            f"{DECLARATIONS} declarations were stale"
        )

    def idle_flag(self) -> int:
        """A release's ``idle`` ARGV (``_wake.lua``): 1 when this client's subscription to
        the lock's channel lingers with no waiter (it is nobody to wake), else 0."""
        return 1 if self.ctx.subscriptions.idle_listener(self.channel) else 0

    def locked(self) -> Flow[bool]:
        """True when the lock is held in this side's mode (Redisson ``isLocked``)."""
        reply = yield Command(("HGET", self.key, keys.RW_MODE_FIELD))
        return reply is not None and _text(reply) == self.mode

    def force_release_call(self, readers: Readers | None = None) -> Call:
        timeout_keys, declaration = self.declare(readers or {})
        return Call(
            self.force_release_script,
            [self.key, self.channel, *timeout_keys],
            [keys.WRITE_UNLOCK_MESSAGE, self.mode, *declaration],
            changes=True,
        )

    def send_force_release(self) -> Flow[Any]:
        return (yield from self.declared(self.force_release_call, self.readers()))


class ReadLockCore(_SideCore):
    """The read side: many owners may hold it at once, each hold with its own expiry."""

    mode = keys.RW_READ_MODE
    shared = True
    acquire_script = scripts.get("rw_read_acquire")
    release_script = scripts.get("rw_read_release")
    renewal_script = scripts.get("rw_read_renew")
    unlock_message = keys.READ_UNLOCK_MESSAGE

    def locked(self) -> Flow[bool]:
        """True when any owner holds a read hold (Redisson ``RReadLock.isLocked``): the lock
        is in read mode, or in write mode with read holds (the writer's own) in the hash."""
        reply = yield Command(("HGETALL", self.key))
        fields = _pairs(reply)
        mode = fields.get(keys.RW_MODE_FIELD)
        if mode == keys.RW_READ_MODE:
            return True
        return mode == keys.RW_WRITE_MODE and any(keys.rw_is_reader_field(f) for f in fields)

    def attempt(
        self, owner: str, lease: float | None, wait: float, again: bool = False
    ) -> Flow[int | None]:
        lease_ms = self.lease_ms(lease)
        writer = keys.rw_writer_field(owner)
        hold = self.ctx.holds.get(self.key, owner)
        write = self.ctx.holds.get(self.key, writer)
        # A re-entry: granted only on top of the read holds the server still has; a read
        # under the owner's write hold, only while the server still has that write hold (a
        # read granted afresh would let other readers in beside the write body).
        expects: list[str | int] = []  # ARGV[8] and ARGV[9], the trailing '' left out
        if write is not None:
            expects = [1 if hold is not None else "", 1]
        elif hold is not None:
            expects = [1]

        def build(readers: Readers) -> Call:
            timeout_keys, declaration = self.declare(readers)
            if not self._registering.get(owner):
                return Call(
                    self.acquire_script,
                    [self.key, *timeout_keys],
                    [lease_ms, owner, writer, *declaration, *([""] if expects else []), *expects],
                    changes=True,
                )
            # A reader waiting on the channel: its refusal marks the wake queue, so that the
            # next unlock wakes every client (_rw_wake.lua).
            return Call(
                self.acquire_script,
                [self.key, *timeout_keys, self.wake_queue],
                [lease_ms, owner, writer, *declaration, 1, *expects],
                changes=True,
            )

        def send(call: Call) -> Flow[Any]:
            return self.acquire_call(owner, call, lease)  # undoes a grant too few replicas saw

        # The new hold is number count + 1: declare the holds the table knows, plus it.
        first = {owner: (len(hold.leases) if hold is not None else 0) + 1}
        reply = yield from self.declared(build, first, owner, 1, send)
        if reply is not None:
            if reply in REENTRY_LOST or reply in WRITE_LOST:
                if write is not None:
                    # The owner's write hold is gone: with the read holds under it ('lost':
                    # the hash deleted or taken over), or without them ('lost:write').
                    report_lost(self.ctx, write)
                self.reentry_lost(owner, hold if reply in REENTRY_LOST else None)
            if reply in READS_LOST:  # the read holds alone: the write hold is intact
                self.reentry_lost(owner, hold)
            return int(reply)
        self.granted(owner, lease)
        return None

    def subscription(self, owner: str, since: float | None) -> Subscribe:
        """The lock's channel. The attempts made while subscribed mark the wake queue,
        and the first is always made (no ``since``: a quiet subscription is no reason to
        skip it), so that a reader never sleeps unmarked."""
        self._registering[owner] = True  # `_acquire()` drops it when the wait ends
        return super().subscription(owner, None)

    extend_script = scripts.get("rw_read_extend")

    def extend_call(self, owner: str, add_ms: int) -> Call:
        return Call(
            self.extend_script,
            self.renewal_keys(owner, self.read_holds(owner)),
            [owner, add_ms, to_ms(MAX_SECONDS)],
            changes=True,
        )

    def renewal_keys(self, owner: str, holds: int) -> list[str]:
        # See rw_read_renew.lua for why the client's own count of holds is the right one.
        return [self.key, *keys.rw_read_timeout_keys(self.key, owner, holds)]

    def release_call(self, owner: str, lease: float | None, readers: Readers | None = None) -> Call:
        if readers is None:
            readers = self._release_readers(owner)
        timeout_keys, declaration = self.declare(readers)
        # ``lease``: the owner's newest remaining hold's, which the script re-applies to it
        # when holds remain (the client then counts it valid from this release's sending).
        return Call(
            self.release_script,
            [self.key, self.channel, *timeout_keys, self.wake_queue],
            [self.unlock_message, owner, *declaration, self.idle_flag(), self.lease_ms(lease)],
            changes=True,
        )

    def send_release(
        self, owner: str, lease: float | None, recorded: int | None = None
    ) -> Flow[Any]:
        def build(readers: Readers) -> Call:
            return guard(self.release_call(owner, lease, readers), owner, recorded)

        return (yield from self.declared(build, self._release_readers(owner)))

    def _release_readers(self, owner: str) -> Readers:
        # The hold being released is no longer (release) or not yet (undo) in the table.
        readers = self.readers()
        readers[owner] = readers.get(owner, 0) + 1
        return readers


class WriteLockCore(_SideCore):
    """The write side: one owner at a time, and no readers but that owner."""

    mode = keys.RW_WRITE_MODE
    acquire_script = scripts.get("rw_write_acquire")
    release_script = scripts.get("rw_write_release")
    unlock_message = keys.WRITE_UNLOCK_MESSAGE
    extend_script = scripts.get("rw_write_extend")

    def field(self, owner: str) -> str:
        return keys.rw_writer_field(owner)

    @property
    def targeted(self) -> bool:
        """Writers are woken one client at a time (see the module's docstring)."""
        return True

    def subscription(self, owner: str, since: float | None) -> Subscribe:
        """The lock's channel, and this client's own channel beside it (its alias), whose
        unlocks a client with no waiter left passes on (``lock_wake.lua``)."""
        client_id = self.ctx.identity.client_id
        relay = Call(
            scripts.get("lock_wake"),
            [self.key, self.channel, self.wake_queue],
            [self.unlock_message, client_id],
        )
        alias = f"{self.channel}:tenure:{client_id}"  # as _wake.lua names it
        return Subscribe(self.channel, self.wake_all, since=since, alias=alias, relay=relay)

    def attempt(
        self, owner: str, lease: float | None, wait: float, again: bool = False
    ) -> Flow[int | None]:
        keys_ = [self.key]
        args: list[str | int] = [self.lease_ms(lease), self.field(owner), owner]
        registering = self._registering.get(owner, False)
        hold = self.ctx.holds.get(self.key, self.field(owner))
        reads = self.ctx.holds.get(self.key, owner)
        # A retry within a wait by an owner holding nothing here: the script skips the kind
        # and re-entry checks its first attempt made (a refusal costs the PTTL alone).
        retry = again and hold is None and reads is None
        if registering:
            # A waiter listening on its client channel: a refusal registers its client.
            keys_.append(self.wake_queue)
            args.append(self.ctx.identity.client_id)
        elif retry or hold is not None or reads is not None:
            args.append("")
        if retry:
            args.append(1)
        elif hold is not None:
            args += ["", 1]  # a re-entry: granted only on top of the write hold it still has
        elif reads is not None:
            # An upgrade, refused while the server has those read holds; with them gone,
            # granting it would hide their loss (the read body believes it still holds).
            args += ["", "", 1]
        call = Call(self.acquire_script, keys_, args, changes=True)
        reply = yield from self.acquire_call(owner, call, lease)
        if reply is None:
            self.granted(owner, lease)
            return None
        if reply in REENTRY_LOST:
            if reads is not None:
                # The read holds it expected, or those under its lost write hold: gone too.
                report_lost(self.ctx, reads)
            self.reentry_lost(owner, hold)
        if reply in WRITE_LOST:  # the write hold alone: the read holds under it are intact
            self.reentry_lost(owner, hold)
        if isinstance(reply, bytes | str):
            raise LockUpgradeError(
                f"read-write lock {self.name!r}: the caller holds read holds only and "
                "cannot wait for the write lock (it would wait on itself); release them first"
            )
        return int(reply)

    def release_call(self, owner: str, lease: float | None, readers: Readers | None = None) -> Call:
        if readers is None:
            readers = {owner: self.read_holds(owner)}
        timeout_keys, declaration = self.declare(readers)
        return Call(
            self.release_script,
            [self.key, self.channel, *timeout_keys, self.wake_queue],
            [
                self.unlock_message,
                self.lease_ms(lease),
                self.field(owner),
                owner,
                *declaration,
                self.idle_flag(),
            ],
            changes=True,
        )

    def send_release(
        self, owner: str, lease: float | None, recorded: int | None = None
    ) -> Flow[Any]:
        def build(readers: Readers) -> Call:
            return guard(self.release_call(owner, lease, readers), self.field(owner), recorded)

        return (yield from self.declared(build, {owner: self.read_holds(owner)}, owner))


READS_LOST = (b"lost:read", "lost:read")
"""``rw_read_acquire.lua``'s reply when the owner's read holds it expected are gone and its
write hold it expected is not: only the read side is reported lost."""
WRITE_LOST = (b"lost:write", "lost:write")
"""An acquire script's reply when the owner's write hold it expected is gone and its read
holds are not (a failover that missed the write grant): only the write side is lost."""


def report_lost(ctx: Context, hold: Hold) -> None:
    """An attempt on one side found the owner's ``hold`` of the other side gone on the
    server (``'lost'``): report its loss to the side that granted it, as
    `LockCore.reentry_lost()` does for the attempt's own side, before the attempt raises."""
    if ctx.holds.take(hold):
        hold.sink.hold_lost(hold.owner)
    else:  # the keeper took it off the table as lost meanwhile: a look makes its report now
        ctx.holds.get(hold.key, hold.field)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(reply: object) -> dict[str, str]:
    """An HGETALL reply (a flat list in RESP2, a dict in RESP3) as text field -> value."""
    if isinstance(reply, dict):
        return {_text(k): _text(v) for k, v in reply.items()}
    items = list(reply) if isinstance(reply, list) else []
    return {_text(k): _text(v) for k, v in zip(items[::2], items[1::2], strict=True)}


def _send(call: Call) -> Flow[Any]:
    return (yield call)


def _stale_readers(reply: object) -> Readers | None:
    """The readers of a reply refusing a stale declaration; None for any other reply."""
    if not isinstance(reply, list) or not reply or _text(reply[0]) != STALE:
        return None
    return {_text(field): int(count) for field, count in zip(reply[1::2], reply[2::2], strict=True)}
