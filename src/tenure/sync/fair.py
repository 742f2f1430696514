# GENERATED from src/tenure/aio/fair.py by tools/unasync.py: edit that file, not this one.
"""The fair lock front."""

from __future__ import annotations

from tenure.sync.lock import Lock
from tenure.core.fair import FairLockCore


class FairLock(Lock):
    """A reentrant lock granted strictly in request order (Redisson ``RFairLock``).

    Made by ``client.fair_lock(name)``. Every member of [`tenure.Lock`][tenure.Lock]. A waiter joins
    a FIFO queue on the server on its first blocking attempt and only the queue's head may
    take the lock; a release wakes the head alone. A waiter counts as alive for
    ``watchdog_timeout`` and its client's renewal loop pushes that forward every
    ``watchdog_timeout / 3``, so a live waiter keeps its place however long it waits; a
    waiter whose process died is dropped one renewal period after its turn came at most (its
    ``timeout`` plays no part). A waiter that times out, is cancelled or fails leaves the
    queue (when the server can be reached). Java Redisson clients may share the queue.
    Wire layout ("Wire layout" in the docs): hash, queue list, deadline zset (Redisson's
    rules), tenure's alive-until hash, one channel per waiter.

    Example:
        ```python
        fair = client.fair_lock("invoices")
        with fair(timeout=30):          # served in arrival order
            ...
        ```
    """

    core_class = FairLockCore
