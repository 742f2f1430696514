"""SpinLock (Redisson's ``RSpinLock``), sans I/O: the reentrant lock without pub/sub.

The hash, owner field, lease and watchdog are the Lock's (``lock_acquire.lua``); what differs
is the waiting. A refused waiter subscribes to nothing: it sleeps on an exponential back-off
and tries again, as Redisson's default ``LockOptions.ExponentialBackOff`` does — 1 ms first,
each pause twice the last plus a random 0..n-1 ms after the n-th refusal, capped at 128 ms
(`BackOff`). A release and a forced release publish nothing (nobody listens), and the
watchdog's renewal tells no channel. For deployments where pub/sub is unwanted (a large
cluster, where every PUBLISH reaches every node, or an ACL without channels).

A Lock or FencedLock waiter on the same name still waits for an unlock message, which a spin
lock's release does not send: it takes the lock at the spin holder's lease end, or earlier
on another unlock. Use one kind per name.
"""

from __future__ import annotations

import random
from typing import ClassVar

from tenure import scripts
from tenure.core.effects import WATCH_HOLDS, Call, Deadline, Flow, Sleep
from tenure.core.lock import LockCore

INITIAL_DELAY = 0.001
"""Seconds of the first pause after a refusal (Redisson's default, 1 ms)."""
MAX_DELAY = 0.128
"""Seconds of the longest pause (Redisson's default, 128 ms)."""
MULTIPLIER = 2
"""Each pause is this many times the last, plus the jitter (Redisson's default)."""


class BackOff:
    """The pauses between one waiter's attempts, in seconds (Redisson's exponential
    back-off with its defaults): 1 ms, then ``pause * 2 + randint(0, n - 1)`` ms after the
    n-th refusal, at most 128 ms. The jitter grows with the refusals, so waiters that
    started together drift apart."""

    __slots__ = ("_fails", "_next_ms", "_rng")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._next_ms = round(INITIAL_DELAY * 1000)
        self._fails = 0
        self._rng = rng or random

    def next(self) -> float:
        """The next pause, in seconds."""
        cap = round(MAX_DELAY * 1000)
        pause = self._next_ms
        if pause < cap:
            self._fails += 1
            grown = pause * MULTIPLIER + self._rng.randrange(self._fails)
            self._next_ms = min(cap, grown)
        return pause / 1000


class SpinLockCore(LockCore):
    """`LockCore` whose waiters retry on `BackOff` instead of a channel."""

    release_script: ClassVar[scripts.Script] = scripts.get("spin_release")
    force_release_script: ClassVar[scripts.Script] = scripts.get("spin_force_release")

    def _acquire(self, owner: str, wait: float, lease: float | None) -> Flow[bool]:
        deadline = Deadline(wait)
        backoff = BackOff()
        # until: a script that surely did not reach a server is sent again within the wait
        ttl = yield from self.try_once(owner, lease, wait, until=deadline.end)
        while ttl is not None:
            left = deadline.remaining()
            if left <= 0:
                return False
            yield Sleep(min(backoff.next(), left))
            # again: the first attempt checked the kind and re-entry; a retry is one PTTL
            ttl = yield from self.try_once(owner, lease, wait, again=True, until=deadline.end)
        yield WATCH_HOLDS
        return True

    def renewal_channel(self) -> str:
        """'' (no channel): nobody waits on a channel for a spin lock."""
        return ""

    def release_call(self, owner: str, lease: float | None) -> Call:
        """Reply: nil = not held, 0 = holds remain, 1 = the caller's last hold is gone."""
        return Call(
            self.release_script,
            [self.key],
            [self.lease_ms(lease), self.field(owner)],
            changes=True,
        )

    def force_release_call(self) -> Call:
        """Reply: 1 if it was held, else 0."""
        return Call(self.force_release_script, [self.key], [], changes=True)
