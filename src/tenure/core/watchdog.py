"""The watchdog's renewal pass (DESIGN §4), sans I/O.

Every ``watchdog_timeout / 3`` a driver runs :func:`renew` over the client's watchdog holds:
one script call re-applies the lease to a batch of keys whose owner field still exists and
reports the ones that are gone. A gone hold is lost. A failed call is retried on the next
tick; once a hold's lease has surely run out without a confirmed renewal, it is lost too.
"""

from __future__ import annotations

import time
from collections import defaultdict

from tenure.core.args import to_ms
from tenure.core.context import Context
from tenure.core.effects import Call, Flow
from tenure.core.holds import Hold
from tenure.errors import BackendError
from tenure.scripts import Script

BATCH = 100
"""Holds renewed per script call: large enough to make renewal cheap, small enough not to
block the server for long."""


def renew(ctx: Context) -> Flow[list[Hold]]:
    """Renew every watchdog hold of ``ctx``; returns the holds found lost (already removed)."""
    lease_ms = to_ms(ctx.watchdog_timeout)
    by_script: dict[Script, list[Hold]] = defaultdict(list)
    for hold in ctx.holds.watchdog_holds():
        by_script[hold.renewal].append(hold)
    lost: list[Hold] = []
    for script, holds in by_script.items():
        for start in range(0, len(holds), BATCH):
            batch = holds[start : start + BATCH]
            sent = time.monotonic()
            try:
                reply = yield Call(
                    script, [h.key for h in batch], [lease_ms, *(h.field for h in batch)]
                )
            except BackendError:
                lost += ctx.holds.expired(batch, ctx.watchdog_timeout, time.monotonic())
                continue
            lost += ctx.holds.renewed(batch, [int(r) == 1 for r in reply], sent)
    return lost
