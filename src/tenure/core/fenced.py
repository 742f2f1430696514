"""FencedLock: a reentrant lock whose every acquisition draws a fencing token, sans I/O.

A lock with a lease cannot by itself protect a resource from a holder that was paused (GC,
SIGSTOP, swapping, a slow network) past its lease: when it resumes it still believes it holds
the lock. Fencing (Kleppmann, "How to do distributed locking", 2016) fixes this at the
resource: each acquisition gets a number that strictly increases per lock name, the holder
sends it with every write, and the resource refuses writes carrying a number lower than one it
has already seen. Redisson's ``RFencedLock`` draws the token with INCR inside the acquire
script, and so does tenure (key ``redisson_lock_token:{<name>}``, docs/wire.md).
"""

from __future__ import annotations

import logging
import os
from typing import Any, ClassVar

from tenure import keys, scripts
from tenure.core.context import Context
from tenure.core.effects import Call, Command, Flow
from tenure.core.lock import LockCore
from tenure.errors import BackendError, ServerError

log = logging.getLogger("tenure")

REENTRY_LOST = -1
"""fenced_acquire.lua's first reply element for a re-entry that found no hold of the caller:
its earlier hold was lost, and nothing was granted nor drawn."""

ACCEPT_NO_PERSISTENCE = "TENURE_ACCEPT_NO_PERSISTENCE"
"""Environment variable: set to ``1`` once you know the server persists nothing (a test or
demo server, say), and the persistence warning of fenced locks and elections is logged at
DEBUG instead."""


def check_persistence_once(ctx: Context, what: str, numbers: str) -> Flow[None]:
    """The client's one persistence check (`check_persistence()`), made by its first fenced
    acquire or election campaign, whichever comes first (they look at
    ``ctx.persistence_checked`` before calling)."""
    ctx.persistence_checked = True
    yield from check_persistence(what, numbers)


def check_persistence(what: str, numbers: str) -> Flow[None]:
    """Log a WARNING when the server persists nothing (no RDB save points, AOF off): a
    restart then starts the counter of ``numbers`` (fencing tokens, election terms) over,
    and they go backwards. ``what`` names the object in the message. A server that
    refuses INFO or CONFIG GET (ACL) is not checked."""
    try:
        info = yield Command(("INFO", "persistence"))
        save = yield Command(("CONFIG", "GET", "save"))
    except (BackendError, ServerError) as error:  # an ACL may refuse INFO or CONFIG
        log.debug("%s: persistence not checked: %s", what, error)
        return
    aof = "aof_enabled:1" in _text(info)
    if isinstance(save, dict):
        points = "".join(_text(v) for v in save.values())
    else:
        points = "".join(_text(v) for v in list(save or [])[1::2])
    if not aof and not points.strip():
        accepted = os.environ.get(ACCEPT_NO_PERSISTENCE, "") not in ("", "0")
        log.log(
            logging.DEBUG if accepted else logging.WARNING,
            "%s: the server persists nothing (no RDB save points, AOF off): after a restart "
            "its %s start over and go backwards, so a resource that compares them would "
            "accept stale writers (set %s=1 to acknowledge and log this at DEBUG)",
            what,
            numbers,
            ACCEPT_NO_PERSISTENCE,
        )


class FencedLockCore(LockCore):
    """`LockCore` whose acquire script also increments the lock's token counter."""

    acquire_script: ClassVar[scripts.Script] = scripts.get("fenced_acquire")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.token_key = keys.token_key(self.key)
        self._tokens: dict[str, int] = {}

    def attempt(
        self, owner: str, lease: float | None, wait: float, again: bool = False
    ) -> Flow[int | None]:
        args: list[Any] = [self.lease_ms(lease), owner]
        hold = self.ctx.holds.get(self.key, self.field(owner))
        if hold is not None:
            args.append(1)  # a re-entry: granted only on top of the hold the server has
        call = Call(self.acquire_script, [self.key, self.token_key], args, changes=True)
        granted, value = yield from self.acquire_call(owner, call, lease)
        if int(granted) != 1:
            if int(granted) == REENTRY_LOST:
                self.reentry_lost(owner, hold)
            return int(value)
        self.granted(owner, lease)
        self._tokens[owner] = int(value)
        return None

    def per_owner(self) -> list[dict[str, Any] | set[str]]:
        return [*super().per_owner(), self._tokens]

    def acquire(
        self, owner: str, blocking: object, timeout: object, lease_time: object
    ) -> Flow[bool]:
        acquiring = super().acquire(owner, blocking, timeout, lease_time)  # checks now
        return self._checked_first(acquiring)

    def _checked_first(self, acquiring: Flow[bool]) -> Flow[bool]:
        if not self.ctx.persistence_checked:
            what = f"fenced lock {self.name!r}"
            yield from check_persistence_once(self.ctx, what, "fencing tokens")
        return (yield from acquiring)

    def is_grant(self, reply: Any) -> bool:
        return reply is not None and int(reply[0]) == 1

    def acquire_token(
        self, owner: str, blocking: object, timeout: object, lease_time: object
    ) -> Flow[int | None]:
        """`acquire()`, then the new token (None when the wait ran out)."""
        acquiring = self.acquire(owner, blocking, timeout, lease_time)  # checks arguments now
        return self._token_after(owner, acquiring)

    def _token_after(self, owner: str, acquiring: Flow[bool]) -> Flow[int | None]:
        if not (yield from acquiring):
            return None
        return self._tokens.get(owner)

    def token(self, owner: str) -> int | None:
        """The token of ``owner``'s latest acquisition, None if it never acquired."""
        return self._tokens.get(owner)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
