"""The watchdog's renewal pass (docs/internals.md), sans I/O.

Every ``watchdog_timeout / 3`` a driver runs `renew()` over the client's watchdog holds:
one script call re-applies the lease to a batch of keys whose owner field still exists and
reports the ones that are gone. A gone hold is lost. A failed call is retried on the next
tick; once a hold's lease has surely run out without a confirmed renewal, its keeper (the
runner's loop, on its own clock, with no I/O) reports it lost. Between the two, a hold whose
renewal failed is *in doubt* (jeopardy: ``in_doubt``, ``on_doubt`` once per episode) until a
renewal of it is confirmed. A hold past its cap (``max_hold``) is no longer renewed. With
``wait_for_replicas`` a renewal that too few replicas acknowledged confirms nothing: a
promoted replica would not have it.

Batch layout, the same for every renewal script (``scripts/_renew_batch.lua``): ARGV is the
lease in ms, then per hold its owner field, the number of its keys and the channel its lock's
waiters listen on ('' for none); KEYS are those keys, hold after hold, each hold's lock hash
first (a read hold adds its read-hold timeout keys). The reply has one 1 (renewed) or 0
(gone) per hold. Each channel of a renewed hold is told ``-<lease ms>`` (once per call), so
that waiters sleep on to the new lease end: idle waiters send nothing while their holder
lives, and still re-check when a holder that died lets its lease run out.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from tenure import keys, scripts
from tenure.core.args import to_ms
from tenure.core.context import Context
from tenure.core.effects import Call, Command, Flow
from tenure.core.holds import Hold, QueuedWaiter
from tenure.errors import BackendError, ServerError
from tenure.scripts import Script

log = logging.getLogger("tenure")

BATCH = 100
"""Holds renewed per script call: large enough to make renewal cheap, small enough not to
block the server for long."""


def batches(holds: list[Hold], *, by_slot: bool = False) -> Iterator[tuple[Script, list[Hold]]]:
    """``holds`` in renewal batches: one script per batch, at most `BATCH` holds.

    With ``by_slot`` a batch never mixes cluster hash slots (a cluster runs one script on one
    slot); every key of one hold shares its lock's hash tag (docs/wire.md), so a hold's slot is
    its lock key's.
    """
    groups: dict[tuple[Script, int], list[Hold]] = defaultdict(list)
    for hold in holds:
        groups[hold.renewal, keys.key_slot(hold.key) if by_slot else 0].append(hold)
    for (script, _), group in groups.items():
        for start in range(0, len(group), BATCH):
            yield script, group[start : start + BATCH]


def renewal_call(script: Script, batch: list[Hold], lease_ms: int) -> Call:
    """The renewal script call for ``batch`` (layout in the module docstring)."""
    batch_keys: list[str] = []
    args: list[str | int] = [lease_ms]
    for hold in batch:
        hold_keys = hold.renewal_keys()
        batch_keys += hold_keys
        args += [hold.field, len(hold_keys), hold.renewal_channel()]
    return Call(script, batch_keys, args, changes=True)


def renew(ctx: Context, *, by_slot: bool = False) -> Flow[list[Hold]]:
    """Renew every watchdog hold of ``ctx``; returns the holds found lost (already removed)
    that its owner's look did not report meanwhile, claimed for the keeper to log and report
    (`tenure.core.holds.Hold.claim()`).

    ``by_slot``: keep each batch within one cluster slot (see `batches()`).
    """
    lease_ms = to_ms(ctx.watchdog_timeout)
    lost: list[Hold] = []
    for script, batch in batches(ctx.holds.watchdog_holds(), by_slot=by_slot):
        sent = time.monotonic()
        try:
            reply = yield renewal_call(script, batch, lease_ms)
        except (BackendError, ServerError):  # not confirmed: retried next tick, or expires
            for hold in ctx.holds.unconfirmed(batch):  # jeopardy, once per episode
                hold.sink.hold_in_doubt(hold.owner)
            continue
        present = [int(r) == 1 for r in reply]
        lost += ctx.holds.renewed(batch, present, sent, ctx.watchdog_timeout)
    # The ReadWriteLock read holds it does not renew (lease_time, past max_hold): a Redisson
    # reader's renewal may have cut their lock's expiry below their lease; it is re-asserted
    # (never their lease lengthened), and one found gone is lost (docs/wire.md).
    unrenewed = ctx.holds.unrenewed_holds(READ_RENEW)
    for _, batch in batches(unrenewed, by_slot=by_slot):
        try:
            reply = yield renewal_call(READ_REASSERT, batch, 0)
        except (BackendError, ServerError):  # the next pass tries again
            continue
        gone = [hold for hold, r in zip(batch, reply, strict=True) if int(r) != 1]
        lost += ctx.holds.renewed(gone, [False] * len(gone), time.monotonic(), 0.0)
    # Claimed at the end of the pass: one found in a batch before may have been reported
    # (and logged) by its owner's look meanwhile; the keeper logs it no second time.
    return [hold for hold in lost if hold.claim()]


READ_RENEW = scripts.get("rw_read_renew")
READ_REASSERT = scripts.get("rw_read_reassert")


def report_doubts(ctx: Context, now: float) -> None:
    """The keeper's look for jeopardy on its own clock, with no I/O: a watchdog hold whose
    renewal was not confirmed for a renewal period and a half goes in doubt (``on_doubt``,
    once per episode), also while the pass that renews it still waits for its reply."""
    ctx.holds.doubt_period = ctx.watchdog_timeout / 3
    for hold in ctx.holds.doubtful(now):
        hold.sink.hold_in_doubt(hold.owner)


def report_lost(lost: list[Hold]) -> None:
    """Report each of ``lost`` (holds the table already removed as lost: found gone by
    `renew()`, or run out on the keeper's clock) to the core that granted it, which
    sets its ``lost`` flag, cancels the bodies it guards and has ``on_lost`` delivered
    (apart from the renewal loop); unless its owner's look at the lock reported it
    meanwhile (`tenure.core.holds.Hold.report_loss()`: a report after the owner's next
    grant would land on that). A driver calls this with what a pass or its clock
    returned; it never calls into a lock object itself."""
    for hold in lost:
        hold.report_loss()


def refresh_waiters(ctx: Context, *, by_slot: bool = False) -> Flow[int]:
    """Push forward the queue entries of every queued fair-lock waiter of ``ctx``
    (docs/internals.md, "Waiter liveness"): one script call per batch of at most
    `BATCH` waiters, the batches of one lock together (``by_slot``: never mixing
    cluster slots). The same call drops the dead heads of a free lock and wakes the live
    one. Returns the number of waiters whose entry was gone (the script woke them: they join
    again). A failed call is retried on the next pass: an entry lasts ``watchdog_timeout``,
    three passes.
    """
    waiters = ctx.holds.waiters.snapshot(ctx.identity.alive)
    groups: dict[int, list[tuple[QueuedWaiter, str]]] = defaultdict(list)
    for lock, owner in waiters:
        groups[keys.key_slot(lock.key) if by_slot else 0].append((lock, owner))
    entry_ms = to_ms(ctx.watchdog_timeout)
    gone = 0
    for group in groups.values():
        group.sort(key=lambda w: w[0].key)
        for start in range(0, len(group), BATCH):
            batch = group[start : start + BATCH]
            batch_keys: list[str] = []
            args: list[str | int] = [entry_ms, grace_ms(ctx), keys.UNLOCK_MESSAGE]
            for lock, owner in batch:
                batch_keys += lock.waiter_keys()
                args += [owner, lock.waiter_prefix]
            try:
                reply = yield Call(REFRESH, batch_keys, args, changes=True)
            except (BackendError, ServerError):
                continue
            for (lock, owner), present in zip(batch, reply, strict=True):
                if int(present) == 0:
                    lock.entry_gone(owner)
                    gone += 1
    return gone


REFRESH = scripts.get("fair_refresh")

REGISTRY_PREFIX = "tenure:client:"
"""Key of a client's registration: this prefix, then the client uuid (docs/wire.md)."""


def registration_key(client_id: str) -> str:
    """The STRING naming the client ``client_id`` (its name, host and pid, as JSON)."""
    return REGISTRY_PREFIX + client_id


def registration(ctx: Context) -> dict[str, Any]:
    """Who this client is: its name (default ``"<hostname>:<pid>"``), host and pid."""
    host, pid = socket.gethostname(), os.getpid()
    name = ctx.client_name if ctx.client_name is not None else f"{host}:{pid}"
    return {"name": name, "host": host, "pid": pid}


def register(ctx: Context) -> Flow[None]:
    """Name this client's owners on the server for ``inspect()`` and ``tenure status``: one
    SET of `registration_key()` with a lease of ``watchdog_timeout``, written at the end
    of each renewal pass while the client holds or queues, and deleted (one DEL) at the
    first pass after it holds and queues nothing. So it costs nothing on the
    acquire/release path, a hold is named within one renewal period, and a client that
    took only short holds leaves no key. A refusal (an ACL) or a failure only leaves the
    holders unnamed."""
    key = registration_key(ctx.identity.client_id)
    if not len(ctx.holds) and not len(ctx.holds.waiters):
        if ctx.registered:  # nothing left to name: no key left behind
            ctx.registered = False
            try:
                yield Command(("DEL", key))
            except (BackendError, ServerError) as error:  # it runs out with its lease
                log.debug("tenure: client registration not deleted: %s", error)
        return
    value = json.dumps(registration(ctx), separators=(",", ":"))
    try:
        yield Command(("SET", key, value, "PX", to_ms(ctx.watchdog_timeout)))
        ctx.registered = True
    except (BackendError, ServerError) as error:
        log.debug("tenure: client registration not written: %s", error)


def grace_ms(ctx: Context) -> int:
    """A fair-lock head's grace (ms) once the lock is free: one renewal period."""
    return to_ms(ctx.watchdog_timeout / 3)
