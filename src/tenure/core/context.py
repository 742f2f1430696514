"""The per-client state the algorithms share: identity, options, the hold table."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from tenure.core.holds import HoldTable, Identity
from tenure.core.listening import Subscriptions

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
        """True once a FencedLock checked the server's persistence (one warning per client)."""
        self.client_name: str | None = None
        """The name this client's owners are registered with (``Client(name=...)``); None:
        ``"<hostname>:<pid>"`` (`tenure.core.watchdog.registration()`)."""
        self.registered = False
        """True while this client's registration was written and not yet deleted."""
        self.reconciling: set[tuple[str, str]] = set()
        """(key, hash field) of each owner whose holds a background reconcile is bringing
        back to the recorded count (`tenure.core.lock.LockCore.reconcile()`)."""

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
        self.subscriptions = Subscriptions()  # the parent's connections are not ours
        self.hears = self.subscriptions.hears
        return True

    def wire_name(self, name: str) -> str:
        """The key a lock named ``name`` uses on the server."""
        return self.name_prefix + name
