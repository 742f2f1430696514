# GENERATED from src/tenure/aio/spin.py by tools/unasync.py: edit that file, not this one.
"""The SpinLock front."""

from __future__ import annotations

from tenure.sync.lock import Lock
from tenure.core.spin import SpinLockCore


class SpinLock(Lock):
    """A reentrant lock whose waiters use no pub/sub (Redisson ``RSpinLock``).

    Made by ``client.spin_lock(name)``. Every member of [`tenure.Lock`][tenure.Lock], on the same
    wire layout (the lock hash, field ``<client uuid>:<n>`` -> hold count, the lease as the
    key's expiry, renewed by the client's watchdog). A refused waiter does not subscribe to
    any channel: it tries again after a pause that starts at 1 ms and doubles (plus a
    random jitter of up to one ms per refusal so far) up to 128 ms, Redisson's default
    exponential back-off; a ``timeout`` bounds the whole wait, the last pause included. A
    release publishes nothing. A waiter therefore takes a freed lock up to 128 ms late, and
    a contended lock costs each waiter up to ~8 attempts a second: use it where pub/sub is
    unwanted (a large cluster, where every PUBLISH reaches every node, or an ACL without
    channels), [`tenure.Lock`][tenure.Lock] elsewhere.

    A Lock or FencedLock waiting on the same name is not woken by a spin lock's release
    (it takes the lock at the spin holder's lease end): use one kind per name.

    Example:
        ```python
        spin = client.spin_lock("inventory")
        with spin(timeout=5):
            ...
        ```
    """

    core_class = SpinLockCore
