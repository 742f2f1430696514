"""Semaphore and PermitExpirableSemaphore (Redisson's RSemaphore and RPermitExpirableSemaphore),
sans I/O.

Rules (docs/internals.md, "Semaphores and latches"):

- The permit count is a STRING; an acquire script takes permits only if enough are available
  (a count never set has none: the caller waits, as in Redisson). Every change that adds
  permits publishes the new count on ``redisson_sc:{name}``.
- Waiting is the locks' waiting: try, subscribe, try again (closing the race with a release
  published before the subscription), then sleep until a message or, for expirable permits,
  the earliest permit expiry, and loop. No polling. A message is the count now available:
  it wakes that many of this client's waiters for one permit, the oldest first
  (`WAKE_COUNT`), as Redisson's own listener does; one that finds the permit gone sleeps on
  (any later release publishes again). A waiter for n > 1 permits makes every message wake
  every waiter of this client on the channel (`WAKE_ANY`): a release may then serve a waiter
  behind one that cannot use it.
- Expirable permits have ids (16 random bytes, 32 hex digits for callers) in a ZSET scored by
  expiry epoch-ms, on the server's clock. Every operation first returns expired permits to the
  count. A permit taken without ``lease_time`` gets the watchdog's lease and is renewed by the
  client's renewal loop like a lock hold (Redisson gives it no expiry at all); one found gone
  is reported lost.
- An acquire that fails or is cancelled after its script may have run gives back the permit
  id it sent (releasing an id that was never taken is a no-op), so nothing stays taken.
  A plain Semaphore has no ids: permits its reply said were taken for a caller that then
  stopped waiting (or that too few replicas acknowledged) are released again in the
  background (`SemaphoreCore.give_back()`; the asyncio front reads the reply of a
  script in flight when its caller is cancelled, tenure/_settle.py); a reply that never
  came (a timeout, a sync caller interrupted in flight) leaves the outcome unknown and
  nothing is given back (docs/primitives/semaphore.md).
- A release cut short by an interrupt (cancelled, a signal handler's exception) is finished
  in the background: an expirable permit's always (releasing an id is idempotent), as is one
  that failed with a BackendError (retried until the server answers, at most its lease); a
  plain Semaphore's only when its script surely was not sent (`SemaphoreCore._release`: a
  release sent twice would add a permit never taken). The caller still gets its error.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import secrets
import time
from collections.abc import Callable
from typing import Any, cast

from tenure import keys, observe, scripts
from tenure.core.args import check_lease, check_name, check_wait, to_ms
from tenure.core.context import Context
from tenure.core.effects import (
    CLEAN_UP_TRIES,
    NOT_RUN,
    SENDING,
    WATCH_HOLDS,
    Background,
    Call,
    Deadline,
    Flow,
    Sleep,
    Subscribe,
    Wait,
    wait_for,
)
from tenure.core.holds import LossScope
from tenure.core.lock import RECONCILE_PAUSE
from tenure.core.parking import WAKE_ANY, WAKE_COUNT
from tenure.core.waiting import subscribed
from tenure.errors import (
    BackendError,
    ClientClosedError,
    LockError,
    LockLostError,
    NotOwnedError,
    ReplicationError,
    ServerError,
)

log = logging.getLogger("tenure")

WAKE = frozenset({WAKE_ANY})
"""How a waiter for n > 1 permits is woken: by every message."""
WAKE_ONE = frozenset({WAKE_COUNT})
"""How a waiter for one permit is woken: as many as the count published."""
PERMIT_ID = re.compile(r"[0-9a-f]{32}")


def check_count(value: Any, what: str, minimum: int | None) -> int:
    """An int permit count (not a bool) >= ``minimum`` (None: any sign)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{what} must be >= {minimum}, not {value}")
    if abs(value) >= 2**53:  # exact as a Lua number
        raise ValueError(f"{what} is too large: {value}")
    return value


def check_permit_id(value: Any) -> str:
    """A permit id as `PermitCore.acquire()` returns it: 32 lower-case hex digits."""
    if not isinstance(value, str):
        raise TypeError(f"permit_id must be a str, not {type(value).__name__}")
    if not PERMIT_ID.fullmatch(value):
        raise ValueError(f"permit_id must be 32 lower-case hex digits, not {value!r}")
    return value


def new_permit_id() -> str:
    """A fresh permit id: 16 random bytes as 32 lower-case hex digits."""
    return secrets.token_hex(16)


def wait_granted(
    attempt: Callable[[], Flow[int | None]],
    channel: str,
    deadline: Deadline,
    wake: frozenset[str] = WAKE_ONE,
) -> Flow[bool]:
    """The waiting loop: True once ``attempt`` granted (returned None), False when the
    deadline passed first. ``attempt`` returns ms until something may change on its own
    (a permit expiring), -1 for nothing: then only a message wakes the caller. ``wake``:
    `WAKE_ONE` for a waiter for one permit, else `WAKE`."""
    hint = yield from attempt()
    if hint is None:
        return True
    if deadline.remaining() <= 0:
        return False
    return (yield from subscribed(Subscribe(channel, wake), _sleep(attempt, channel, deadline)))


def _sleep(
    attempt: Callable[[], Flow[int | None]], channel: str, deadline: Deadline
) -> Flow[bool]:
    while True:
        hint = yield from attempt()
        if hint is None:
            return True
        if deadline.remaining() <= 0:
            return False
        yield Wait(channel, wait_for(hint, deadline))


class SemaphoreCore:
    """One named Semaphore of one client: the flows behind every public method."""

    acquire_script = scripts.get("semaphore_acquire")
    release_script = scripts.get("semaphore_release")

    def __init__(self, ctx: Context, name: str) -> None:
        self.ctx = ctx
        self.name = check_name(name)
        self.key = ctx.wire_name(name)
        self.channel = keys.semaphore_channel(self.key)

    def count_keys(self) -> list[str]:
        """KEYS of the scripts shared with PermitExpirableSemaphore (``semaphore_*``)."""
        return [self.key, self.channel]

    def _count_call(self, script: str, *args: int) -> Call:
        return Call(scripts.get(script), self.count_keys(), list(args), changes=True)

    # ------------------------------------------------------------ the permit count
    def try_set_permits(self, permits: object) -> Flow[bool]:
        n = check_count(permits, "permits", 0)
        return self._bool(self._count_call("semaphore_try_set", n))

    def set_permits(self, permits: object) -> Flow[None]:
        n = check_count(permits, "permits", 0)
        return self._none(self._count_call("semaphore_set", n))

    def add_permits(self, permits: object) -> Flow[None]:
        n = check_count(permits, "permits", None)
        return self._none(self._count_call("semaphore_add", n))

    def available_permits(self) -> Flow[int]:
        return self._int(Call(scripts.get("semaphore_available"), self.count_keys(), []))

    def drain_permits(self) -> Flow[int]:
        return self._int(self._count_call("semaphore_drain"))

    @staticmethod
    def _bool(call: Call) -> Flow[bool]:
        return int((yield call)) == 1

    @staticmethod
    def _int(call: Call) -> Flow[int]:
        return int((yield call))

    @staticmethod
    def _none(call: Call) -> Flow[None]:
        yield call

    # ------------------------------------------------------------ acquire and release
    def acquire(self, permits: object, blocking: object, timeout: object) -> Flow[bool]:
        """Take ``permits`` permits, waiting up to ``timeout``. Arguments checked now."""
        n = check_count(permits, "permits", 1)
        wait = check_wait(blocking, timeout)
        return self._acquire(n, wait)

    def _acquire(self, permits: int, wait: float) -> Flow[bool]:
        deadline = Deadline(wait)
        taken = False
        said = False

        def settle(reply: Any, left: bool) -> Flow[None] | None:
            # The driver's note of a reply (Call.settle): for the clean-up below, even if
            # an interrupt lands before the flow sees it; or, the caller gone before the
            # reply was handed over, the undo of a grant the flow never learned of.
            nonlocal taken
            granted = reply == 1
            if not left:
                taken = granted
            elif granted and not taken:
                return self.give_back(permits)
            return None

        call = Call(
            self.acquire_script,
            [self.key],
            [permits],
            changes=True,
            until=deadline.end,  # sent again within the wait when it surely did not arrive
            settle=settle,
        )

        def attempt() -> Flow[int | None]:
            nonlocal taken, said
            try:
                reply = yield call
            except ReplicationError as error:  # it ran on the primary: taken if it says so
                taken = error.reply == 1
                raise
            taken = int(reply) == 1
            if int(reply) == -1 and not said and deadline.remaining() > 0:  # it will wait
                said = True
                observe.permits_never_set("Semaphore", self.name)
            return None if taken else -1

        try:
            wake = WAKE_ONE if permits == 1 else WAKE
            return (yield from wait_granted(attempt, self.channel, deadline, wake))
        except GeneratorExit:
            raise
        except BaseException as error:
            # The reply said taken, then the caller stopped waiting (cancelled or
            # interrupted while leaving the channel) or too few replicas acknowledged:
            # nobody will release these permits, so give them back, in the background.
            # A second interrupt must not stop it, wherever it lands: inline, with no call
            # before the ``try`` (a signal handler runs after a call returns).
            tries, back, late = 0, None, None
            while taken and tries < CLEAN_UP_TRIES:
                try:
                    tries += 1
                    back = back or self.give_back(permits)
                    yield Background(back)  # the same flow each try: it runs once
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from error
            raise

    def give_back(self, permits: int) -> Flow[None]:
        """Release ``permits`` taken by an acquire whose caller never got them (errors are
        logged: it runs in the background)."""
        try:
            yield Call(self.release_script, self.count_keys(), [permits], changes=True)
        except ReplicationError:  # given back on the primary
            pass
        except BackendError as error:
            log.warning(
                "semaphore %r: giving back %d permit(s) taken by an abandoned acquire "
                "failed (%s): they stay taken",
                self.name, permits, error,
            )

    def release(self, permits: object) -> Flow[None]:
        """Give ``permits`` permits back (anyone may: a Semaphore has no owner)."""
        n = check_count(permits, "permits", 1)
        return self._release(n)

    def _release(self, permits: int) -> Flow[None]:
        # A release cut short by an interrupt (asyncio cancellation, a signal handler's
        # exception) must not lose the permits: nobody else would give them back (reviewer
        # R5, S1). But the count has no owner to reconcile by, and a release sent twice
        # adds permits that were never taken, which would let more callers in than the
        # semaphore allows. So it is finished only by whoever knows it was not sent: the
        # driver notes each send on the call (`Call.settle`: SENDING just before the
        # script's bytes may go out, NOT_RUN after a NOSCRIPT reply). Interrupted before
        # that note (in the flow, the runner, while a connection is made or reconnected):
        # nothing went, and the flow sends it again in the background. Interrupted after
        # it: the driver reads the reply in the background and the hook below sends it
        # again only if that reply was NOSCRIPT (the EVAL fallback never went); no reply
        # at all (a timeout, a dropped connection, the script's bytes perhaps cut short)
        # leaves the outcome unknown, and then the permits are rather lost than doubled
        # (logged at WARNING). tenure's own errors (BackendError...) are the caller's.
        state = [NOT_RUN]  # NOT_RUN, then SENDING, then the reply: frozen once interrupted

        def settle(reply: Any, left: bool) -> Flow[None] | None:
            if not left:
                state[0] = reply
                return None
            if state[0] is not SENDING:
                return None  # not sent (the flow sends it again), or it ran
            if reply is NOT_RUN:  # a NOSCRIPT read in the background: the EVAL never went
                return self._finish_release(permits)
            if isinstance(reply, BaseException):
                log.warning(
                    "semaphore %r: a release of %d permit(s) was interrupted and its reply "
                    "never came (%s): it may not have run; not sent again (a release sent "
                    "twice would add permits that were never taken)",
                    self.name, permits, reply,
                )
            return None

        try:
            # (Every step in the try: an interrupt after any of them is seen below.)
            yield Call(
                self.release_script, self.count_keys(), [permits], changes=True, settle=settle
            )
        except (GeneratorExit, LockError):
            raise  # tenure's own errors: the server answered, or the caller's to handle
        except BaseException as error:
            if state[0] is not NOT_RUN:
                raise  # it may have been sent: the hook above decides, in the background
            # Nothing was sent: send it in the background, once. A second interrupt must
            # not stop it, wherever it lands: no call before the ``try`` (a signal handler
            # runs after a call returns), the same flow yielded again (it runs once).
            tries, back, late = 0, None, None
            while tries < CLEAN_UP_TRIES:
                try:
                    tries += 1
                    back = back or self._finish_release(permits)
                    yield Background(back)
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from error
            raise

    def _finish_release(self, permits: int) -> Flow[None]:
        """Send a release its caller left before it went (errors are logged: it runs in the
        background)."""
        try:
            yield Call(self.release_script, self.count_keys(), [permits], changes=True)
        except ReplicationError:  # released on the primary
            pass
        except (BackendError, ServerError) as error:
            log.warning(
                "semaphore %r: finishing an interrupted release of %d permit(s) failed "
                "(%s): they stay out",
                self.name, permits, error,
            )


LostCallback = Callable[[str], None]


class PermitCore(SemaphoreCore):
    """One named PermitExpirableSemaphore of one client."""

    KIND = "PermitExpirableSemaphore"
    """Its kind in logs and metrics ([`tenure.observe.kind_of()`][tenure.observe.kind_of])."""

    def __init__(self, ctx: Context, name: str, on_lost: LostCallback | None = None) -> None:
        super().__init__(ctx, name)
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        self.on_lost = on_lost
        """Called with the permit id when a permit this client took is found gone."""
        self.timeout_key = keys.permit_timeout_key(self.key)
        self._lost: set[str] = set()

    def count_keys(self) -> list[str]:
        return [self.key, self.channel, self.timeout_key]

    # ------------------------------------------------------------ the hold-table hooks
    def renewal_keys(self, owner: str, holds: int) -> list[str]:
        """KEYS of one permit in a watchdog batch (``permit_renew``): the permit ZSET."""
        return [self.timeout_key]

    def renewal_channel(self) -> str:
        """None: a permit's waiters wait for a release, not for a lease end."""
        return ""

    def hold_lost(self, permit_id: str) -> None:
        """Report ``permit_id`` lost: `is_lost()`, then the ``on_lost`` callback."""
        self.ctx.holds.loss_reported(self.timeout_key, permit_id)
        self._lost.add(permit_id)
        for scope in self.ctx.holds.scopes_lost(self.timeout_key, permit_id):
            scope.lost()  # the body guarded by the permit is cancelled first
        if self.on_lost is not None:  # apart from the renewal loop, as for locks
            self.ctx.deliver(
                functools.partial(self.on_lost, permit_id),
                f"on_lost callback of semaphore {self.name!r}",
            )

    def is_lost(self, permit_id: object) -> bool:
        return check_permit_id(permit_id) in self._lost

    def hold_in_doubt(self, permit_id: str) -> None:
        """A renewal of the permit failed while it is still valid (no callback for permits:
        `valid_for()` says how long it surely lasts)."""

    def valid_for(self, permit_id: object) -> float:
        """Seconds permit ``permit_id`` (taken by this client) is surely still valid on the
        local monotonic clock; 0.0 when it is not out from this client or was lost."""
        hold = self.ctx.holds.get(self.timeout_key, check_permit_id(permit_id))
        return 0.0 if hold is None else hold.valid_for(time.monotonic())

    def checkpoint(self, permit_id: object) -> None:
        """LockLostError when the permit was lost or ran out; NotOwnedError when this client
        holds no such permit. No I/O."""
        permit = check_permit_id(permit_id)
        hold = self.ctx.holds.get(self.timeout_key, permit)
        if hold is None:
            if permit in self._lost:
                raise LockLostError(f"semaphore {self.name!r}: permit {permit} was lost")
            raise NotOwnedError(f"semaphore {self.name!r}: permit {permit} is not out here")
        if hold.valid_for(time.monotonic()) <= 0:
            raise LockLostError(f"semaphore {self.name!r}: permit {permit} ran out")

    def watch(self, permit_id: str, scope: LossScope) -> bool:
        """Tell ``scope`` when the permit is reported lost; False if it is not out here."""
        return self.ctx.holds.watch(self.timeout_key, permit_id, scope)

    def unwatch(self, permit_id: str, scope: LossScope) -> None:
        self.ctx.holds.unwatch(self.timeout_key, permit_id, scope)

    # ------------------------------------------------------------ flows
    def acquire_permit(
        self, blocking: object, timeout: object, lease_time: object, permit: str | None = None
    ) -> Flow[str | None]:
        """Take one permit; its id, or None when the wait ran out. Arguments checked now.
        ``permit``: the id to ask for (`new_permit_id()`; a fresh one if None), known to
        the front before the flow runs so that it can `abandon()` a grant its caller never
        got."""
        wait = check_wait(blocking, timeout)
        lease = check_lease(lease_time)
        return self._acquire_permit(wait, lease, permit or new_permit_id())

    def _acquire_permit(self, wait: float, lease: float | None, permit: str) -> Flow[str | None]:
        lease_ms = to_ms(lease if lease is not None else self.ctx.watchdog_timeout)
        deadline = Deadline(wait)
        call = Call(
            scripts.get("permit_acquire"),
            self.count_keys(),
            [permit, lease_ms],
            changes=True,
            until=deadline.end,  # sent again within the wait when it surely did not arrive
        )

        sent = 0.0
        said = False

        def attempt() -> Flow[int | None]:
            nonlocal sent, said
            sent = time.monotonic()  # the permit's lease counts from here
            reply = yield call
            if reply is None:
                return None
            if int(reply) == -2:  # no permit out and the count never set
                if not said and deadline.remaining() > 0:  # it will wait: say so once
                    said = True
                    observe.permits_never_set(self.KIND, self.name)
                return -1
            return int(reply)

        try:
            granted = yield from wait_granted(attempt, self.channel, deadline)
            if not granted:
                return None
            self._lost.discard(permit)
            applied = lease if lease is not None else self.ctx.watchdog_timeout
            renewal = scripts.get("permit_renew")
            self.ctx.holds.push(
                self, self.timeout_key, permit, permit, renewal, lease, applied=applied, sent=sent
            )
            yield WATCH_HOLDS  # renewed without a lease; its loss is seen on the clock anyway
        except GeneratorExit:
            raise
        except BaseException as error:
            # The last script may have taken the permit before the error (a lost reply, a
            # cancellation, too few replicas), or the caller was interrupted after the
            # grant (a signal handler, a cancellation while the renewal loop starts): the
            # permit leaves the hold table (never renewed again) and its id is given back
            # (a no-op if it was not taken), in the background: a second cancellation or
            # interrupt must not stop it.
            tries, back, late = 0, None, None
            while tries < CLEAN_UP_TRIES:  # as in `SemaphoreCore._acquire`
                try:
                    tries += 1
                    self.ctx.holds.discard(self.timeout_key, permit)
                    back = back or self._give_back(permit)
                    yield Background(back)
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from error
            raise
        return permit

    def abandon(self, permit: str) -> Flow[None] | None:
        """The acquire of ``permit`` ended and its caller never got the id (an interrupt
        after the flow returned it, before the front handed it over): the permit leaves the
        hold table now (no I/O: never renewed again); the flow to run gives it back in the
        background (a second interrupt cannot stop that). None when the permit is not in
        the table (never granted, or the flow's own clean-up undid it)."""
        if self.ctx.holds.discard(self.timeout_key, permit) is None:
            return None
        return self._abandon(permit)

    def _abandon(self, permit: str) -> Flow[None]:
        yield Background(self._give_back(permit))

    def _give_back(self, permit: str) -> Flow[None]:
        try:
            yield self._release_call(permit)
        except (BackendError, ServerError) as error:
            log.warning(
                "semaphore %r: giving back a permit after a failed acquire failed (%s); "
                "it expires with its lease",
                self.name,
                error,
            )

    def _finish_release_permit(self, permit: str, lease: float | None) -> Flow[None]:
        """Send again a release of ``permit`` that an interrupt or a BackendError cut short
        (releasing an id is idempotent). While the server does not answer it is retried with
        a growing pause (`RECONCILE_PAUSE`, as a lock's reconcile), for at most ``lease``
        seconds from now (the permit's lease as last applied; the watchdog's when unknown):
        by then the permit has expired by itself. A closed client (ClientClosedError) sends
        nothing more: it stops at once, as after a refusal (ServerError). Errors are
        logged: it runs in the background."""
        end = time.monotonic() + (lease if lease is not None else self.ctx.watchdog_timeout)
        pause = RECONCILE_PAUSE[0]
        while True:
            try:
                reply = yield self._release_call(permit)
            except ReplicationError:  # released on the primary
                return
            except (ClientClosedError, ServerError) as error:  # trying again cannot cure it
                log.warning(
                    "semaphore %r: finishing a release of permit %s cut short failed (%s); "
                    "it expires with its lease",
                    self.name, permit, error,
                )
                return
            except BackendError as error:
                left = end - time.monotonic()
                if left > 0:
                    yield Sleep(min(pause, left))
                    pause = min(2 * pause, RECONCILE_PAUSE[1])
                    continue
                log.warning(
                    "semaphore %r: finishing a release of permit %s cut short failed (%s); "
                    "it expires with its lease",
                    self.name, permit, error,
                )
                return
            log.info(
                "semaphore %r: finished a release of permit %s cut short (%s)",
                self.name, permit, "released" if int(reply) == 1 else "it was back already",
            )
            return

    def _release_call(self, permit: str) -> Call:
        return Call(scripts.get("permit_release"), self.count_keys(), [permit], changes=True)

    def release_permit(self, permit_id: object) -> Flow[None]:
        """Give back ``permit_id``; raises NotOwnedError/LockLostError if it is not out."""
        permit = check_permit_id(permit_id)
        # The flow itself, in no generator of its own: an interrupt lands in its ``try``.
        return cast("Flow[None]", self._release_permit(permit, strict=True))

    def try_release_permit(self, permit_id: object) -> Flow[bool]:
        permit = check_permit_id(permit_id)
        return cast("Flow[bool]", self._release_permit(permit, strict=False))

    def _release_permit(self, permit: str, strict: bool) -> Flow[bool | None]:
        """Give back ``permit``: True if released (None when ``strict``); False if it was
        not out, or ``strict``: NotOwnedError, LockLostError."""
        hold = None
        failure: BaseException | None = None
        try:
            # (Every step in the try: an interrupt after any of them is seen below.)
            # Forget it first: the watchdog must not renew it nor take its removal for a loss.
            hold = self.ctx.holds.discard(self.timeout_key, permit)
            reply = yield self._release_call(permit)
        except (GeneratorExit, ReplicationError):
            raise  # a ReplicationError: it took effect on the primary
        except BackendError as error:
            failure = error  # a timeout, a dropped connection, the server away: see below
        except LockError:
            raise  # tenure's own errors: the server answered, or the caller's to handle
        except BaseException as error:
            failure = error  # cancelled, or a signal handler raised
        if failure is not None:
            # Cancelled, or a signal handler raised, before the script went or while its
            # reply was awaited; or a BackendError (its script may have run, or may yet,
            # or never went): the caller meant to give the permit back, and nobody renews
            # it any more. Finish it in the background, once the server answers, rather
            # than leave it out to its lease end (reviewer R5, S1), as a lock's release is
            # (`tenure.core.lock.LockCore.release`): releasing a permit by id is idempotent,
            # so sending it again is safe whether or not it ran. The caller still gets its
            # error. A second interrupt runs the clean-up again from the top (each step
            # idempotent, no call before the ``try``: the except clauses above call none).
            tries, back, late = 0, None, None
            while tries < CLEAN_UP_TRIES:
                try:
                    tries += 1
                    hold = self.ctx.holds.discard(self.timeout_key, permit) or hold
                    lease = hold.lease if hold is not None else None
                    back = back or self._finish_release_permit(permit, lease)
                    yield Background(back)
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from failure
            raise failure
        if int(reply) == 1:
            return None if strict else True
        if hold is not None:
            self.hold_lost(permit)
        if strict:
            self._not_out(permit)
        return False

    def _not_out(self, permit: str) -> None:
        if permit in self._lost:
            raise LockLostError(
                f"semaphore {self.name!r}: permit {permit} expired or was taken away"
            )
        raise NotOwnedError(f"semaphore {self.name!r}: no permit {permit} is out")

    def update_lease_time(self, permit_id: object, lease_time: object) -> Flow[bool]:
        permit = check_permit_id(permit_id)
        lease = check_lease(lease_time)
        if lease is None:
            raise ValueError("lease_time must be a number of seconds > 0, not None")
        return self._update(permit, lease)

    def _update(self, permit: str, lease: float) -> Flow[bool]:
        # From now on the permit keeps its own lease: the watchdog stops renewing it.
        hold = self.ctx.holds.discard(self.timeout_key, permit)
        call = Call(
            scripts.get("permit_update"), self.count_keys(), [permit, to_ms(lease)], changes=True
        )
        sent = time.monotonic()
        try:
            updated = int((yield call)) == 1
        except BaseException:
            if hold is not None:  # unknown outcome: keep renewing under the watchdog
                self.ctx.holds.push(
                    self, self.timeout_key, permit, permit, hold.renewal, None,
                    applied=hold.lease, sent=hold.confirmed,
                )
            raise
        if updated:
            renewal = scripts.get("permit_renew")
            self.ctx.holds.push(
                self, self.timeout_key, permit, permit, renewal, lease, applied=lease, sent=sent
            )
        elif hold is not None:
            self.hold_lost(permit)
        return updated

    def remaining_lease(self, permit_id: object) -> Flow[float | None]:
        permit = check_permit_id(permit_id)
        return self._remaining(permit)

    def _remaining(self, permit: str) -> Flow[float | None]:
        reply = int((yield Call(scripts.get("permit_lease"), [self.timeout_key], [permit])))
        if reply == -2:
            return None
        if reply == -1:  # a permit Redisson took without lease
            return math.inf
        return reply / 1000
