"""The fair lock algorithm (Redisson's RFairLock), sans I/O: a reentrant lock granted in
request order.

Wire layout (DESIGN §3): the lock hash as for Lock, a LIST of waiting owners (head first), a
ZSET of each waiter's deadline (server epoch ms) and one channel per waiter. A waiter joins
the queue on its first blocking attempt; the lock goes to the head only. A waiter's deadline
is the deadline of the waiter ahead (for the head: the lock's expiry) plus its allowance (its
``timeout``, 300 s without one); a head that misses its deadline is dropped as dead, so a
crashed waiter delays the queue by at most its allowance once the lock is free. A waiter that
times out, is cancelled or fails leaves the queue and moves the deadlines behind it ahead by
its allowance. Unlock wakes the head only; every change of the head wakes the new head.

Differences from Redisson: every script that moves the lock's expiry (acquire, re-entry,
release, watchdog renewal, force release) moves the deadlines by as much, so they stay
anchored on the lock's real expiry (Redisson anchors them once, so an early release or a
long renewed hold skews them); the scripts use server time, not client clocks.
"""

from __future__ import annotations

import logging
import math
import threading
import time

from tenure import keys, scripts
from tenure.core.args import MAX_SECONDS, to_ms
from tenure.core.context import Context
from tenure.core.effects import Background, Call, Flow, Sleep
from tenure.core.lock import RECONCILE_PAUSE, LockCore, LossCallback
from tenure.errors import BackendError

log = logging.getLogger("tenure")


class FairLockCore(LockCore):
    """One named fair lock of one client: :class:`LockCore` with a FIFO queue of waiters."""

    acquire_script = scripts.get("fair_acquire")
    release_script = scripts.get("fair_release")
    force_release_script = scripts.get("fair_force_release")
    renewal_script = scripts.get("fair_renew")
    give_up_script = scripts.get("fair_give_up")
    extend_script = scripts.get("fair_extend")

    def __init__(self, ctx: Context, name: str, on_lost: LossCallback | None = None) -> None:
        super().__init__(ctx, name, on_lost)
        self.queue_key = keys.fair_queue_key(self.key)
        self.timeout_key = keys.fair_timeout_key(self.key)
        # Channels are not keys: the scripts build a waiter's channel from this prefix.
        self.waiter_prefix = keys.fair_waiter_channel_prefix(self.key)
        self._mutex = threading.Lock()
        self._queued: dict[str, int] = {}
        """Owner -> allowance ms of owners that may be queued on the server."""

    @staticmethod
    def allowance_ms(wait: float) -> int:
        """A waiter's allowance: its whole wait, or 300 s when it waits forever."""
        return to_ms(min(wait, MAX_SECONDS) if math.isfinite(wait) else keys.FAIR_DEFAULT_ALLOWANCE)

    def wait_channel(self, owner: str) -> str:
        return keys.fair_waiter_channel(self.key, owner)

    def renewal_keys(self, owner: str, holds: int) -> list[str]:
        # fair_renew.lua moves the waiters' deadlines with the lease: it needs the ZSET too.
        return [self.key, self.timeout_key]

    def attempt(self, owner: str, lease: float | None, wait: float) -> Flow[int | None]:
        allowance = 0
        if wait > 0:  # one attempt (wait 0) never joins the queue
            allowance = self.allowance_ms(wait)
            with self._mutex:
                self._queued[owner] = allowance
        call = Call(
            self.acquire_script,
            [self.key, self.queue_key, self.timeout_key],
            [self.lease_ms(lease), owner, allowance, self.waiter_prefix, self.unlock_message],
            changes=True,
        )
        reply = yield from self.acquire_call(owner, call, lease)
        if reply is not None:
            return int(reply)
        with self._mutex:
            self._queued.pop(owner, None)
        self.granted(owner, lease)
        return None

    def give_up(self, owner: str) -> Flow[None]:
        """Leave the queue (if queued), moving the deadlines behind ahead."""
        with self._mutex:
            allowance = self._queued.pop(owner, None)
        if allowance is None:
            return
        try:
            yield self.give_up_call(owner, allowance)
        except BackendError:
            # The entry would block the queue until its deadline: retry in the background.
            until = time.monotonic() + allowance / 1000 + self.ctx.watchdog_timeout
            yield Background(self._give_up_later(owner, allowance, until))
            raise

    def give_up_call(self, owner: str, allowance: int) -> Call:
        return Call(
            self.give_up_script,
            [self.key, self.queue_key, self.timeout_key],
            [owner, allowance, self.waiter_prefix, self.unlock_message],
            changes=True,
        )

    def _give_up_later(self, owner: str, allowance: int, until: float) -> Flow[None]:
        """Retry leaving the queue while the server does not answer, until the entry's
        deadline has surely passed (other waiters then drop it themselves), or until the
        same owner queues again (its new entry is its own)."""
        pause = RECONCILE_PAUSE[0]
        while time.monotonic() < until:
            yield Sleep(pause)
            pause = min(2 * pause, RECONCILE_PAUSE[1])
            with self._mutex:
                if owner in self._queued:
                    return
            try:
                yield self.give_up_call(owner, allowance)
                return
            except BackendError:
                continue
        log.warning("fair lock %r: could not leave the queue for %s", self.name, owner)

    def release_call(self, owner: str, lease: float | None) -> Call:
        return Call(
            self.release_script,
            [self.key, self.queue_key, self.timeout_key],
            [self.unlock_message, self.lease_ms(lease), self.field(owner), self.waiter_prefix],
            changes=True,
        )

    def extend_call(self, owner: str, add_ms: int) -> Call:
        # fair_extend.lua moves the waiters' deadlines with the lease: it needs the ZSET too.
        return Call(
            self.extend_script,
            [self.key, self.timeout_key],
            [self.field(owner), add_ms, to_ms(MAX_SECONDS)],
            changes=True,
        )

    def force_release_call(self) -> Call:
        return Call(
            self.force_release_script,
            [self.key, self.queue_key, self.timeout_key],
            [self.unlock_message, self.waiter_prefix],
            changes=True,
        )
