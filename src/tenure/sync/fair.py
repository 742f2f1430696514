"""The sync fair lock (Redisson ``RFairLock``)."""

from __future__ import annotations

from tenure.sync.lock import Lock


class FairLock(Lock):
    """A reentrant distributed lock granted strictly in request order (FIFO), owned per
    (client, thread). Made by :meth:`tenure.Client.fair_lock`. Algorithm: Redisson's
    ``RedissonFairLock``; wire layout in DESIGN §3.

    Members, arguments, return values and errors are those of :class:`tenure.Lock`, with
    these differences:

    - A blocking ``acquire`` joins the lock's queue (server-side LIST) and is granted the
      lock only at the head of it, across threads, processes and clients. An acquire with
      ``blocking=False`` or ``timeout=0`` makes one attempt and never joins the queue: it
      succeeds only when the lock is free and nobody waits (or on re-entry).
    - Each waiter has a wait allowance: its ``timeout`` in seconds, or 300 s when it waits
      forever. A waiter that dies while queued is dropped once its allowance has passed
      after its turn came (the lease end of the holder ahead), so it delays the others by at
      most that. A waiter that times out, is interrupted or gets a ``BackendError`` leaves
      the queue before ``acquire`` returns or raises (if the server can be reached).
    - ``release`` and ``force_release`` wake only the queue head (on its own channel).
    """
