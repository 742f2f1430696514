# Source of tenure.sync.lock: run python tools/unasync.py after editing.
"""The lock objects. Each method runs one core flow for the calling owner."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ClassVar

from tenure._scope import AsyncLossScope
from tenure.aio.acquiring import AsyncLockContext
from tenure.aio.runner import CALLER, AsyncRunner
from tenure.core.args import bind_callback
from tenure.core.holds import OnLost
from tenure.core.lock import LockCore


class AsyncLock(AsyncLockContext):
    """A reentrant distributed lock (Redisson ``RLock``), owned per (client, thread) in the
    sync API and per (client, asyncio task) in the asyncio API.

    Made by ``client.lock(name)``. The holder's lease is renewed by the client's watchdog
    unless ``lease_time`` is given. Waiters sleep on the lock's pub/sub channel and wake on
    unlock or when the holder's lease ends, never by polling. Every member is a coroutine in
    the asyncio API.

    A Lock, FairLock and FencedLock of one name share its hash and exclude one another; a
    ReadWriteLock of that name is refused with [`tenure.LockKindError`][tenure.errors.LockKindError]
    while either
    holds it (and the other way round). The names ``x`` and ``{x}`` share their channel and
    other derived keys (Redisson's naming): use one of them only (see
    `tenure.keys.brace_twin()`).

    Example:
        ```python
        lock = client.lock("orders:42")
        async with lock:                      # waits; the watchdog renews the lease
            ...                               # one owner on any host at a time
        if await lock.acquire(timeout=5, lease_time=60):
            try:
                ...
            finally:
                await lock.release()

        @client.lock("nightly-report")        # each call runs under the lock
        async def report() -> None: ...
        ```
    """

    core_class: ClassVar[type[LockCore]] = LockCore

    def __init__(
        self,
        runner: AsyncRunner,
        name: str,
        on_lost: OnLost | None = None,
        on_doubt: OnLost | None = None,
    ) -> None:
        self.runner = runner
        """The client's runner (what carries out the lock's flows)."""
        self.core = self.core_class(runner.ctx, name, bind_callback(on_lost, self))
        """The lock's algorithm (`tenure.core`)."""
        self.core.on_doubt = bind_callback(on_doubt, self, "on_doubt")

    @property
    def name(self) -> str:  # type: ignore[override]
        """The lock's name as given (without the client's ``name_prefix``)."""
        return self.core.name

    def acquire(
        self,
        blocking: bool = True,
        timeout: float | None = None,
        lease_time: float | None = None,
        *,
        max_hold: float | None = None,
    ) -> Awaitable[bool]:
        """Take one hold, waiting while another owner holds the lock.

        The caller (the owner of the hold) is the thread or task that calls ``acquire``,
        also when an asyncio caller awaits it in another task (``asyncio.wait_for``,
        ``create_task``): the owner is fixed at the call, not where the wait runs.

        Args:
            blocking: False makes one attempt (as ``timeout=0``).
            timeout: seconds to wait (float); None or -1 waits forever, 0 makes one attempt.
            lease_time: seconds (float, from 0.01 to 1e12) until the hold expires on its
                own; None lets the client's watchdog renew it (lease ``watchdog_timeout``)
                until release.
            max_hold: seconds (float, > 0): a hold cap. The watchdog stops renewing this
                hold ``max_hold`` seconds after the grant, so it ends (and is reported
                lost) at most ``max_hold`` + lease seconds after the grant, whatever the
                process does. None: no cap.

        Returns:
            True once held, with the lease counted from just before the grant was sent:
                a grant whose reply came too late to leave any of its lease (less the
                clock-drift allowance, 0.01 x lease + 2 ms) is undone and never returned, and
                the wait goes on. False only when the wait ran out.

        Raises:
            TypeError, ValueError: a bad argument (NaN, negative, ``lease_time`` below
                0.01 or above 1e12, ``max_hold`` <= 0), before any I/O.
            LockLostError: a re-entry: the caller's earlier hold on this lock was lost
                (its lease ran out on the server, a failover, a force-release); nothing
                was taken. The loss is reported as a renewal would (``lost``,
                ``on_lost``, the ``async with`` blocks under that hold cancelled), and the
                release of the earlier hold raises LockLostError too.
            BackendError: the server failed or did not answer within the socket timeout.
                The attempt may still have been granted: the client undoes any such grant
                in the background as soon as the server answers (a cancelled or
                interrupted acquire too), so the caller holds exactly what it held before.
        """
        runner, owner = self.runner, self.runner.owner()
        flow = self.core.acquire(owner, blocking, timeout, lease_time)
        if max_hold is not None:
            flow = self.core.capped(owner, max_hold, flow)
        return runner.acquire(self, owner, flow)

    def release(self) -> Awaitable[None]:
        """Give back one hold; the lock is free once the caller's hold count reaches 0.

        Raises:
            LockLostError: the caller's hold expired or was taken since it was acquired
                (also reported through ``lost`` and ``on_lost``). A loss the client already
                saw, on the server or on its own clock, raises with no I/O.
            NotOwnedError: the caller holds no hold on this lock.
            BackendError: the server failed or did not answer within the socket timeout;
                the release may or may not have run. The hold is given up here all the
                same, and the client finishes the release in the background as soon as the
                server answers (a cancelled or interrupted release too): it takes off the
                holds beyond those the caller still has, never one more.
            ServerError: the server refused the script (an ACL, a script error); the hold
                is given up here and expires with its lease on the server.

        An exception a signal handler raises once the call began (KeyboardInterrupt) reaches
        the caller, and this one hold is released in the background all the same.
        """
        # (No call before the runner's: it finishes a release cut short after this line.)
        return self.runner.release_by(self, CALLER, self.core.release)

    def extend(self, additional_time: float) -> Awaitable[None]:
        """Add ``additional_time`` seconds to the caller's hold taken with ``lease_time``.

        On the server, atomically and only while the caller's owner field is still in the
        lock: the key's expiry becomes its remaining lease (PTTL) plus ``additional_time``
        (at most 1e12 s from now). Every hold the caller has on this lock shares that
        expiry. A FairLock moves its waiters' deadlines by as much; a read hold extends each
        of the caller's read holds, and the lock lives at least as long as the longest.

        Args:
            additional_time: seconds (float, > 0, at most 1e12) to add.

        Raises:
            TypeError, ValueError: a bad ``additional_time``, before any I/O.
            LockError: the caller's hold is renewed by the watchdog (taken without
                ``lease_time``): the next renewal would undo the extension. Nothing sent.
            LockLostError: the caller's hold expired or was taken since it was acquired
                (also reported through ``lost`` and ``on_lost``).
            NotOwnedError: the caller holds no hold on this lock.
            BackendError: the server failed (the extension may or may not have happened).
        """
        runner = self.runner
        return runner.run(self.core.extend(runner.owner(), additional_time))

    def locked(self) -> Awaitable[bool]:
        """True if any owner holds the lock. Raises BackendError."""
        return self.runner.run(self.core.locked())

    def owned(self) -> Awaitable[bool]:
        """True if the caller holds the lock (Redisson ``isHeldByCurrentThread``)."""
        runner = self.runner
        return runner.run(self.core.owned(runner.owner()))

    def hold_count(self) -> Awaitable[int]:
        """The caller's reentrancy count (0 when it holds nothing)."""
        runner = self.runner
        return runner.run(self.core.hold_count(runner.owner()))

    def remaining_lease(self) -> Awaitable[float | None]:
        """Seconds until the lock expires; None if not held; ``math.inf`` without expiry."""
        return self.runner.run(self.core.remaining_lease())

    def force_release(self) -> Awaitable[bool]:
        """Delete the lock whoever holds it and wake its waiters; True if it was held.

        The former holder finds out at its next release (LockLostError) or renewal.
        """
        return self.runner.run(self.core.force_release())

    @property
    def lost(self) -> bool:
        """True if the caller's latest hold was lost (expired or taken away)."""
        return self.core.is_lost(self.runner.owner())

    def valid_for(self) -> float:
        """Seconds the caller's hold is surely still valid on the local monotonic clock:
        last confirmed grant or renewal + lease - clock-drift allowance (0.01 x lease +
        2 ms) - now. 0.0 when the caller holds nothing or its hold was lost. No I/O (a
        plain method in the asyncio API too)."""
        return self.core.valid_for(self.runner.owner())

    def checkpoint(self) -> None:
        """Stop here if the caller's hold is gone: for bodies that cannot be cancelled (sync
        code), call it between steps. No I/O (a plain method in the asyncio API too).

        Raises:
            LockLostError: the hold was lost, or [`valid_for()`][tenure.AsyncLock.valid_for] is 0.
            NotOwnedError: the caller holds nothing (and lost nothing).
        """
        self.core.checkpoint(self.runner.owner())

    @property
    def in_doubt(self) -> bool:
        """Jeopardy: True while a renewal of the caller's hold failed (or none was confirmed
        for more than a renewal period and a half) but the hold is still valid on the local
        clock; False again once a renewal is confirmed. ``on_doubt`` (factory keyword) is
        called once per such episode, from the renewal loop."""
        return self.core.in_doubt(self.runner.owner())

    def execute_if_held(self, *command: Any) -> Awaitable[Any]:
        """A guarded write (etcd's ``IsOwner()`` in a transaction): run one Redis command
        atomically, only while the caller still holds this lock on the server. One script
        checks the caller's owner field and runs the command; nothing runs otherwise.

        Example: ``await lock.execute_if_held("SET", "{orders:42}:state", "paid")``.

        Args:
            command: the command name and its arguments (str, bytes, int or float), as
                ``redis.execute_command`` takes them. In a cluster its keys must hash to the
                lock's slot: build them as ``"{" + tenure.keys.slot_tag(name) + "}:..."``
                (checked for the first key; the server refuses others).

        Returns:
            The command's reply.

        Raises:
            LockLostError: the caller's hold expired or was taken (on the server, or
                already reported); the command did not run.
            NotOwnedError: the caller holds nothing (no I/O).
            TypeError, ValueError: an empty command, a word of another type, or (cluster)
                a first key outside the lock's slot, before any I/O.
            ServerError: the server refused the command (a key of the wrong type, an ACL).
            BackendError: the server failed; the command may or may not have run.
        """
        runner = self.runner
        flow = self.core.execute_if_held(runner.owner(), command, runner.route.cluster)
        return runner.run(flow)

    def _watch(self, scope: AsyncLossScope) -> bool:
        return self.core.watch(self.runner.owner(), scope)

    def _unwatch(self, scope: AsyncLossScope) -> None:
        self.core.unwatch(self.runner.owner(), scope)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
