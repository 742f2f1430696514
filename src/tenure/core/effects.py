"""What a flow asks its driver to do. The driver sends back the result of each effect.

A flow is a generator ``Generator[Effect, Any, T]``: it yields an effect, the driver performs it
(blocking in `tenure.sync`, awaiting in `tenure.aio`) and sends the result back, or
throws the error into the flow so its cleanup can run. Redis errors arrive as
[`BackendError`][tenure.errors.BackendError].
"""

from __future__ import annotations

import dis
import enum
import functools
import inspect
import math
import time
from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tenure.scripts import Script

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """Run ``script`` with ``keys`` and ``args``; the result is the raw script reply.

    ``changes`` marks a script that changes lock state: with ``wait_for_replicas`` set, the
    driver waits for replicas after it on the same connection. A predicate instead of True
    says which replies changed something (an acquire that granted nothing must not wait).
    """

    script: Script
    keys: Sequence[str]
    args: Sequence[str | int]
    changes: bool | Callable[[Any], bool] = False
    until: float | None = None
    """Monotonic time up to which the driver sends the call again when it surely did not
    reach a server (no connection could be made: refused, or reset while connecting),
    after refreshing the topology (a cluster's slot map; Sentinel is asked on connect):
    a failover is absorbed within the caller's wait (docs/operations.md). None: never.
    A call that may have reached a server is never sent again."""
    settle: Callable[[Any, bool], Generator[Any, Any, None] | None] | None = None
    """For a script whose effect has no owner to reconcile by afterwards (a plain
    Semaphore's acquire): the driver calls ``settle(reply, False)`` as soon as it has read
    the reply, before the flow resumes, so the flow's clean-up knows what the script did
    even when an interrupt lands before the flow sees the reply. When the caller stops
    waiting (cancelled, or a signal handler's exception) before the reply was handed
    over, the driver keeps the connection, reads the reply in the background and runs the
    flow ``settle(reply, True)`` returns, if any (``reply`` is the error instance when
    none came, `NOT_RUN` when the script surely did not run). The hook must act once: a
    second call is a no-op.

    The driver also notes each send: ``settle(SENDING, False)`` once the connection is up
    and just before the script's bytes may go out (from then on it may run), and
    ``settle(NOT_RUN, False)`` after a NOSCRIPT reply (that send did not run; the EVAL
    that follows is noted as a send again). So a flow whose caller leaves knows whether
    its script may have been sent (a plain Semaphore's release, which must never be sent
    twice: `SemaphoreCore.release()`)."""


class Note(enum.Enum):
    """What a driver passes to `Call.settle` besides a reply."""

    SENDING = "sending"
    """The script's bytes may go out from now on."""
    NOT_RUN = "not run"
    """The script surely did not run (NOSCRIPT, or nothing was sent)."""


SENDING = Note.SENDING
NOT_RUN = Note.NOT_RUN


@dataclass(frozen=True, slots=True)
class Command:
    """Run one plain command (``PTTL``, ``HGET``...); the result is the raw reply."""

    args: tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Count the caller as a waiter on ``channel``; returns once the server confirmed.

    A message whose payload is in ``wake_all`` wakes every waiter of this client on the
    channel; any other message wakes one.
    """

    channel: str
    wake_all: frozenset[str] = frozenset()
    sharded: bool = True
    """The channel shares its key's cluster slot (docs/wire.md), so a Redis >= 7 cluster carries
    it with sharded pub/sub. False for a channel that hashes elsewhere (Redisson's latch
    channel of a hash-tagged name): plain SUBSCRIBE, and its script publishes with an
    upper-case ``redis.call('PUBLISH', ...)``, which `tenure.scripts.sharded()` keeps."""
    since: float | None = None
    """Monotonic time just before the caller's last attempt was sent: the reply is True
    when the subscription was already quiet then (confirmed, no message since), so an
    unlock after that attempt is sure to wake the caller, who need not try again first."""
    alias: str | None = None
    """This client's own channel for the same waiters (a Lock's client channel,
    `tenure.keys.lock_client_channel()`): subscribed and let go with ``channel``; a
    message on it is one on ``channel``, meant for this client alone."""
    relay: Call | None = None
    """With ``alias``: the script that passes a wake-up received on it on to another client
    when none of this client's waiters is left to use it (run in the background)."""


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """The caller stops waiting on ``channel``.

    ``pass_on``: the caller leaves abnormally (error, cancellation) and may have taken a
    wake-up it will not use, so another waiter of this client is woken in its place.
    ``lease``: the caller leaves because it took the lock, with this lease (seconds): the
    lease end the channel's other waiters of this client re-check at (not the old holder's).
    """

    channel: str
    pass_on: bool = False
    lease: float | None = None


@dataclass(frozen=True, slots=True)
class Drain:
    """Read what this client's pub/sub connection for ``channel`` has received, without
    blocking, if none of its waiters is reading it now.

    The waiters read the socket themselves, so while none waits, messages wait unread. A
    releaser whose own subscription got its unlock (it lingers after a recent wait) reads it
    at once: applied then, it wakes the waiters of that moment and none of the releaser's
    later waits, and it is not taken for an unlock after the releaser's next attempt."""

    channel: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Sleep until a message on ``channel`` or ``seconds`` pass; True when woken by a message.

    ``patience``: given when ``seconds`` is the time until the holder's lease ends (as the
    caller's last attempt saw it), capped by the caller's own deadline: ``patience`` is then
    the time left until that deadline (``math.inf``: none). The waiters of one client on the
    channel share the lease-end re-check (the oldest makes it and gets False) instead of one
    each; the others sleep until a wake-up or their ``patience`` runs out.
    """

    channel: str
    seconds: float
    patience: float | None = None


@dataclass(frozen=True, slots=True)
class WatchHolds:
    """A hold was just granted: the client's hold keeper must run.

    The runner starts its one keeper loop on the first of these (docs/internals.md, "Watchdog"): it
    renews holds taken without ``lease_time`` and reports any hold whose lease ran out on
    the local clock. Fronts and composites never start renewal themselves.
    """


WATCH_HOLDS = WatchHolds()


@dataclass(frozen=True, slots=True)
class Background:
    """Run ``flow`` on the same runner in the background, apart from the caller: it outlives
    the caller's cancellation or interruption (clean-up after an acquire whose outcome is
    unknown). The result is None, at once; the flow's own errors are logged.

    An interrupt thrown in at this yield (a second signal handler raising while the flow's
    clean-up asks for this, the spawn perhaps made, perhaps not) is answered by yielding
    the same ``flow`` again, up to `CLEAN_UP_TRIES` times: the runner runs a flow once,
    however often it was yielded."""

    flow: Generator[Any, Any, Any]


CLEAN_UP_TRIES = 4
"""How often a clean-up yields an effect it must not go without (its `Background`, its
`Unsubscribe`) while interrupts are thrown in at that yield: each try after the first
answers one. Then it goes on without it (a runner that cannot start work, with no thread
left, fails every try)."""


# ---------------------------------------------------------------- composite effects
# A MultiLock or RedLock flow runs member flows on the members' own runners (members may
# belong to different clients and servers).


class Handle(Protocol):
    """Background work started by `Spawn` (an asyncio task or a thread's future)."""

    def done(self) -> bool: ...
    def exception(self) -> BaseException | None: ...
    def result(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class OnMember:
    """Run ``flow`` on member ``index``'s runner and wait for it; the result is its result."""

    index: int
    flow: Generator[Any, Any, Any]


@dataclass(frozen=True, slots=True)
class Spawn:
    """Start ``flow`` on member ``index``'s runner in the background; the result is a
    `Handle`."""

    index: int
    flow: Generator[Any, Any, Any]


@dataclass(frozen=True, slots=True)
class WaitAny:
    """Wait until one of ``handles`` is done or ``seconds`` pass; the result is the set of
    handles still pending."""

    handles: Collection[Handle]
    seconds: float


@dataclass(frozen=True, slots=True)
class Join:
    """Wait until every handle is done or ``seconds`` pass (``math.inf``: no limit), shielded
    from the caller's cancellation; the result is the set of handles still pending."""

    handles: Collection[Handle]
    seconds: float = math.inf


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Together:
    """Run member flows side by side, ``(index, flow)`` each on member ``index``'s runner,
    without a thread or task per flow: in each round every flow's script call is sent before
    any reply is read, so N members cost about one round trip, not N.

    Replies are awaited until ``seconds`` pass; once ``enough()`` is True (checked after each
    reply), only replies already there are read. A flow not finished by then (its reply late,
    or an effect that would wait) goes on in the background. The result: one
    `Handle` per flow, in order; those done have finished here.
    """

    flows: Sequence[tuple[int, Generator[Any, Any, Any]]]
    seconds: float
    enough: Callable[[], bool] = _never


class Finished:
    """The `Handle` of a flow that already ended: its result, or its error."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error

    def done(self) -> bool:
        return True

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


UNSURE_COUNT = 65536
"""A ``PUBSUB NUMSUB`` count this large is Valkey 9.0-9.1's miscount, never a true one: the
size of a channel's table read while it resizes, a memory address plus the entries left
(docs/wire.md; ``bench/numsub_probe.py`` shows it)."""


@dataclass(frozen=True, slots=True)
class Settle:
    """Make the server's count of ``channel``'s subscribers true again, where a release found
    it could not be (Valkey 9.0-9.1, docs/wire.md): on a connection of its own, while
    ``PUBSUB NUMSUB`` is not below ``unsure``, one ``MULTI, SUBSCRIBE, UNSUBSCRIBE, PUBSUB
    NUMSUB, EXEC`` round (the channel's table moves two buckets; nobody sees the extra
    listener), at most ``rounds`` times. The result: the last count (int), or None where
    nothing was done (a cluster: its sharded count is right)."""

    channel: str
    unsure: int = UNSURE_COUNT
    rounds: int = 8


@dataclass(frozen=True, slots=True)
class Sleep:
    """Sleep ``seconds``."""

    seconds: float


Effect = (
    Call
    | Command
    | Subscribe
    | Unsubscribe
    | Drain
    | Wait
    | WatchHolds
    | Background
    | Settle
    | Sleep
)
CompositeEffect = OnMember | Spawn | WaitAny | Join | Together | Sleep
Flow = Generator[Effect, Any, T]
CompositeFlow = Generator[CompositeEffect, Any, T]


class Deadline:
    """The end of a wait, on the monotonic clock. ``math.inf`` seconds never ends."""

    __slots__ = ("end",)

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds if math.isfinite(seconds) else math.inf

    def remaining(self) -> float:
        """Seconds left (``math.inf`` for no deadline, <= 0 once passed)."""
        return self.end - time.monotonic() if math.isfinite(self.end) else math.inf


MIN_WAIT = 0.001
"""Shortest sleep between attempts: a holder's 0 ms PTTL still needs a moment to expire."""


def wait_for(ttl_ms: int, deadline: Deadline) -> float:
    """Seconds to sleep on a channel after an attempt that saw ``ttl_ms`` (-1: no expiry).

    Sleep until the holder's lease ends (so a crashed holder is replaced at its expiry, with no
    polling interval) or the deadline, whichever comes first; a message cuts it short.
    """
    lease_left = ttl_ms / 1000 if ttl_ms >= 0 else math.inf
    return max(MIN_WAIT, min(lease_left, deadline.remaining()))


def continued(
    flow: Generator[Any, Any, T],
    value: Any = None,
    error: BaseException | None = None,
    *,
    seen: Callable[[Any, Any, BaseException | None], None] | None = None,
) -> Generator[Any, Any, T]:
    """The rest of a started ``flow``, as a flow: ``value`` is sent in first (or ``error``
    thrown in: the outcome of the effect it last asked for), then each later effect passes
    through. Lets a driver hand a flow it began to another driver or to the background.

    ``seen(effect, value, error)``, when given, is told each effect's outcome before the
    flow gets it (how [`tenure.observe`][tenure.observe] watches a renewal pass; a fresh flow starts
    with ``value`` None)."""
    while True:
        try:
            effect = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            value, error = (yield effect), None
        except BaseException as failure:
            value, error = None, failure
        if seen is not None:
            seen(effect, value, error)


def just(effect: Any) -> Generator[Any, Any, Any]:
    """A flow of one effect; its result."""
    return (yield effect)


def resumed(flow: Generator[Any, Any, T], effect: Any) -> Generator[Any, Any, T]:
    """The rest of ``flow``, which just asked for ``effect`` (not yet carried out)."""
    try:
        value, error = (yield effect), None
    except BaseException as failure:
        value, error = None, failure
    return (yield from continued(flow, value, error))


def began(flow: Generator[Any, Any, Any], error: BaseException) -> bool:
    """False if ``flow`` did nothing before ``error`` cut it short: it never ran, or
    ``error`` came out of its own first instruction (a signal handler runs as a frame
    begins, at its ``RESUME`` (CPython 3.11+): before any ``try`` of the flow). True
    otherwise: it saw ``error`` (at a yield, or in its ``try``), or ``error`` came after
    its end. (A flow delegating at once to another, ``yield from``, counts as begun.)"""
    if inspect.getgeneratorstate(flow) == inspect.GEN_CREATED:
        return False
    code = getattr(flow, "gi_code", None)
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return tb.tb_lasti > _first(code)
        tb = tb.tb_next
    return True


@functools.cache
def _first(code: Any) -> int:
    """The offset of ``code``'s first instruction after its entry (``RESUME``)."""
    entered = False
    for instruction in dis.get_instructions(code):
        if entered:
            return instruction.offset
        entered = instruction.opname == "RESUME"
    return -1
