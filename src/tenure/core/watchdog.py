"""The watchdog's renewal pass (DESIGN §4), sans I/O.

Every ``watchdog_timeout / 3`` a driver runs :func:`renew` over the client's watchdog holds:
one script call re-applies the lease to a batch of keys whose owner field still exists and
reports the ones that are gone. A gone hold is lost. A failed call is retried on the next
tick; once a hold's lease has surely run out without a confirmed renewal, its keeper (the
runner's loop, on its own clock, with no I/O) reports it lost. With ``wait_for_replicas`` a
renewal that too few replicas acknowledged confirms nothing: a promoted replica would not
have it.

Batch layout, the same for every renewal script (``scripts/_renew_batch.lua``): ARGV is the
lease in ms, then per hold its owner field and the number of its keys; KEYS are those keys,
hold after hold, each hold's lock hash first (a FairLock hold adds its deadline ZSET, a read
hold its read-hold timeout keys). The reply has one 1 (renewed) or 0 (gone) per hold.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

from tenure import keys
from tenure.core.args import to_ms
from tenure.core.context import Context
from tenure.core.effects import Call, Flow
from tenure.core.holds import Hold
from tenure.errors import BackendError
from tenure.scripts import Script

BATCH = 100
"""Holds renewed per script call: large enough to make renewal cheap, small enough not to
block the server for long."""


def batches(holds: list[Hold], *, by_slot: bool = False) -> Iterator[tuple[Script, list[Hold]]]:
    """``holds`` in renewal batches: one script per batch, at most :data:`BATCH` holds.

    With ``by_slot`` a batch never mixes cluster hash slots (a cluster runs one script on one
    slot); every key of one hold shares its lock's hash tag (DESIGN §3), so a hold's slot is
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
        args += [hold.field, len(hold_keys)]
    return Call(script, batch_keys, args, changes=True)


def renew(ctx: Context, *, by_slot: bool = False) -> Flow[list[Hold]]:
    """Renew every watchdog hold of ``ctx``; returns the holds found lost (already removed).

    ``by_slot``: keep each batch within one cluster slot (see :func:`batches`).
    """
    lease_ms = to_ms(ctx.watchdog_timeout)
    lost: list[Hold] = []
    for script, batch in batches(ctx.holds.watchdog_holds(), by_slot=by_slot):
        sent = time.monotonic()
        try:
            reply = yield renewal_call(script, batch, lease_ms)
        except BackendError:  # not confirmed: retried next tick, or expires on the clock
            continue
        present = [int(r) == 1 for r in reply]
        lost += ctx.holds.renewed(batch, present, sent, ctx.watchdog_timeout)
    return lost
