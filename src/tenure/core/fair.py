"""The fair lock algorithm (Redisson's RFairLock), sans I/O: a reentrant lock granted in
request order, in a queue that Java Redisson clients may share.

Wire layout (docs/wire.md): the lock hash as for Lock, a LIST of waiting owners (head
first), a ZSET owner -> score as Redisson reads it, one channel per waiter, and tenure's
addition, a HASH owner -> alive-until time of tenure's waiters (`alive_key()`). The
rules (``scripts/_fair_queue.lua``):

- Redisson's scripts chain a new waiter's score on the last one's (+ 5 minutes), take
  5 minutes off every score at each grant and drop the heads whose score has passed. A
  tenure waiter's score is its alive-until time plus 5 minutes per place up to its own (at
  least Redisson's chained score when it joins), so a grant ahead (which also moves it up a
  place) never makes it look dead to Redisson, and a Java waiter behind it gets at least
  Redisson's own allowance; tenure's grants and give-ups move the waiters behind up as
  Redisson's do.
- A waiter joins the tail on its first blocking attempt, alive for ``watchdog_timeout``;
  its client's renewal pass (the keeper's, once per ``watchdog_timeout / 3``, one batched
  script for all its waiters) pushes its alive-until time and its score forward while it
  waits, so a live waiter never loses its place however long it waits, and a dead one
  (its process killed) is dropped once its alive-until time has passed.
- Only the head may take the lock; a release wakes the head alone (waiters are not told when
  they become the head). The client that freed the lock looks shortly after
  (`FairLockCore.watch_turn()`, one background watcher per client and lock, whichever
  of its lock objects released; under contention the next release comes first and it never
  looks): a head that has not come by then is woken
  again and its turn starts - its score and alive-until time are cut to at most one
  renewal period (the grace) - and once that has passed it is dropped as dead and the next
  one woken: a dead head delays the queue by one renewal period. Java heads are cut alike
  (a live one comes when woken). While the lock is held by another and someone waits, the
  watcher looks again when the lease ends: a holder that died is replaced then.
- A waiter that times out, is cancelled or fails leaves the queue.

Joining, a turn, a release and a renewal are O(1) in the number of waiters but for the dead
heads dropped; a grant from the queue and a give-up are O(waiters) (Redisson's rule: every
waiter behind moves up), and a waiter's refresh is O(its place) (``LPOS``).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from tenure import keys, scripts
from tenure.core.context import Context
from tenure.core.effects import WATCH_HOLDS, Background, Call, Flow, Sleep
from tenure.core.holds import Identity
from tenure.core.lock import REENTRY_LOST, LockCore, LossCallback
from tenure.core.watchdog import grace_ms
from tenure.errors import (
    BackendError,
    ClientClosedError,
    LockKindError,
    ReplicationError,
    ServerError,
)

log = logging.getLogger("tenure")

QUEUED = -1
"""The entry argument of an attempt by a waiter its client knows is queued."""
PLACE = -3
"""The entry argument of a queued waiter's first attempt once subscribed: it reads its
place (the head, or `BEHIND`) without joining or checking re-entry."""
BEHIND = -2
"""An attempt's reply for a waiter behind the head: wait until woken."""

GRANTED_WITH_WAITERS = (b"W", "W")
"""An acquire script's grant, to a caller with a lease_time, while waiters remain."""
WOKE = 2
"""A release script's reply: the lock was freed and the queue's head woken."""

NOTHING, HELD, FREE = 0, 1, 2
"""What ``fair_turn.lua`` saw: no one waits; the lock held; the lock free, its head woken."""

ALIVE = "tenure_lock_waiters"
"""Prefix of the HASH of a FairLock's queued tenure waiters (tenure's addition to Redisson's
layout; Redisson never reads it): owner -> server epoch ms until which it counts as alive."""


def alive_key(key: str) -> str:
    """The alive-until HASH of fair lock ``key``: ``tenure_lock_waiters:{key}`` (the lock's
    hash tag: the same cluster slot as its other keys)."""
    return keys.prefix_name(ALIVE, key)


GIVE_UP_PAUSE = (0.05, 0.25)
"""Seconds from the start of one background attempt to leave the queue to the start of the
next while the server does not answer: the first, and the longest once it has doubled (an
attempt that failed fast, connection refused, waits that long; one that hung does not)."""
TURN_SLACK = 0.02
"""Seconds the turn watcher waits beyond the grace, so the server's clock has passed it."""
FIRST_LOOK = 0.05
"""Seconds after this client's last release of a lock at which its turn watcher first looks:
a head still not come by then may have missed its wake-up (published while it subscribed); it
is woken again. Releases closer together than this cost no look at all."""
TURN_STALE = 1.0
"""Seconds past its planned wake-up after which a turn watcher counts as gone (its flow
dropped before it ran, or its event loop closed) or stuck in a call: the next plan starts
another, and the old one ends when it wakes."""


class TurnWatch:
    """The turn watcher of one fair lock of one client (`FairLockCore.watch_turn()`),
    shared by all the client's objects of that lock: ``with client.fair_lock(name):`` makes
    a new object per acquisition, and its release must move the pending look as a reused
    object's does (else each object looks on its own: 1-2 looks per acquisition)."""

    __slots__ = ("plans", "turn_at", "wake_at", "watcher")

    def __init__(self) -> None:
        self.turn_at = 0.0
        """Monotonic time of the planned look."""
        self.wake_at = 0.0
        """Monotonic time the running watcher wakes (and reads the plan) at the latest."""
        self.plans = 0
        """Plans made so far: a new one while a look is on its way (the lock changed hands)
        voids that look's outcome."""
        self.watcher = 0
        """The number of the running watcher; an older one ends when it sees another."""


class TurnWatches:
    """One client's running turn watchers, by fair lock key. A watcher takes its entry off
    when it ends (no one waits), so the table holds only the locks being watched."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        """The client identity the table belongs to: a forked child (a new identity) starts
        a table of its own, as its parent's watchers do not run there."""
        self.mutex = threading.Lock()
        self.by_key: dict[str, TurnWatch] = {}
        self.started = 0
        """Watchers started: each gets the next number."""


_turn_watches: weakref.WeakKeyDictionary[Context, TurnWatches] = weakref.WeakKeyDictionary()
"""Each client's turn watchers. Kept here rather than on the Context: only the fair lock
uses them, and a client gone takes its table along."""
_turn_watches_mutex = threading.Lock()


def turn_watches(ctx: Context) -> TurnWatches:
    """The turn watchers of the client of ``ctx`` (a new table after a fork)."""
    with _turn_watches_mutex:
        table = _turn_watches.get(ctx)
        if table is None or table.identity is not ctx.identity:
            table = _turn_watches[ctx] = TurnWatches(ctx.identity)
        return table


class FairLockCore(LockCore):
    """One named fair lock of one client: `LockCore` with a FIFO queue of waiters."""

    acquire_script = scripts.get("fair_acquire")
    release_script = scripts.get("fair_release")
    force_release_script = scripts.get("fair_force_release")
    give_up_script = scripts.get("fair_give_up")
    turn_script = scripts.get("fair_turn")
    # Holds renew and extend as a Lock's: the waiters' entries do not depend on the lease.

    def __init__(self, ctx: Context, name: str, on_lost: LossCallback | None = None) -> None:
        super().__init__(ctx, name, on_lost)
        self.queue_key = keys.fair_queue_key(self.key)
        self.timeout_key = keys.fair_timeout_key(self.key)
        self.alive_key = alive_key(self.key)
        self._waiter_keys = [self.key, self.queue_key, self.timeout_key, self.alive_key]
        # Channels are not keys: the scripts build a waiter's channel from this prefix.
        self.waiter_prefix = keys.fair_waiter_channel_prefix(self.key)
        self._mutex = threading.Lock()
        self._queued: set[str] = set()
        """Owners that may be queued on the server."""
        self._giving_up: dict[str, Flow[None] | None] = {}
        """Owners whose give-up began (taken out of ``_queued``) and was neither answered
        nor handed to the background (then its background flow): a clean-up run again
        after a signal handler raised in it (between bytecodes: as the owner was taken
        out, say) gives up all the same."""
        self._joined: set[str] = set()
        """Owners an attempt found queued: their next attempts check only their turn."""
        self._looked: set[str] = set()
        """Owners that joined behind the head and have read their place once more since."""
        self._turns: TurnWatches | None = None
        """The client's turn watchers (`turn_watches()`), once this object needed them."""
        self._woke: set[str] = set()
        """Owners whose release (in flight) freed the lock and woke a queue head."""

    def acquire(
        self, owner: str, blocking: object, timeout: object, lease_time: object
    ) -> Flow[bool]:
        # Arguments are checked now (LockCore.acquire), before the flow runs.
        return self._leaving(owner, super().acquire(owner, blocking, timeout, lease_time))

    def _leaving(self, owner: str, flow: Flow[bool]) -> Flow[bool]:
        """Run an acquire ``flow``; if it raised with its owner still queued (a second
        interrupt cut its clean-up short before the give-up: on the Unsubscribe), leave the
        queue in the background: the entry would hold the queue up until it runs out."""
        try:
            return (yield from flow)
        except GeneratorExit:
            raise
        except BaseException:
            if self._dequeued(owner, leaving=True):  # queued, or its give-up cut short
                later = self._giving_up.get(owner) or self._later(owner, time.monotonic())
                yield Background(later)
                self._giving_up.pop(owner, None)
            raise

    def entry_ms(self) -> int:
        """How long a queued waiter counts as alive without a refresh: ``watchdog_timeout``
        (three renewal passes)."""
        return self.lease_ms(None)

    def wait_channel(self, owner: str) -> str:
        return keys.fair_waiter_channel(self.key, owner)

    def renewal_channel(self) -> str:
        # Waiters listen on their own channels: the head re-checks at the lease end itself.
        return ""

    def waiter_keys(self) -> list[str]:
        # Built once: every script call sends it, and none changes it.
        return self._waiter_keys

    def attempt(
        self, owner: str, lease: float | None, wait: float, again: bool = False
    ) -> Flow[int | None]:
        entry = 0
        hold = self.ctx.holds.get(self.key, self.field(owner))
        if wait > 0 and hold is None:  # one attempt (wait 0) or a re-entry never joins
            with self._mutex:
                new = owner not in self._queued
                self._queued.add(owner)
                self._giving_up.pop(owner, None)  # queued anew: its entry is its own
                if owner in self._joined:
                    entry = QUEUED
                elif owner in self._looked:
                    entry = PLACE
                else:
                    entry = self.entry_ms()
            if new:
                self.ctx.holds.waiters.add(self, owner)
                yield WATCH_HOLDS  # the keeper's pass keeps the entry alive
        # Built as acquire_call() sends it (its `changes` and `until`): no copy on the way.
        args: list[Any] = [
            self.lease_ms(lease),
            owner,
            entry,
            grace_ms(self.ctx),
            self.waiter_prefix,
            self.unlock_message,
            0 if lease is None else 1,
        ]
        if hold is not None:
            args.append(1)  # a re-entry: granted only on top of the hold the server has
        call = Call(
            self.acquire_script,
            self._waiter_keys,
            args,
            changes=self._is_grant,
            until=self._until.get(owner),
        )
        reply = yield from self.acquire_call(owner, call, lease)
        if not self.is_grant(reply):
            if reply in REENTRY_LOST:
                self.reentry_lost(owner, hold)
            if entry != 0:
                with self._mutex:
                    if owner not in self._queued:
                        pass
                    elif entry > 0 and int(reply) == BEHIND:
                        # Joined behind the head: its attempt once subscribed reads its place
                        # again, as it may have become the head meanwhile, its wake-up sent
                        # before it listened (a Java client's unlock, which no turn watcher
                        # follows). Then only its turn is checked.
                        self._looked.add(owner)
                    else:
                        self._joined.add(owner)
            return int(reply)
        self._dequeued(owner)
        self.granted(owner, lease)
        if lease is not None and reply is not None:
            # Waiters remain and the lease may run out with no release; the head is not told
            # it is the head: look then.
            yield from self.watch_turn(lease + TURN_SLACK)
        return None

    def is_grant(self, reply: Any) -> bool:
        return reply is None or reply in GRANTED_WITH_WAITERS

    def send_release(
        self, owner: str, lease: float | None, recorded: int | None = None
    ) -> Flow[Any]:
        # 2: freed and the head woken; the release flow watches its turn
        try:
            reply = yield from super().send_release(owner, lease, recorded)
        except ReplicationError as error:
            if isinstance(error.reply, int) and error.reply == WOKE:
                error.reply = 1
                self._woke_head(owner)
            raise
        if reply is not None and int(reply) == WOKE:
            self._woke_head(owner)
            return 1
        return reply

    def _woke_head(self, owner: str) -> None:
        with self._mutex:
            self._woke.add(owner)

    def _dequeued(self, owner: str, leaving: bool = False) -> bool:
        """Forget that ``owner`` may be queued; True if it may have been. ``leaving``: for
        its give-up, which is recorded in ``_giving_up`` (before the owner leaves
        ``_queued``: a handler may raise after any call here), and True again while that
        give-up is recorded (a clean-up run again after an interrupt)."""
        with self._mutex:
            self._joined.discard(owner)
            self._looked.discard(owner)
            if owner in self._queued:
                if leaving:
                    self._giving_up.setdefault(owner, None)
                self._queued.discard(owner)
            elif not (leaving and owner in self._giving_up):
                return False
        self.ctx.holds.waiters.remove(self, owner)
        return True

    def entry_gone(self, owner: str) -> None:
        """The renewal pass found ``owner``'s entry gone (dropped as dead while its client
        was away): its next attempt joins again."""
        with self._mutex:
            self._joined.discard(owner)
            self._looked.discard(owner)

    def give_up(self, owner: str) -> Flow[None]:
        """Leave the queue (if queued). When the give-up fails or is interrupted (the
        server does not answer, or the caller is cancelled or a signal handler raises while
        it is on its way: a second interrupt in an acquire's clean-up), the entry would hold
        the queue up until it runs out: it is left in the background, and the caller gets
        its exception.

        Idempotent, for a clean-up run again from the top after an interrupt: from the
        owner's removal from ``_queued`` until the give-up was answered or handed to the
        background, a handler raising anywhere (before it was sent, or as the background
        flow was being started) leaves the owner in ``_giving_up``, and the next run
        leaves in the background: the same flow yielded again (the runner starts a flow
        once), or a new one that tries at once. Not the call again in the caller's thread:
        after a second interrupt the clean-up does no more blocking I/O than it must."""
        again = owner in self._giving_up  # a give-up begun before and cut short
        if not self._dequeued(owner, leaving=True):
            return
        later = self._giving_up.get(owner)
        if later is None and again:
            # A start one pause back: its first attempt goes at once.
            start = time.monotonic() - GIVE_UP_PAUSE[0]
            later = self._giving_up[owner] = self._later(owner, start)
        if later is None:
            sent = time.monotonic()
            try:
                yield self.give_up_call(owner)
            except (LockKindError, ServerError):  # the server answered
                self._giving_up.pop(owner, None)
                raise
            except GeneratorExit:
                raise
            except BaseException:
                later = self._giving_up[owner] = self._later(owner, sent)
                yield Background(later)
                self._giving_up.pop(owner, None)
                raise
        else:
            yield Background(later)
        self._giving_up.pop(owner, None)

    def _later(self, owner: str, sent: float) -> Flow[None]:
        """The background flow that leaves the queue after a give-up sent at ``sent``
        failed or was interrupted: `_give_up_later()` until the entry surely ran out."""
        return self._give_up_later(owner, sent + self.entry_ms() / 1000, sent)

    def reconcile(self, owner: str, release: bool = False, sent: bool = True) -> Flow[None]:
        """After an acquire whose outcome is unknown (its reply lost: timeout, cancellation,
        interrupt): undo the holds as `LockCore.reconcile()` does, then leave the queue
        again. The lost acquire script may reach the server after this flow's give-up (it
        went on another connection, not ordered with it) and queue the owner anew, an entry
        nobody waits on; once the server has answered (the holds' reconcile settled), a
        give-up sent now comes after it. Skipped when the owner queued again meanwhile (its
        new entry is its own)."""
        pending = (self.key, self.field(owner))
        yield from super().reconcile(owner, release, sent)
        with self._mutex:
            woke = owner in self._woke  # a release finished there freed it, woke the head
            self._woke.discard(owner)
        if woke:  # as `release()` does
            yield from self.watch_turn(FIRST_LOOK)
        with self._mutex:
            if release or owner in self._queued:  # a holder is in no queue
                return
        # Still reconciling: the owner's next acquire waits for the give-up to be sent.
        self.ctx.reconciling.add(pending)
        leaving = time.monotonic()
        try:
            yield self.give_up_call(owner)
        except LockKindError:  # another kind's keys: nothing of ours to leave
            pass
        except BackendError:
            yield Background(self._later(owner, leaving))
        finally:
            self.ctx.reconciling.discard(pending)

    def give_up_call(self, owner: str) -> Call:
        return Call(
            self.give_up_script,
            self.waiter_keys(),
            [owner, grace_ms(self.ctx), self.waiter_prefix, self.unlock_message],
            changes=True,
        )

    def _give_up_later(self, owner: str, until: float, sent: float) -> Flow[None]:
        """Retry leaving the queue while the server does not answer, until the entry has
        surely run out (others then drop it), or until the same owner queues again (its new
        entry is its own). ``sent``: when the attempt that failed was sent.

        Attempts start at most every `GIVE_UP_PAUSE` seconds (growing from its first
        to its last value) but never wait beyond that: an attempt that hung until the
        socket timeout (a paused server) is followed by the next at once, so one is always
        on its way when the server answers again and the entry goes within a round trip of
        that (a back-off slept after each timeout left it there up to 1.5 s)."""
        pause = GIVE_UP_PAUSE[0]
        while time.monotonic() < until:
            wait = sent + pause - time.monotonic()
            pause = min(2 * pause, GIVE_UP_PAUSE[1])
            if wait > 0:
                yield Sleep(wait)
            with self._mutex:
                if owner in self._queued:
                    return
            sent = time.monotonic()
            try:
                yield self.give_up_call(owner)
                return
            except ClientClosedError:  # it sends nothing more: the entry runs out
                raise
            except BackendError:
                continue
        log.warning("fair lock %r: could not leave the queue for %s", self.name, owner)

    def release_call(self, owner: str, lease: float | None) -> Call:
        return Call(
            self.release_script,
            self.waiter_keys(),
            [self.unlock_message, self.lease_ms(lease), self.field(owner), self.waiter_prefix],
            changes=True,
        )

    def force_release_call(self) -> Call:
        return Call(
            self.force_release_script,
            self.waiter_keys(),
            [self.unlock_message, self.waiter_prefix, grace_ms(self.ctx)],
            changes=True,
        )

    # ------------------------------------------------------------ the head's turn
    has_after_release = True

    def after_release(self, owner: str) -> Flow[None] | None:
        # A release that failed or was cut short after its script woke the head leaves the
        # mark to the reconcile that finishes it (`reconcile()` watches the turn then).
        with self._mutex:
            woke = owner in self._woke
            self._woke.discard(owner)
        return self.watch_turn(FIRST_LOOK) if woke else None  # a head's turn came

    def force_release(self) -> Flow[bool]:
        held = yield from super().force_release()
        yield from self.watch_turn(FIRST_LOOK)
        return held

    def watch_turn(self, delay: float) -> Flow[None]:
        """Look at the queue's head in ``delay`` seconds (one background watcher per client
        and lock, `TurnWatch`: each call replaces the plan, as the lock changed hands).

        After a release (`FIRST_LOOK`): a head that has not come is woken again and
        its turn starts; the watcher looks again after growing pauses (it expects the head
        to take the lock) and, once the head's grace has passed, drops it as dead and wakes
        the next. After a grant with a lease: at its end, in case no release comes. While
        the lock is held and someone waits: at the lease's end, so a holder that died is
        replaced when its lease runs out. It stops once no one waits.
        """
        turns = self._turns
        if turns is None or turns.identity is not self.ctx.identity:
            turns = self._turns = turn_watches(self.ctx)
        now = time.monotonic()
        at = now + delay
        with turns.mutex:
            watch = turns.by_key.get(self.key)
            if watch is None:
                watch = turns.by_key[self.key] = TurnWatch()
            watch.turn_at = at
            watch.plans += 1
            if watch.watcher and at >= watch.wake_at and now <= watch.wake_at + TURN_STALE:
                return  # the watcher wakes before then and sees the new plan
            turns.started += 1
            watch.watcher = watcher = turns.started
            watch.wake_at = at  # the new watcher looks then (or earlier, for a newer plan)
        yield Background(self._turn_watcher(turns, watch, watcher))

    def _turn_watcher(self, turns: TurnWatches, watch: TurnWatch, watcher: int) -> Flow[None]:
        pause = FIRST_LOOK
        try:
            while True:
                with turns.mutex:
                    if watch.watcher != watcher:
                        return  # superseded by a watcher that looks earlier
                    delay = watch.turn_at - time.monotonic()
                    plan = watch.plans
                    if delay > 0:
                        watch.wake_at = watch.turn_at
                if delay > 0:
                    yield Sleep(delay)
                    continue
                try:
                    state, ms = (int(x) for x in (yield self.turn_call()))
                except LockKindError:
                    state, ms = NOTHING, 0
                except ClientClosedError:  # it sends nothing more: no look to make
                    raise
                except BackendError:  # look again later; the waiters' passes cover meanwhile
                    state, ms = HELD, grace_ms(self.ctx)
                with turns.mutex:
                    if watch.watcher != watcher:
                        return
                    if watch.plans != plan:  # the lock changed hands meanwhile: that plan
                        pause = FIRST_LOOK
                        continue
                    if state == NOTHING:
                        self._unwatched(turns, watch)
                        return
                    if state == FREE:  # the head was woken: it should take the lock soon
                        pause = min(2 * pause, ms / 1000)
                        wait = pause
                    else:
                        pause, wait = FIRST_LOOK, ms / 1000
                    watch.turn_at = time.monotonic() + wait + TURN_SLACK
        except BaseException:
            with turns.mutex:
                if watch.watcher == watcher:
                    self._unwatched(turns, watch)
            raise

    def _unwatched(self, turns: TurnWatches, watch: TurnWatch) -> None:
        """Take the ending watcher's entry off (its caller holds ``turns.mutex``): the next
        plan starts a watcher anew."""
        if turns.by_key.get(self.key) is watch:
            del turns.by_key[self.key]

    def turn_call(self) -> Call:
        return Call(
            self.turn_script,
            self.waiter_keys(),
            [grace_ms(self.ctx), self.waiter_prefix, self.unlock_message],
            changes=True,
        )
