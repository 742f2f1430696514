"""What a client's parking table says about its waiters (tests only): a test waits for
this state instead of sleeping while a loaded machine makes a waiter late."""

from __future__ import annotations

import math
from typing import Any


def waiting(client: Any) -> int:
    """Waiters of ``client`` (sync or asyncio) past their last attempt, asleep or reading its
    socket, as its parking table says (a lingering channel's entry has no waiter)."""
    count = 0
    for listener in list(client._runner._listener._by_node.values()):
        table = listener._table
        for entry in list(listener._parking.channels.values()):
            # in a wait (its end set): one awaiting its SUBSCRIBE's answer, before its
            # attempt, sleeps or reads too
            idle = [
                k for k, t in list(entry.tickets.items()) if not t.permit and t.end > -math.inf
            ]
            count += sum(1 for k in idle if k in table.sleepers or table.reader == k)
    return count
