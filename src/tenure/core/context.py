"""The per-client state the algorithms share: identity, options, the hold table."""

from __future__ import annotations

import os

from tenure.core.holds import HoldTable, Identity


class Context:
    """Options and state of one client, shared by all its lock objects.

    After ``os.fork()`` the child gets a new identity and an empty hold table: it owns
    nothing its parent held (:meth:`forked` detects that).
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
        self.persistence_checked = False
        """True once a FencedLock checked the server's persistence (one warning per client)."""

    def forked(self) -> bool:
        """True once in a forked child, after giving it a fresh identity and hold table."""
        if os.getpid() == self.identity.pid:
            return False
        self.identity = Identity()
        self.holds = HoldTable()
        return True

    def wire_name(self, name: str) -> str:
        """The key a lock named ``name`` uses on the server."""
        return self.name_prefix + name
