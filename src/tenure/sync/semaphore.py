# GENERATED from src/tenure/aio/semaphore.py by tools/unasync.py: edit that file, not this one.
"""Semaphore and PermitExpirableSemaphore objects. Each method runs one core flow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tenure._scope import LossScope
from tenure._settle import acquire_settled
from tenure.sync.runner import Runner
from tenure.core.args import check_lease, check_wait
from tenure.core.effects import Flow
from tenure.core.semaphore import PermitCore, SemaphoreCore, new_permit_id
from tenure.errors import LockError, LockLostError, LockTimeout

NO_OWNER = ""
"""The owner [`tenure.observe`][tenure.observe] sees for a permit request (permits have no owner; a
granted permit is then known by its id)."""


class Semaphore:
    """A distributed counting semaphore (Redisson ``RSemaphore``): at most N permits out.

    Made by ``client.semaphore(name)``. Permits have no owner: any caller on any client may
    release them, and nothing gives back the permits of a caller that crashed (use
    [`tenure.PermitExpirableSemaphore`][tenure.PermitExpirableSemaphore] for that). Waiters sleep on
    the semaphore's
    pub/sub channel and wake when permits are released, never by polling. Every member is a
    coroutine in the asyncio API.

    A semaphore whose permits were never set has none: ``acquire`` waits (as in Redisson)
    until someone calls [`try_set_permits()`][tenure.Semaphore.try_set_permits],
    [`set_permits()`][tenure.Semaphore.set_permits],
    [`add_permits()`][tenure.Semaphore.add_permits] or
    [`release()`][tenure.Semaphore.release], and a non-blocking attempt returns False.

    Example:
        ```python
        sem = client.semaphore("gpu-pool")
        sem.try_set_permits(3)          # only the first caller's count counts
        with sem:                       # one permit, waiting as long as it takes
            ...
        with sem(timeout=5):            # or LockTimeout after 5 s
            ...
        ```
    """

    def __init__(self, runner: Runner, name: str) -> None:
        self.runner = runner
        self.core = self._make_core(runner, name)

    def _make_core(self, runner: Runner, name: str) -> SemaphoreCore:
        return SemaphoreCore(runner.ctx, name)

    @property
    def name(self) -> str:
        """The semaphore's name as given (without the client's ``name_prefix``)."""
        return self.core.name

    def try_set_permits(self, permits: int) -> bool:
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

    def set_permits(self, permits: int) -> None:
        """Set the number of available permits, whatever it was, and wake waiters.

        For a PermitExpirableSemaphore ``permits`` is the total: permits out count against
        it. Raises TypeError/ValueError (``permits`` not an int >= 0) before any I/O,
        BackendError.
        """
        return self.runner.run(self.core.set_permits(permits))

    def add_permits(self, permits: int) -> None:
        """Add ``permits`` (an int, negative to remove; the count may go below 0) and wake
        waiters when permits were added. Raises TypeError before any I/O, BackendError."""
        return self.runner.run(self.core.add_permits(permits))

    def available_permits(self) -> int:
        """The number of permits available now (0 when never set). Raises BackendError."""
        return self.runner.run(self.core.available_permits())

    def drain_permits(self) -> int:
        """Take every available permit at once; how many were taken. Raises BackendError."""
        return self.runner.run(self.core.drain_permits())

    def acquire(
        self, permits: int = 1, *, blocking: bool = True, timeout: float | None = None
    ) -> bool:
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
        return acquire_settled(
            self.runner, self, NO_OWNER, flow, lambda: self.core.give_back(permits)
        )

    def release(self, permits: int = 1) -> None:
        """Give back ``permits`` permits (int >= 1) and wake waiters. Any caller may release.

        Raises TypeError/ValueError before any I/O, BackendError. An exception a signal
        handler raises once the call began reaches the caller; the release is finished in
        the background if its script surely did not go (docs/internals.md, "Cancellation
        and interruption").
        """
        # (No call before the runner's: it finishes a release cut short after this line.)
        return self.runner.release_by(self, NO_OWNER, lambda _: self.core.release(permits))

    def __call__(self, timeout: float | None = None) -> PermitContext:
        """``sem(timeout=5)``: a context manager taking one permit, or raising
        [`tenure.LockTimeout`][tenure.errors.LockTimeout] when ``timeout`` seconds pass first.
        A bad ``timeout`` raises TypeError or ValueError here, as ``acquire()`` would."""
        check_wait(True, timeout)
        return PermitContext(self, timeout)

    def __enter__(self) -> Semaphore:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class PermitContext:
    """What ``sem(timeout=...)`` returns: one permit for the block, or LockTimeout."""

    def __init__(self, sem: Semaphore, timeout: float | None) -> None:
        self._sem = sem
        self._timeout = timeout

    def __enter__(self) -> Semaphore:
        if not self._sem.acquire(timeout=self._timeout):
            raise LockTimeout(f"{self._sem!r}: no permit within {self._timeout} s")
        return self._sem

    def __exit__(self, *exc: object) -> None:
        self._sem.release()


OnPermitLost = Callable[[Any, str], None]


class PermitExpirableSemaphore(Semaphore):
    """A semaphore whose permits have ids and leases (Redisson
    ``RPermitExpirableSemaphore``): a permit comes back on its own when its lease ends.

    Made by ``client.permit_expirable_semaphore(name, on_lost=...)``. ``acquire`` returns a
    permit id (32 hex digits) that any caller may pass to
    [`release()`][tenure.PermitExpirableSemaphore.release]. A permit taken
    without ``lease_time`` is renewed by the client's watchdog like a lock hold, so the
    permit of a crashed holder comes back within one ``watchdog_timeout`` (Redisson's never
    come back); a permit found gone is reported:
    [`lost()`][tenure.PermitExpirableSemaphore.lost], ``on_lost(semaphore,
    permit_id)`` from the renewal loop (or the releasing caller), LockLostError at release.
    The permit-count members are [`tenure.Semaphore`][tenure.Semaphore]'s.

    Example:
        ```python
        gpus = client.permit_expirable_semaphore("gpus")
        gpus.try_set_permits(4)
        with gpus(timeout=30, lease_time=600) as permit_id:
            ...
        permit = gpus.acquire()            # renewed until released
        try:
            ...
        finally:
            gpus.release(permit)
        ```
    """

    core: PermitCore

    def __init__(
        self, runner: Runner, name: str, on_lost: OnPermitLost | None = None
    ) -> None:
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be callable, not {type(on_lost).__name__}")
        self._on_lost = on_lost
        super().__init__(runner, name)

    def _make_core(self, runner: Runner, name: str) -> PermitCore:
        callback = self._on_lost
        report = None if callback is None else (lambda permit: callback(self, permit))
        return PermitCore(runner.ctx, name, report)

    def acquire(  # type: ignore[override]
        self,
        *,
        blocking: bool = True,
        timeout: float | None = None,
        lease_time: float | None = None,
    ) -> str | None:
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

    def _acquire_permit(self, flow: Flow[str | None], permit: str) -> str | None:
        try:
            return self.runner.acquire(self, NO_OWNER, flow)
        except BaseException:
            # A signal handler's exception landing after the flow returned the permit (held
            # and renewed) and before it reached the caller: nobody would ever release it.
            undo = self.core.abandon(permit)
            if undo is not None and not self.runner.closed:
                self.runner.run(undo)
            raise

    def release(self, permit_id: str) -> None:  # type: ignore[override]
        """Give back permit ``permit_id`` and wake waiters.

        Raises:
            TypeError, ValueError: ``permit_id`` is not 32 lower-case hex digits (no I/O).
            LockLostError: a permit this client took expired or was taken away (also
                reported through [`lost()`][tenure.PermitExpirableSemaphore.lost] and
                ``on_lost``).
            NotOwnedError: no such permit is out.
            BackendError: the server failed.

        An exception a signal handler raises once the call began reaches the caller, and the
        permit is given back in the background all the same.
        """
        # (No call before the runner's: it finishes a release cut short after this line.)
        return self.runner.release_by(self, permit_id, self.core.release_permit)

    def try_release(self, permit_id: str) -> bool:
        """As [`release()`][tenure.PermitExpirableSemaphore.release], but returns False instead
        of raising NotOwnedError or
        LockLostError (a lost permit is still reported through
        [`lost()`][tenure.PermitExpirableSemaphore.lost]/``on_lost``)."""
        return self.runner.release_by(self, permit_id, self.core.try_release_permit)

    def update_lease_time(self, permit_id: str, lease_time: float) -> bool:
        """Give permit ``permit_id`` a lease of ``lease_time`` seconds from now (the
        watchdog stops renewing it). True if updated; False if no such permit is out.

        Raises TypeError/ValueError (bad id or lease) before any I/O, BackendError.
        """
        return self.runner.run(self.core.update_lease_time(permit_id, lease_time))

    def remaining_lease(self, permit_id: str) -> float | None:
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
                [`valid_for()`][tenure.PermitExpirableSemaphore.valid_for] is 0.
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
    ) -> PermitIdContext:
        """``psem(timeout=5, lease_time=60)``: a context manager whose ``as`` target is the
        permit id; raises [`tenure.LockTimeout`][tenure.errors.LockTimeout] when ``timeout`` passes
        first;
        releases the permit on exit. In asyncio code the body is cancelled when the permit
        is lost and the block raises LockLostError, as for locks (``cancel_on_loss=False``:
        the body runs on). A bad ``timeout`` or ``lease_time`` raises TypeError or
        ValueError here, as ``acquire()`` would."""
        check_wait(True, timeout)
        check_lease(lease_time)
        return PermitIdContext(self, timeout, lease_time, cancel_on_loss)

    def __enter__(self) -> Any:
        raise TypeError("use 'with semaphore(timeout=..., lease_time=...) as permit_id:'")

    def __exit__(self, *exc: object) -> None:
        return None


class PermitIdContext:
    """What ``psem(timeout=..., lease_time=...)`` returns."""

    def __init__(
        self,
        sem: PermitExpirableSemaphore,
        timeout: float | None,
        lease: float | None,
        cancel_on_loss: bool = True,
    ) -> None:
        self._sem = sem
        self._timeout = timeout
        self._lease = lease
        self._cancel_on_loss = cancel_on_loss
        self._permit: str | None = None
        self._scope: LossScope | None = None

    def __enter__(self) -> str:
        permit = self._sem.acquire(timeout=self._timeout, lease_time=self._lease)
        if permit is None:
            raise LockTimeout(f"{self._sem!r}: no permit within {self._timeout} s")
        self._permit = permit
        scope = self._scope = LossScope(self._sem, self._cancel_on_loss)
        if scope.active and not self._sem.core.watch(permit, scope):
            scope.lost()  # lost already: the body is cancelled at its first await
        return permit

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        permit, self._permit = self._permit, None
        scope, self._scope = self._scope, None
        if permit is None:
            return
        loss = None
        if scope is not None:
            if scope.active:
                self._sem.core.unwatch(permit, scope)
            loss = scope.finish(error)
        if loss is not None:
            try:
                self._sem.release(permit)  # the loss again, or a failed release
            except LockLostError:
                pass
            except LockError as failure:
                loss.add_note(f"tenure: releasing permit {permit} failed too: {failure!r}")
            raise loss from error
        if error is None:
            self._sem.release(permit)
            return
        try:
            self._sem.release(permit)
        except Exception as failure:  # the block's own error is the one that propagates
            error.add_note(f"tenure: releasing permit {permit} failed too: {failure!r}")
