"""FencedLock: a reentrant lock whose every acquisition draws a fencing token, sans I/O.

A lock with a lease cannot by itself protect a resource from a holder that was paused (GC,
SIGSTOP, swapping, a slow network) past its lease: when it resumes it still believes it holds
the lock. Fencing (Kleppmann, "How to do distributed locking", 2016) fixes this at the
resource: each acquisition gets a number that strictly increases per lock name, the holder
sends it with every write, and the resource refuses writes carrying a number lower than one it
has already seen. Redisson's ``RFencedLock`` draws the token with INCR inside the acquire
script, and so does tenure (key ``redisson_lock_token:{<name>}``, DESIGN §3).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tenure import keys, scripts
from tenure.core.effects import Call, Flow
from tenure.core.lock import LockCore


class FencedLockCore(LockCore):
    """:class:`LockCore` whose acquire script also increments the lock's token counter."""

    acquire_script: ClassVar[scripts.Script] = scripts.get("fenced_acquire")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.token_key = keys.token_key(self.key)
        self._tokens: dict[str, int] = {}

    def attempt(self, owner: str, lease: float | None, wait: float) -> Flow[int | None]:
        call = Call(
            self.acquire_script,
            [self.key, self.token_key],
            [self.lease_ms(lease), owner],
            changes=True,
        )
        granted, value = yield from self.acquire_call(owner, call, lease)
        if int(granted) != 1:
            return int(value)
        self.granted(owner, lease)
        self._tokens[owner] = int(value)
        return None

    def per_owner(self) -> list[dict[str, Any] | set[str]]:
        return [*super().per_owner(), self._tokens]

    def is_grant(self, reply: Any) -> bool:
        return reply is not None and int(reply[0]) == 1

    def acquire_token(
        self, owner: str, blocking: object, timeout: object, lease_time: object
    ) -> Flow[int | None]:
        """:meth:`acquire`, then the new token (None when the wait ran out)."""
        acquiring = self.acquire(owner, blocking, timeout, lease_time)  # checks arguments now
        return self._token_after(owner, acquiring)

    def _token_after(self, owner: str, acquiring: Flow[bool]) -> Flow[int | None]:
        if not (yield from acquiring):
            return None
        return self._tokens.get(owner)

    def token(self, owner: str) -> int | None:
        """The token of ``owner``'s latest acquisition, None if it never acquired."""
        return self._tokens.get(owner)
