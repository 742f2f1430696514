"""A releaser's yield: how long a client whose unlock woke another client waits before its own
next attempt at that lock (docs/internals.md, "Release"), adapted to what its last yield met.

A Lock is not fair, but its releaser does not barge: the client it woke would else find the
lock taken again, and be woken and refused for nothing. Its next acquire of that lock waits
up to the yield for an unlock of its own (its turn), then tries. The right length is the
lock's turn: how long the other clients' holds take before the releaser's comes round.

- Too short, under contention: the yield ends before the turn, and the attempt that follows
  is refused (the lock is held by the next client), then the waiter sleeps to its turn. With
  8 processes on one lock and a 3 ms yield: 17.4 server commands and a third script per
  acquisition, against 13.0 and two when the yield covers the turn (docs/benchmarks.md).
- Too long, with idle clients: the client woken may have no waiter left (it passes the
  wake-up on only when it next reads its socket, docs/wire.md), and the lock stays free until
  the yield ends. With 8 processes resting up to 10 ms between holds, a fixed 20 ms yield
  made 975 acquisitions/s against 1,164-1,221 with 3 ms.

So each yield that ends on its timer tells the next one: an attempt refused (the lock was
held: the turn is longer) doubles the length, up to `YIELD_LONGEST`; an attempt granted
(the lock was free: the yield kept it idle) halves it, down to `YIELD_GRACE`. A yield ended
by an unlock (the turn came) keeps it. Kept per client and lock name.

A yield that found the lock free says the client woken is not taking it: paused (SIGSTOP, a
blocked event loop, yet still listening, so every unlock goes to it again), or nobody at all
(a listener of the lock's channel that never acquires). The next waking releases then do not
yield, 1, 3, 7 ... up to `SKIPS_MOST` of them after 1, 2, 3 ... such yields in a row, and
the next yield probes again; any yield that meets the client woken (refused, or ended by an
unlock) ends the streak. (Reviewer R5: a releaser looping alone beside a paused waiter made
384-401 acquisitions/s, each waiting its whole yield, against 25,149 with the waiter gone.)
A client woken that takes the lock within the yield loses at most that many attempts to
the releaser in a row. One slower to wake than the yield (a busy event loop, a loaded
machine) may lose more: a Lock is not fair (reviewer R6: waits of 0.1-2.3 s beside a
releaser looping at once, as before the yield adapted); a FairLock is.
"""

from __future__ import annotations

YIELD_GRACE = 0.003
"""Seconds: the shortest yield, and the first one. A woken client takes the lock within
about a millisecond here; 3 ms covers its wake-up on a loaded machine."""
YIELD_LONGEST = 0.024
"""Seconds: the longest yield, the turn of about 30 processes on one lock on a 2-core
machine. It bounds how long the lock may stay free when the client woken went idle
(the back-up look, core/lock.py WAKE_CHECK_GRACE, comes later still)."""
YIELDS_KEPT = 256
"""Lock names above which a release first forgets those whose yield ended over
`FORGET_AFTER` ago; the next such look comes once the names left have doubled, so that a
client waking thousands of locks a second pays it once per so many releases, not on each
(reviewer R6: 250 µs per release at 5,000 names)."""
SKIPS_MOST = 63
"""The most waking releases in a row that do not yield after yields that found the lock free."""
FORGET_AFTER = 1.0
"""Seconds after a yield's end when its lock name may be forgotten (its length with it: a lock
not contended for a second has no turn to go by)."""


class Yields:
    """One client's yields, per lock key: when its last release woke another client, the
    length its next yield will have, and the waking releases left that do not yield. Shared
    by the client's threads or tasks; a race between two of them only moves a length or a
    count one step."""

    def __init__(self) -> None:
        self._released: dict[str, float] = {}
        self._length: dict[str, float] = {}
        self._free: dict[str, int] = {}  # yields in a row that found the lock free
        self._skips: dict[str, int] = {}  # waking releases left that do not yield
        self._forget_at = YIELDS_KEPT  # names at which the next release forgets old ones

    def start(self, key: str, now: float) -> None:
        """A release of ``key`` at monotonic ``now`` woke another client: yield from now
        (unless the client woken has not been taking the lock: see the module)."""
        released = self._released
        if len(released) >= self._forget_at:
            old = now - FORGET_AFTER
            for name, at in list(released.items()):  # a copy: other threads change it
                if at < old:
                    for table in (released, self._length, self._free, self._skips):
                        table.pop(name, None)
            self._forget_at = max(YIELDS_KEPT, 2 * len(released))
        skips = self._skips.get(key, 0)
        if skips > 0:
            self._skips[key] = skips - 1
            released[key] = now - YIELD_GRACE  # no yield
            return
        released[key] = now

    def left(self, key: str, now: float) -> float:
        """Seconds left of the yield on ``key`` at ``now`` (≤ 0: none). Only an acquire
        within `YIELD_GRACE` of the release yields (a client taking the lock again at once,
        whose turn the adapted length covers); one that comes later tries as any other."""
        at = self._released.get(key)
        if at is None or now - at >= YIELD_GRACE:
            return 0.0
        return at + self._length.get(key, YIELD_GRACE) - now

    def take(self, key: str, now: float) -> None:
        """An acquire of ``key`` yields from ``now``: the next one does not (unless a release
        starts another yield)."""
        self._released[key] = now - YIELD_GRACE

    def ended(self, key: str, held: bool, woken: bool = False) -> None:
        """A yield on ``key`` ended, ``woken`` by an unlock or on its timer, and the attempt
        after it found the lock ``held`` (refused) or free (granted): set the next one."""
        if woken or held:
            self._free.pop(key, None)
            self._skips.pop(key, None)
            if woken:
                return
        length = self._length.get(key, YIELD_GRACE)
        if held:
            self._length[key] = min(length * 2, YIELD_LONGEST)
            return
        if length > YIELD_GRACE:
            self._length[key] = max(length / 2, YIELD_GRACE)
        free = self._free.get(key, 0) + 1
        self._free[key] = free
        self._skips[key] = min(2**free - 1, SKIPS_MOST)
