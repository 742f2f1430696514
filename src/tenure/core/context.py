"""The per-client state the algorithms share: identity, options, the hold table."""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from tenure.core.holds import HoldTable, Identity
from tenure.core.listening import Subscriptions
from tenure.core.yielding import Yields

log = logging.getLogger("tenure")


def call_now(callback: Callable[[], None], what: str) -> None:
    """Run ``callback`` at once; an error is logged, never raised (it must not hide a loss)."""
    try:
        callback()
    except Exception:
        log.exception("%s failed", what)


_pid = [os.getpid()]
"""This process's pid, as the fork hook below keeps it: `Context.forked()` compares it
instead of asking the system (a system call) on every acquire and release."""


def _forked_child() -> None:
    _pid[0] = os.getpid()


os.register_at_fork(after_in_child=_forked_child)


class WakeChecks:
    """One client's pending back-up looks after targeted unlocks (a look per lock of the
    client, `tenure.core.lock.WAKE_CHECK_GRACE`), and the state of the one background flow
    that makes them (`tenure.core.lock.wake_checks()`). Thread-safe: a release arms a look
    from any thread while that flow takes the due ones from its own.

    A look is kept per lock, not per lock object: its ``look_key`` (kind and key; an
    object without one is its own). ``with client.lock(name):`` makes a new object each
    time, and each release's look must move the pending one later, as a reused object's
    does, not add another (reviewer R3: 1.0 look and twice the scripts per acquisition)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._due: dict[Any, tuple[Any, float]] = {}
        """Look key -> (the lock object last armed for it, the monotonic time its look is
        due, moved later by each arm)."""
        self._awake = -math.inf
        """Monotonic time the flow last took its due looks; -inf: no flow runs."""

    def arm(self, lock: Any, at: float, stale: float) -> bool:
        """Have ``lock``'s look made at monotonic time ``at`` (no earlier); True when the
        caller must start the flow: none runs, or the one running has not woken for
        ``stale`` seconds (stuck in a call, or gone with a closed event loop)."""
        with self._mutex:
            self._due[getattr(lock, "look_key", lock)] = (lock, at)
            now = time.monotonic()
            if now - self._awake <= stale:
                return False
            self._awake = now
            return True

    def take(self, now: float, linger_until: float, step: float) -> tuple[list[Any], float] | None:
        """The flow's turn at monotonic time ``now``: the lock objects whose look is due
        (taken off), and the seconds to sleep before the next turn (up to the first look
        still pending, at most ``step``). None: nothing is pending and ``now`` is past
        ``linger_until``, so the flow ends (the next arm starts one)."""
        with self._mutex:
            ready = [key for key, (_, at) in self._due.items() if at <= now]
            locks = [self._due.pop(key)[0] for key in ready]
            if not locks and not self._due and now >= linger_until:
                self._awake = -math.inf
                return None
            self._awake = now
            first = min((at for _, at in self._due.values()), default=math.inf)
            wake = min(first, now + step)
            return locks, max(0.0, wake - now)

    def put_back(self, locks: list[Any], at: float) -> None:
        """Have the looks of ``locks`` made again (the flow failed before them) by the
        next flow, and let that flow start: this one ends."""
        with self._mutex:
            for lock in locks:
                self._due.setdefault(getattr(lock, "look_key", lock), (lock, at))
            self._awake = -math.inf


class Context:
    """Options and state of one client, shared by all its lock objects.

    After ``os.fork()`` the child gets a new identity and an empty hold table: it owns
    nothing its parent held (`forked()` detects that).
    """

    def __init__(
        self,
        *,
        watchdog_timeout: float,
        name_prefix: str,
        wait_for_replicas: int,
        replica_timeout: float,
    ) -> None:
        self.watchdog_timeout = watchdog_timeout
        self.name_prefix = name_prefix
        self.wait_for_replicas = wait_for_replicas
        self.replica_timeout = replica_timeout
        self.identity = Identity()
        self.holds = HoldTable()
        self.dispatch: Callable[[Callable[[], None], str], None] = call_now
        """How `deliver()` runs a user callback; the runner sets one that runs it away
        from its renewal loop, so a slow callback cannot delay the renewal of other holds."""
        self.subscriptions = Subscriptions()
        """The channel tables of this client's pub/sub connections."""
        self.hears: Callable[[str], bool] = self.subscriptions.hears
        """Whether this client's own pub/sub connection is subscribed to a channel now
        (waited on, or lingering after its waiters left): a release counts how many other
        clients its unlock reached. No I/O."""
        self.persistence_checked = False
        """True once a FencedLock or an Election checked the server's persistence (one
        warning per client)."""
        self.client_name: str | None = None
        """The name this client's owners are registered with (``Client(name=...)``); None:
        ``"<hostname>:<pid>"`` (`tenure.core.watchdog.registration()`)."""
        self.registered = False
        """True while this client's registration was written and not yet deleted."""
        self.reconciling: set[tuple[str, str]] = set()
        """(key, hash field) of each owner whose holds a background reconcile is bringing
        back to the recorded count (`tenure.core.lock.LockCore.reconcile()`)."""
        self.wake_checks = WakeChecks()
        """The back-up looks after this client's targeted unlocks, made by one flow."""
        self.yields = Yields()
        """Per lock key, until when this client's next acquire of it yields to the client its
        last release woke (`tenure.core.yielding`): per client, not per lock object, so that
        ``with client.lock(name):`` (a new object each time) yields as a reused object does."""

    def deliver(self, callback: Callable[[], None], what: str) -> None:
        """Run user ``callback`` (an ``on_lost``) through `dispatch`; ``what`` names it
        in the log if it raises."""
        self.dispatch(callback, what)

    def forked(self) -> bool:
        """True once in a forked child, after giving it a fresh identity and hold table.

        A fork is seen through ``os.register_at_fork()``, whose hooks ``os.fork()`` and
        multiprocessing's fork run (a fork made in C without ``PyOS_AfterFork_Child()``
        is not seen)."""
        if _pid[0] == self.identity.pid:
            return False
        self.identity = Identity()
        self.holds = HoldTable()
        self.reconciling = set()
        self.wake_checks = WakeChecks()  # the parent's flow is not running here
        self.yields = Yields()
        self.subscriptions = Subscriptions()  # the parent's connections are not ours
        self.hears = self.subscriptions.hears
        return True

    def wire_name(self, name: str) -> str:
        """The key a lock named ``name`` uses on the server."""
        return self.name_prefix + name
