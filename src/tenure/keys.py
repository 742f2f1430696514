"""Every key, channel and owner-field name tenure writes, in one place.

The layout is Redisson's (docs: "Wire layout"), so tenure and Redisson clients can share locks:
``prefix_name(p, n)`` is ``p:{n}`` (``p:n`` when ``n`` already holds a ``{``) and
``suffix_name(n, s)`` is ``{n}:s`` (``n:s`` when ``n`` holds a ``{``). Either way every key of
one lock carries the same hash tag, so all of them land in one cluster slot.

Scripts receive every key they touch in ``KEYS``, built here; they never build key names
themselves (channels are not keys and may be built by a script from an argument).
"""

from __future__ import annotations

LOCK_CHANNEL = "redisson_lock__channel"
LOCK_TOKEN = "redisson_lock_token"
FAIR_QUEUE = "redisson_lock_queue"
FAIR_TIMEOUT = "redisson_lock_timeout"
RW_CHANNEL = "redisson_rwlock"

FENCED_TOKEN_FIELD = "token"
"""Field of a fenced resource HASH ([`tenure.fencing`][tenure.fencing]): the highest token seen."""
FENCED_VALUE_FIELD = "value"
"""Field of a fenced resource HASH: the value stored with that token."""

UNLOCK_MESSAGE = "0"
"""Published on a lock's channel when it becomes free (a read unlock of a ReadWriteLock too)."""
READ_UNLOCK_MESSAGE = "0"
WRITE_UNLOCK_MESSAGE = "1"
"""Published when a write lock is freed: every waiter may proceed (readers share)."""
RENEWED_PREFIX = "-"
"""A watchdog renewal publishes ``-<lease ms>`` on the lock's channel (tenure's addition to
the layout): this client's waiters move their lease-end re-check instead of polling. It is a
number that is neither ``0`` nor ``1``, which Redisson's lock listeners ignore."""


def renewed_lease(payload: str, channel: str | None = None) -> float | None:
    """Seconds of lease a renewal message (``-<lease ms>``) announces; None for any other
    message (an unlock), and for any message on ``channel`` when it is given and is not a
    Lock-family channel: a semaphore's or latch's channel carries counts, and a negative
    count another client publishes there is a count (it wakes waiters), not a renewal."""
    if not payload.startswith(RENEWED_PREFIX):
        return None
    if channel is not None and not channel.startswith((LOCK_CHANNEL + ":", RW_CHANNEL + ":")):
        return None
    try:
        return int(payload[1:]) / 1000
    except ValueError:
        return None


def prefix_name(prefix: str, name: str) -> str:
    """``prefix:{name}``, or ``prefix:name`` when ``name`` already has a hash tag."""
    if "{" in name:
        return f"{prefix}:{name}"
    return f"{prefix}:{{{name}}}"


def suffix_name(name: str, suffix: str) -> str:
    """``{name}:suffix``, or ``name:suffix`` when ``name`` already has a hash tag."""
    if "{" in name:
        return f"{name}:{suffix}"
    return f"{{{name}}}:{suffix}"


def brace_twin(key: str) -> str | None:
    """The other wire name whose derived keys and channels are ``key``'s, or None.

    Redisson's naming rules (kept for interop) make ``x`` and ``{x}`` share every derived
    name: ``prefix_name(p, "x") == prefix_name(p, "{x}") == "p:{x}"`` and likewise for
    `suffix_name()`. So locks named ``x`` and ``{x}`` have different hashes but share
    their channel, fencing token counter, fair queue and deadlines, and read-hold timeout
    keys: a read hold of one can keep the other's writer out or let it in early. The twin of
    a key without ``{`` is ``{key}``; the twin of ``{inner}`` (``inner`` without ``{``) is
    ``inner``; any other key has none. For ``tenure doctor`` and users' own checks: never
    use both names of a pair.
    """
    if "{" not in key:
        return f"{{{key}}}"
    inner = key[1:-1]
    if len(key) > 2 and key[0] == "{" and key[-1] == "}" and "{" not in inner:
        return inner
    return None


def derived_names_collide(a: str, b: str) -> bool:
    """True when distinct wire names ``a`` and ``b`` share their derived keys and channels
    (see `brace_twin()`)."""
    return a != b and brace_twin(a) == b


def owner_field(client_id: str, number: int) -> str:
    """The hash field naming one owner: ``<client uuid>:<number>``."""
    return f"{client_id}:{number}"


def lock_channel(key: str) -> str:
    """Pub/sub channel of a Lock / FencedLock: unlock publishes ``0`` here."""
    return prefix_name(LOCK_CHANNEL, key)


LOCK_WAKE_QUEUE = "tenure_lock_wake"
"""tenure's addition beside Redisson's Lock layout: a ZSET of the tenure clients waiting on a
Lock, each also listening on its own client channel (`lock_client_channel()`), so that
an unlock wakes one process instead of all (docs/wire.md)."""


def lock_wake_queue(key: str) -> str:
    """ZSET of the tenure clients waiting on a Lock (member: client uuid), oldest first."""
    return prefix_name(LOCK_WAKE_QUEUE, key)


def lock_client_channel_prefix(key: str) -> str:
    """What a Lock's release script prepends to a client uuid to name its client channel:
    the lock's channel and ``:tenure:`` (the scripts build it so from the channel, see
    ``_wake.lua``)."""
    return f"{lock_channel(key)}:tenure:"


def lock_client_channel(key: str, client_id: str) -> str:
    """The channel on which one tenure client hears the unlocks of a Lock meant for its
    waiters alone (a targeted wake-up); it listens on `lock_channel()` too, for the
    unlocks every waiter hears (Redisson's, or any when a foreign waiter listens)."""
    return lock_client_channel_prefix(key) + client_id


def token_key(key: str) -> str:
    """STRING counter of a FencedLock's fencing tokens (INCR per acquisition, no TTL)."""
    return prefix_name(LOCK_TOKEN, key)


def fair_queue_key(key: str) -> str:
    """LIST of a FairLock's waiting owners, head first."""
    return prefix_name(FAIR_QUEUE, key)


def fair_timeout_key(key: str) -> str:
    """ZSET of a FairLock's waiting owners scored by their epoch-ms deadline."""
    return prefix_name(FAIR_TIMEOUT, key)


def fair_waiter_channel(key: str, owner: str) -> str:
    """Per-waiter channel of a FairLock: unlock publishes to the queue head's channel only."""
    return f"{lock_channel(key)}:{owner}"


def fair_waiter_channel_prefix(key: str) -> str:
    """What FairLock scripts prepend to an owner to name its channel (see
    `fair_waiter_channel()`): the scripts publish to ``<prefix><owner>``."""
    return f"{lock_channel(key)}:"


def rw_channel(key: str) -> str:
    """Pub/sub channel of a ReadWriteLock."""
    return prefix_name(RW_CHANNEL, key)


def rw_writer_field(owner: str) -> str:
    """Hash field of a ReadWriteLock's writer: ``<owner>:write``."""
    return f"{owner}:write"


RW_MODE_FIELD = "mode"
RW_READ_MODE = "read"
RW_WRITE_MODE = "write"


def rw_read_timeout_prefix(key: str, owner: str) -> str:
    """Prefix of one reader's per-hold timeout keys; hold ``n`` is ``<prefix>:<n>``."""
    return suffix_name(key, f"{owner}:rwlock_timeout")


def rw_read_timeout_key(key: str, owner: str, n: int) -> str:
    """STRING timing out ``owner``'s read hold number ``n`` (1-based):
    ``{<key>}:<owner>:rwlock_timeout:<n>``."""
    return f"{rw_read_timeout_prefix(key, owner)}:{n}"


def rw_read_timeout_keys(key: str, owner: str, holds: int) -> list[str]:
    """The timeout keys of ``owner``'s read holds ``1..holds``."""
    return [rw_read_timeout_key(key, owner, n) for n in range(1, holds + 1)]


def rw_is_reader_field(field: str) -> bool:
    """True for a ReadWriteLock hash field naming a reader (not ``mode``, not a writer)."""
    return field != RW_MODE_FIELD and not field.endswith(":write")


def slot_tag(key: str) -> str:
    """The part of ``key`` that picks its cluster slot: the content of the first ``{...}``
    when non-empty, else the whole key (the Redis Cluster rule). Keys with equal tags share
    a slot."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def key_slot(key: str) -> int:
    """The cluster hash slot of ``key``: CRC16 (XMODEM) of its `slot_tag()`, mod 16384."""
    crc = 0
    for byte in slot_tag(key).encode():
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc % 16384


# ------------------------------------------------------------ semaphores and latches
SEMAPHORE_CHANNEL = "redisson_sc"
LATCH_CHANNEL = "redisson_countdownlatch__channel"
PERMIT_TIMEOUT_SUFFIX = "timeout"

LATCH_ZERO_MESSAGE = "0"
"""Published on a latch's channel when its count reaches zero."""
LATCH_SET_MESSAGE = "1"
"""Published on a latch's channel when its count is set or the latch is deleted (as
Redisson's ``deleteAsync``)."""

PERMIT_NO_LEASE_SCORE = 922337203685477
"""Score Redisson gives a permit without lease (``Long.MAX_VALUE / 10000``): never expires."""


def semaphore_channel(key: str) -> str:
    """Channel of a Semaphore and a PermitExpirableSemaphore: releases publish the new count."""
    return prefix_name(SEMAPHORE_CHANNEL, key)


def permit_timeout_key(key: str) -> str:
    """ZSET of a PermitExpirableSemaphore's permits (16 raw bytes) scored by expiry epoch-ms."""
    return suffix_name(key, PERMIT_TIMEOUT_SUFFIX)


def latch_channel(key: str) -> str:
    """Channel of a CountDownLatch: ``redisson_countdownlatch__channel__{<key>}``, always
    braced (also for a name that has a hash tag of its own, as Redisson does)."""
    return f"{LATCH_CHANNEL}__{{{key}}}"

def cluster_safe(key: str) -> bool:
    """True when every key and channel built from ``key`` by `prefix_name()` /
    `suffix_name()` lands in ``key``'s cluster slot: ``key`` has no ``{``, or its first
    ``{`` opens a non-empty hash tag. (A name like ``a{b`` or ``{}{x}`` keeps Redisson's
    layout, ``p:a{b``, whose slot differs: such a name cannot be used in a cluster.)"""
    return "{" not in key or slot_tag(key) != key
