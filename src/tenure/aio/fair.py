"""The asyncio fair lock: the twin of :mod:`tenure.sync.fair`."""

from __future__ import annotations

from tenure.aio.lock import AsyncLock


class AsyncFairLock(AsyncLock):
    """A reentrant distributed lock granted strictly in request order (FIFO), owned per
    (client, asyncio task). Made by :meth:`tenure.AsyncClient.fair_lock`.

    The asyncio twin of :class:`tenure.FairLock` (same members as coroutines; see there for
    the queue, the wait allowance and errors). A cancelled waiting ``acquire`` leaves the
    queue before the cancellation propagates (if the server can be reached).
    """
