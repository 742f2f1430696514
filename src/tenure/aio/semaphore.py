# Source of tenure.sync.semaphore: run python tools/unasync.py after editing.
"""Semaphore and PermitExpirableSemaphore objects. Each method runs one core flow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tenure._scope import AsyncLossScope
from tenure._settle import async_acquire_settled
from tenure.aio.runner import AsyncRunner
from tenure.core.args import check_lease, check_wait
from tenure.core.effects import Flow
from tenure.core.semaphore import PermitCore, SemaphoreCore, new_permit_id
from tenure.errors import LockError, LockLostError, LockTimeout

NO_OWNER = ""
"""The owner [`tenure.observe`][tenure.observe] sees for a permit request (permits have no owner; a
granted permit is then known by its id)."""


class AsyncSemaphore:
    """A distributed counting semaphore (Redisson ``RSemaphore``): at most N permits out.

    Made by ``client.semaphore(name)``. Permits have no owner: any caller on any client may
    release them, and nothing gives back the permits of a caller that crashed (use
    [`tenure.PermitExpirableSemaphore`][tenure.PermitExpirableSemaphore] for that). Waiters sleep on
    the semaphore's
    pub/sub channel and wake when permits are released, never by polling. Every member is a
    coroutine in the asyncio API.

    A semaphore whose permits were never set has none: ``acquire`` waits (as in Redisson)
    until someone calls [`try_set_permits()`][tenure.AsyncSemaphore.try_set_permits],
    [`set_permits()`][tenure.AsyncSemaphore.set_permits],
    [`add_permits()`][tenure.AsyncSemaphore.add_permits] or
    [`release()`][tenure.AsyncSemaphore.release], and a non-blocking attempt returns False.

    Example:
        ```python
        sem = client.semaphore("gpu-pool")
        await sem.try_set_permits(3)          # only the first caller's count counts
        async with sem:                       # one permit, waiting as long as it takes
            ...
        async with sem(timeout=5):            # or LockTimeout after 5 s
            ...
        ```
    """

    def __init__(self, runner: AsyncRunner, name: str) -> None:
        self.runner = runner
        self.core = self._make_core(runner, name)

    def _make_core(self, runner: AsyncRunner, name: str) -> SemaphoreCore:
        return SemaphoreCore(runner.ctx, name)

    @property
    def name(self) -> str:
        """The semaphore's name as given (without the client's ``name_prefix``)."""
        return self.core.name

    def try_set_permits(self, permits: int) -> Awaitable[bool]:
        """Set the number of permits if it was never set (Redisson ``trySetPermits``).

        Args:
            permits: the count (int >= 0).

        Returns:
            True if set; False if the semaphore already had a count (unchanged).

        Raises:
            TypeError, ValueError: ``permits`` is not an int >= 0 (before any I/O).
            BackendError: the server failed.
        """
        return self.runner.run(self.core.try_set_permits(permits))

    def set_permits(self, permits: int) -> Awaitable[None]:
        """Set the number of available permits, whatever it was, and wake waiters.

        For a PermitExpirableSemaphore ``permits`` is the total: permits out count against
        it. Raises TypeError/ValueError (``permits`` not an int >= 0) before any I/O,
        BackendError.
        """
        return self.runner.run(self.core.set_permits(permits))

    def add_permits(self, permits: int) -> Awaitable[None]:
        """Add ``permits`` (an int, negative to remove; the count may go below 0) and wake
        waiters when permits were added. Raises TypeError before any I/O, BackendError."""
        return self.runner.run(self.core.add_permits(permits))

    def available_permits(self) -> Awaitable[int]:
        """The number of permits available now (0 when never set). Raises BackendError."""
        return self.runner.run(self.core.available_permits())

    def drain_permits(self) -> Awaitable[int]:
        """Take every available permit at once; how many were taken. Raises BackendError."""
        return self.runner.run(self.core.drain_permits())

    def acquire(
        self, permits: int = 1, *, blocking: bool = True, timeout: float | None = None
    ) -> Awaitable[bool]:
        """Take ``permits`` permits at once, waiting until that many are available.

        Args:
            permits: how many (int >= 1).
            blocking: False makes one attempt (as ``timeout=0``).
            timeout: seconds to wait (float); None or -1 waits forever, 0 makes one attempt.

        Returns:
            True once taken; False only when the wait ran out (nothing taken).

        Raises:
            TypeError, ValueError: a bad argument, before any I/O.
            BackendError: the server failed.
        """
        flow = self.core.acquire(permits, blocking, timeout)
        # A caller cancelled while the script is on its way: its reply decides (_settle.py).
        return async_acquire_settled(
            self.runner, self, NO_OWNER, flow, lambda: self.core.give_back(permits)
        )

    def release(self, permits: int = 1) -> Awaitable[None]:
        """Give back ``permits`` permits (int >= 1) and wake waiters. Any caller may release.

        Raises TypeError/ValueError before any I/O, BackendError. An exception a signal
        handler raises once the call began reaches the caller; the release is finished in
        the background if its script surely did not go (docs/internals.md, "Cancellation
        and interruption").
        """
        # (No call before the runner's: it finishes a release cut short after this line.)
        return self.runner.release_by(self, NO_OWNER, lambda _: self.core.release(permits))

    def __call__(self, timeout: float | None = None) -> AsyncPermitContext:
        """``sem(timeout=5)``: a context manager taking one permit, or raising
        [`tenure.LockTimeout`][tenure.errors.LockTimeout] when ``timeout`` seconds pass first.
        A bad ``timeout`` raises TypeError or ValueError here, as ``acquire()`` would."""
        check_wait(True, timeout)
        return AsyncPermitContext(self, timeout)

    async def __aenter__(self) -> AsyncSemaphore:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class AsyncPermitContext:
    """What ``sem(timeout=...)`` returns: one permit for the block, or LockTimeout."""

    def __init__(self, sem: AsyncSemaphore, timeout: float | None) -> None:
        self._sem = sem
        self._timeout = timeout

    async def __aenter__(self) -> AsyncSemaphore:
        if not await self._sem.acquire(timeout=self._timeout):
            raise LockTimeout(f"{self._sem!r}: no permit within {self._timeout} s")
        return self._sem

    async def __aexit__(self, *exc: object) -> None:
        await self._sem.release()


OnPermitLost = Callable[[Any, str], None]


class AsyncPermitExpirableSemaphore(AsyncSemaphore):
    """A semaphore whose permits have ids and leases (Redisson
    ``RPermitExpirableSemaphore``): a permit comes back on its own when its lease ends.

    Made by ``client.permit_expirable_semaphore(name, on_lost=...)``. ``acquire`` returns a
    permit id (32 hex digits) that any caller may pass to
    [`release()`][tenure.AsyncPermitExpirableSemaphore.release]. A permit taken
    without ``lease_time`` is renewed by the client's watchdog like a lock hold, so the
    permit of a crashed holder comes back within one ``watchdog_timeout`` (Redisson's never
    come back); a permit found gone is reported:
    [`lost()`][tenure.AsyncPermitExpirableSemaphore.lost], ``on_lost(semaphore,
    permit_id)`` from the renewal loop (or the releasing caller), LockLostError at release.
    The permit-count members are [`tenure.Semaphore`][tenure.Semaphore]'s.

    Example:
        ```python
        gpus = client.permit_expirable_semaphore("gpus")
        await gpus.try_set_permits(4)
        async with gpus(timeout=30, lease_time=600) as permit_id:
            ...
        permit = await gpus.acquire()            # renewed until released
        try:
            ...
        finally:
            await gpus.release(permit)
        ```
    """

    core: PermitCore

    def __init__(
        self, runner: AsyncRunner, name: str, on_lost: OnPermitLost | None = None
    ) -> None:
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be callable, not {type(on_lost).__name__}")
        self._on_lost = on_lost
        super().__init__(runner, name)

    def _make_core(self, runner: AsyncRunner, name: str) -> PermitCore:
        callback = self._on_lost
        report = None if callback is None else (lambda permit: callback(self, permit))
        return PermitCore(runner.ctx, name, report)

    def acquire(  # type: ignore[override]
        self,
        *,
        blocking: bool = True,
        timeout: float | None = None,
        lease_time: float | None = None,
    ) -> Awaitable[str | None]:
        """Take one permit, waiting until one is available or an expired one comes back.

        Args:
            blocking: False makes one attempt (as ``timeout=0``).
            timeout: seconds to wait (float); None or -1 waits forever, 0 makes one attempt.
            lease_time: seconds (float, > 0, at most 1e12) until the permit comes back on
                its own; None lets the client's watchdog renew it (lease
                ``watchdog_timeout``) until released.

        Returns:
            The permit id (32 lower-case hex digits); None when the wait ran out.

        Raises:
            TypeError, ValueError: a bad argument, before any I/O.
            BackendError: the server failed; a permit the failed call may have taken is
                given back (or expires with its lease).
        """
        permit = new_permit_id()
        flow = self.core.acquire_permit(blocking, timeout, lease_time, permit)
        return self._acquire_permit(flow, permit)

    async def _acquire_permit(self, flow: Flow[str | None], permit: str) -> str | None:
        try:
            return await self.runner.acquire(self, NO_OWNER, flow)
        except BaseException:
            # A signal handler's exception landing after the flow returned the permit (held
            # and renewed) and before it reached the caller: nobody would ever release it.
            undo = self.core.abandon(permit)
            if undo is not None and not self.runner.closed:
                await self.runner.run(undo)
            raise

    def release(self, permit_id: str) -> Awaitable[None]:  # type: ignore[override]
        """Give back permit ``permit_id`` and wake waiters.

        Raises:
            TypeError, ValueError: ``permit_id`` is not 32 lower-case hex digits (no I/O).
            LockLostError: a permit this client took expired or was taken away (also
                reported through [`lost()`][tenure.AsyncPermitExpirableSemaphore.lost] and
                ``on_lost``).
            NotOwnedError: no such permit is out.
            BackendError: the server failed.

        An exception a signal handler raises once the call began reaches the caller, and the
        permit is given back in the background all the same.
        """
        # (No call before the runner's: it finishes a release cut short after this line.)
        return self.runner.release_by(self, permit_id, self.core.release_permit)

    def try_release(self, permit_id: str) -> Awaitable[bool]:
        """As [`release()`][tenure.AsyncPermitExpirableSemaphore.release], but returns False instead
        of raising NotOwnedError or
        LockLostError (a lost permit is still reported through
        [`lost()`][tenure.AsyncPermitExpirableSemaphore.lost]/``on_lost``)."""
        return self.runner.release_by(self, permit_id, self.core.try_release_permit)

    def update_lease_time(self, permit_id: str, lease_time: float) -> Awaitable[bool]:
        """Give permit ``permit_id`` a lease of ``lease_time`` seconds from now (the
        watchdog stops renewing it). True if updated; False if no such permit is out.

        Raises TypeError/ValueError (bad id or lease) before any I/O, BackendError.
        """
        return self.runner.run(self.core.update_lease_time(permit_id, lease_time))

    def remaining_lease(self, permit_id: str) -> Awaitable[float | None]:
        """Seconds until permit ``permit_id`` comes back on its own; None if it is not out;
        ``math.inf`` for a permit without expiry (taken by a Redisson client without lease).

        Raises TypeError/ValueError (bad id) before any I/O, BackendError.
        """
        return self.runner.run(self.core.remaining_lease(permit_id))

    def lost(self, permit_id: str) -> bool:
        """True if permit ``permit_id``, taken by this client, was found gone (expired or
        taken away). Raises TypeError/ValueError for a malformed id."""
        return self.core.is_lost(permit_id)

    def valid_for(self, permit_id: str) -> float:
        """Seconds permit ``permit_id`` (taken by this client) is surely still valid on the
        local monotonic clock; 0.0 when it is not out from this client or was lost. No I/O
        (a plain method in the asyncio API too). TypeError/ValueError for a malformed id."""
        return self.core.valid_for(permit_id)

    def checkpoint(self, permit_id: str) -> None:
        """Stop here if permit ``permit_id`` is gone (sync bodies call it between steps).
        No I/O (a plain method in the asyncio API too).

        Raises:
            LockLostError: the permit was lost, or
                [`valid_for()`][tenure.AsyncPermitExpirableSemaphore.valid_for] is 0.
            NotOwnedError: this client holds no such permit.
            TypeError, ValueError: a malformed id.
        """
        self.core.checkpoint(permit_id)

    def __call__(  # type: ignore[override]
        self,
        timeout: float | None = None,
        lease_time: float | None = None,
        *,
        cancel_on_loss: bool = True,
    ) -> AsyncPermitIdContext:
        """``psem(timeout=5, lease_time=60)``: a context manager whose ``as`` target is the
        permit id; raises [`tenure.LockTimeout`][tenure.errors.LockTimeout] when ``timeout`` passes
        first;
        releases the permit on exit. In asyncio code the body is cancelled when the permit
        is lost and the block raises LockLostError, as for locks (``cancel_on_loss=False``:
        the body runs on). A bad ``timeout`` or ``lease_time`` raises TypeError or
        ValueError here, as ``acquire()`` would."""
        check_wait(True, timeout)
        check_lease(lease_time)
        return AsyncPermitIdContext(self, timeout, lease_time, cancel_on_loss)

    async def __aenter__(self) -> Any:
        raise TypeError("use 'with semaphore(timeout=..., lease_time=...) as permit_id:'")

    async def __aexit__(self, *exc: object) -> None:
        return None


class AsyncPermitIdContext:
    """What ``psem(timeout=..., lease_time=...)`` returns."""

    def __init__(
        self,
        sem: AsyncPermitExpirableSemaphore,
        timeout: float | None,
        lease: float | None,
        cancel_on_loss: bool = True,
    ) -> None:
        self._sem = sem
        self._timeout = timeout
        self._lease = lease
        self._cancel_on_loss = cancel_on_loss
        self._permit: str | None = None
        self._scope: AsyncLossScope | None = None

    async def __aenter__(self) -> str:
        permit = await self._sem.acquire(timeout=self._timeout, lease_time=self._lease)
        if permit is None:
            raise LockTimeout(f"{self._sem!r}: no permit within {self._timeout} s")
        self._permit = permit
        scope = self._scope = AsyncLossScope(self._sem, self._cancel_on_loss)
        if scope.active and not self._sem.core.watch(permit, scope):
            scope.lost()  # lost already: the body is cancelled at its first await
        return permit

    async def __aexit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        permit, self._permit = self._permit, None
        scope, self._scope = self._scope, None
        if permit is None:
            return
        loss = None
        if scope is not None:
            if scope.active:
                self._sem.core.unwatch(permit, scope)
            loss = await scope.finish(error)
        if loss is not None:
            try:
                await self._sem.release(permit)  # the loss again, or a failed release
            except LockLostError:
                pass
            except LockError as failure:
                loss.add_note(f"tenure: releasing permit {permit} failed too: {failure!r}")
            raise loss from error
        if error is None:
            await self._sem.release(permit)
            return
        try:
            await self._sem.release(permit)
        except Exception as failure:  # the block's own error is the one that propagates
            error.add_note(f"tenure: releasing permit {permit} failed too: {failure!r}")
