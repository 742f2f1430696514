# Source of tenure.sync.runner: run python tools/unasync.py after editing.
"""The runners: they carry out what the core's flows ask for, and nothing else.

`AsyncRunner` runs one client's flows: scripts and commands on the pool, waiting on
the shared listener, and renewal — it owns the client's one renewal loop, as an etcd session
owns its lease, and starts it when a flow reports a watchdog hold (``WatchHolds``).
`AsyncCompositeRunner` runs MultiLock/RedLock flows over the members' runners.
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
import time
import weakref
from asyncio import CancelledError
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from typing import Any, TypeVar

from tenure import observe
from tenure._concurrency import (
    AsyncEvent,
    AsyncMutex,
    AsyncPauses,
    AsyncSpawner,
    AsyncTask,
    async_cancellations,
    async_current_owner,
    async_join,
    async_sleep,
    async_wait_any,
)
from tenure._redis import AsyncRoute, NotReady, RedisError, backend_error, interrupt_of
from tenure.aio.backend import AsyncBackend, Sent
from tenure.aio.listener import AsyncListeners
from tenure.core.context import Context, call_now
from tenure.core.effects import (
    CLEAN_UP_TRIES,
    Background,
    Call,
    Command,
    Drain,
    Finished,
    Join,
    OnMember,
    Settle,
    Sleep,
    Spawn,
    Subscribe,
    Together,
    Unsubscribe,
    Wait,
    WaitAny,
    WatchHolds,
    began,
    continued,
    just,
    resumed,
)
from tenure.core.holds import Hold
from tenure.core.watchdog import refresh_waiters, register, renew, report_doubts, report_lost
from tenure.errors import BackendError, ClientClosedError, LockError, LockLostError

T = TypeVar("T")
log = logging.getLogger("tenure")

CALLER: Any = object()
"""`AsyncDriver.release_by()`'s owner: the caller's (`AsyncRunner.owner()`; a composite's
owners, `AsyncCompositeRunner.owners()`)."""


class AsyncDriver:
    """Drives a flow to its end: sends each effect's result back, or throws its error in
    (redis-py errors as [`tenure.BackendError`][tenure.errors.BackendError]) so the flow's cleanup
    can run."""

    closing = False
    """Set as `AsyncRunner.close()` begins: no flow starts any more."""
    closed = False
    """Set once the flows woken by `AsyncRunner.close()` ended: no I/O any more."""
    _waiting: set[Generator[Any, Any, Any]]
    """The flows running that waited on the listener (`AsyncRunner.close()` waits for
    their end)."""
    _waiters_left: AsyncEvent
    """Set when the last of `_waiting` ends."""
    _spawner: AsyncSpawner
    """Where `release_by()` finishes a release in the background."""
    _started: weakref.WeakSet[Generator[Any, Any, Any]]
    """The flows started in the background: each runs once (`_release_later`)."""
    _started_mutex: threading.Lock

    def owner(self) -> Any:
        """The caller's owner: `release_by()`'s `CALLER`."""
        raise NotImplementedError

    async def run(self, flow: Generator[Any, Any, T]) -> T:
        if self.closing:  # before any I/O: a closed client neither waits nor renews
            raise ClientClosedError("the client is closed")
        value: Any = None
        error: BaseException | None = None
        # The asyncio task's count of cancellation requests (None in threads): see below.
        cancels = async_cancellations()
        asked = cancels() if cancels is not None else 0
        waited = False
        try:
            while True:
                try:
                    while True:
                        try:
                            effect = flow.throw(error) if error is not None else flow.send(value)
                        except StopIteration as stop:
                            result: T = stop.value
                            return result
                        try:
                            if self.closed and isinstance(effect, (Call, Command, Settle, Sleep)):
                                # Closed meanwhile (a background flow woke from its pause,
                                # say): no new I/O once the client gave its connections back,
                                # and no pause either: they end at once after close(), so a
                                # flow that only pauses (the back-up looks' lingering) spun.
                                raise ClientClosedError("the client is closed")
                            if effect.__class__ is Wait and not waited:
                                waited = True
                                self._waiting.add(flow)
                            value, error = await self.perform(effect), None
                            if cancels is not None and cancels() > asked:
                                asked = cancels()
                                # A cancellation absorbed on the way: Python 3.11's
                                # wait_for (redis-py writes through it) returns a write
                                # that ended as its caller was cancelled. The flow gets it
                                # at its yield, as one landing just after the effect: its
                                # clean-up runs (a grant just read is undone).
                                value, error = None, CancelledError()
                        except RedisError as failure:
                            # a signal handler's exception that redis-py wrapped: the caller's
                            value, error = None, interrupt_of(failure) or backend_error(failure)
                        except BaseException as failure:
                            value, error = None, failure
                            if cancels is not None and isinstance(failure, CancelledError):
                                asked = cancels()  # delivered (another stays for later)
                except BaseException as late:
                    # Raised here, between two steps (a signal handler's exception, landing
                    # after an effect's result came and before the flow got it): the flow gets
                    # it at its yield, so its clean-up runs (a grant just read is undone). One
                    # the flow itself raised ended it: it goes to the caller as it is.
                    if getattr(flow, "gi_frame", None) is None:
                        raise
                    value, error = None, late
                    if cancels is not None and isinstance(late, CancelledError):
                        asked = cancels()
        finally:
            if waited:
                self._waiting.discard(flow)
                # Only while closing: a sync Event's set() runs Python code holding its
                # Condition's lock, which a signal handler's exception can leave held (and
                # the next set() then waits for ever: seen in an interrupt storm).
                if not self._waiting and self.closing:
                    self._waiters_left.set()

    async def perform(self, effect: Any) -> Any:
        raise NotImplementedError

    async def acquire(self, lock: Any, owner: Any, flow: Generator[Any, Any, T]) -> T:
        """`run()` an acquire ``flow`` of ``lock`` by ``owner``, logged and measured
        ([`tenure.observe`][tenure.observe]; nothing to do when it would record nothing)."""
        if observe.quiet():
            return await self.run(flow)
        with observe.acquiring(lock, owner) as outcome:
            result = await self.run(flow)
            outcome.append(result)
        return result

    async def release(self, lock: Any, owner: Any, flow: Generator[Any, Any, T]) -> T:
        """`run()` a release ``flow`` of ``lock`` by ``owner``, logged and measured."""
        if observe.quiet():
            try:
                return await self.run(flow)
            except LockLostError:
                observe.lost_at_release(lock, owner)
                raise
        with observe.releasing(lock, owner):
            return await self.run(flow)

    def release_by(
        self, lock: Any, owner: Any, make: Callable[[Any], Generator[Any, Any, T]]
    ) -> Awaitable[T]:
        """`release()` the flow ``make(owner)`` of ``lock`` (``owner`` `CALLER`: the
        caller's, `owner()`); finish it in the background if an exception cuts it short
        before the flow began (docs/internals.md, "Cancellation and interruption").

        Once the caller called release() it meant to let go (reviewer R5, S3): a signal
        handler's exception landing anywhere after that must not leave the hold in the
        table, held on the server and renewed for ever. A flow that began sees it itself
        (its clean-up finishes the release in the background); before that (the front,
        `owner()`, making the flow, the observer, the driver before the flow's first step,
        the flow's own first instruction) nothing was done, and the release is started
        here in the background, once. The caller still gets its exception. Left to the
        caller: an interrupt as the front or this method is entered, before their first
        call, as one just before the call. A plain def: in the asyncio API the owner is
        fixed at the call, and a cancellation lands at an ``await`` only, all after the
        flow's first step, but for a task cancelled before it ever ran: `AsyncReleasing`.
        """
        flow: Generator[Any, Any, T] | None = None
        try:
            # (Every step in the try: an interrupt after any of them is seen below.)
            if owner is CALLER:
                owner = self.owner()
            flow = make(owner)
            running: Any = self.release(lock, owner, flow)
            if inspect.iscoroutine(running):  # the asyncio API: see `AsyncReleasing`
                running = AsyncReleasing(self, lock, flow, running)
            return running  # type: ignore[no-any-return]
        except BaseException as error:
            # Run again from the top when a second interrupt lands in it; the flow made
            # here runs once (`_release_later`).
            checked = flow is not None  # `make` returned: its argument check passed
            tries, late = 0, None
            while tries < CLEAN_UP_TRIES:
                try:
                    tries += 1
                    if flow is not None and began(flow, error):
                        break  # its own clean-up saw the exception, or it ended
                    if owner is CALLER:
                        owner = self.owner()
                    if flow is None or inspect.getgeneratorstate(flow) != inspect.GEN_CREATED:
                        try:
                            flow = make(owner)
                        except Exception as refused:
                            if not checked and type(refused) is type(error):
                                break  # the argument check refused it: nothing to release
                            raise
                    self._spawner.spawn(self._release_later, lock, flow)
                    break
                except BaseException as interrupt:
                    late = interrupt
            if late is not None:
                raise late from error
            raise

    async def _release_later(self, lock: Any, flow: Generator[Any, Any, Any]) -> None:
        """Run a release `release_by()` saw cut short before it began (once per flow)."""
        with self._started_mutex:
            if flow in self._started:
                return
            self._started.add(flow)
        try:
            await self.run(flow)
            log.info("%r: finished a release interrupted before it began", lock)
        except LockError as error:  # lost or not owned meanwhile: as release() would say
            if not self.closing:
                log.warning("%r: a release interrupted before it began failed: %s", lock, error)
        except Exception:  # a bug: say so, never raise here
            if not self.closing:
                log.exception("tenure background release failed")


class AsyncRunner(AsyncDriver):
    """Runs the flows of one client, and renews its watchdog holds."""

    def __init__(
        self, route: AsyncRoute, ctx: Context, timeout: float | None, park: bool = False
    ) -> None:
        self.ctx = ctx
        self.route = route
        self._timeout = timeout
        self.backend = AsyncBackend(route, ctx, park)
        """Sends this client's commands and scripts."""
        self._start()
        self.closed = False

    def _start(self) -> None:
        self.backend.spare.clear()  # after a fork: the parent's sockets, not ours
        self._listener = AsyncListeners(
            self.route, self._timeout, self.ctx.subscriptions, relay=self._relay
        )
        self._keeper: AsyncTask | None = None
        self._keeper_mutex = AsyncMutex()
        self._look = AsyncEvent()  # set: the keeper looks at the holds again at once
        self._pauses = AsyncPauses()  # the flows' pauses (`Sleep`): close() ends them
        self._spawner = AsyncSpawner("tenure-watchdog")
        self._callbacks = AsyncSpawner("tenure-callbacks")
        # The background flows started: one yielded again in `Background` after an
        # interrupt (perhaps already spawned) runs once (`_background`).
        self._started: weakref.WeakSet[Generator[Any, Any, Any]] = weakref.WeakSet()
        self._started_mutex = threading.Lock()
        self._waiting = set()
        self._waiters_left = AsyncEvent()
        self.ctx.holds.poke = self._look.set
        self.ctx.dispatch = self._dispatch
        self.backend.settle = self._background  # a Call.settle undo, in the background

    def owner(self) -> str:
        """The calling thread's or task's owner id on this client."""
        if self.ctx.forked():
            # The parent's threads, tasks and sockets are not ours: start over without them.
            self._start()
        return async_current_owner(self.ctx.identity)

    async def perform(self, effect: Any) -> Any:
        match effect:
            case Call():
                return await self.backend.call(effect)
            case WatchHolds():  # second: every grant yields it, after its Call
                if self._keeper is None:
                    await self._start_keeper()
                return None
            case Command(args=args):
                return await self.backend.execute(*args)
            case Wait(channel=channel, seconds=seconds, patience=patience):
                return await self._listener.wait(channel, seconds, patience)
            case Subscribe(
                channel=channel, wake_all=wake_all, sharded=sharded, since=since, alias=alias
            ):
                return await self._listener.subscribe(
                    channel, wake_all, sharded, since, alias, effect.relay
                )
            case Unsubscribe(channel=channel, pass_on=pass_on, lease=lease):
                return await self._listener.unsubscribe(channel, pass_on, lease)
            case Drain(channel=channel):
                return await self._listener.drain(channel)
            case Background(flow=flow):
                self._spawner.spawn(self._background, flow)
                return None
            case Settle(channel=channel, unsure=unsure, rounds=rounds):
                return await self.backend.settle_count(channel, unsure, rounds)
            case Sleep(seconds=seconds):
                return await self._pauses.sleep(seconds)
        raise TypeError(f"unknown effect {effect!r}")

    def _relay(self, call: Call) -> None:
        """Pass a wake-up this client cannot use on to another client, in the background
        (`tenure.core.parking`, aliases)."""
        if not self.closing:
            self._spawner.spawn(self._background, just(call))

    async def _background(self, flow: Generator[Any, Any, Any]) -> None:
        # A flow whose clean-up was interrupted as it asked for this yields the same
        # `Background` again: whether the first was spawned, it cannot know. It runs once.
        # (Here no signal handler runs: a thread of its own, or a task that has not awaited.)
        with self._started_mutex:
            if flow in self._started:
                return
            self._started.add(flow)
        try:
            await self.run(flow)
        except Exception as error:  # closed, the server away, or a bug: never raise here
            if self.closing:
                log.debug("tenure background clean-up stopped: %s", error)
            elif isinstance(error, BackendError):  # the server away (a wake-up's pass-on)
                log.warning("tenure background clean-up failed: %s", error)
            else:
                log.exception("tenure background clean-up failed")

    # ------------------------------------------------------------- the hold keeper
    async def _start_keeper(self) -> None:
        async with self._keeper_mutex:
            if self._keeper is None and not self.closing:
                self._keeper = self._spawner.spawn(self._keep)

    async def _keep(self) -> None:
        """The client's one loop over its holds (docs/internals.md, "Watchdog").

        Every ``watchdog_timeout / 3`` it starts a renewal pass of the watchdog holds (in
        the background: a slow server must not delay what follows) and stops renewing the
        holds of owners that ended. Between passes it wakes when a hold's lease surely runs
        out on the local monotonic clock (`Hold.valid_until`) and reports that hold
        lost at once, with no I/O: however long a renewal or the network hangs.
        """
        interval = self.ctx.watchdog_timeout / 3
        renewal_at = time.monotonic() + interval
        renewing: AsyncTask | None = None
        while not self.closed:
            now = time.monotonic()
            if now >= renewal_at:
                renewal_at = now + interval
                self._drop_orphans()
                if renewing is None or renewing.done():
                    renewing = self._spawner.spawn(self._renewal_pass)
            self._report(self.ctx.holds.expired(now))
            report_doubts(self.ctx, now)  # jeopardy on the clock (core.watchdog)
            self._look.clear()
            look_at = self.ctx.holds.plan(renewal_at)
            await self._look.wait(look_at - time.monotonic())

    async def _register(self) -> None:
        """Name this client's owners (``inspect()``, ``tenure status``): core.watchdog."""
        try:
            await self.run(register(self.ctx))
        except Exception:  # closed meanwhile; the next pass writes it again
            log.debug("tenure client registration skipped", exc_info=True)

    async def _renewal_pass(self) -> None:
        try:
            # In a cluster one script runs on one slot: batches never mix slots.
            flow = renew(self.ctx, by_slot=self.route.cluster)
            self._report(await self.run(observe.renewal(flow)))
        except Exception:  # the next pass retries; the clock still reports expiries
            if not self.closing:
                log.exception("tenure watchdog pass failed")
        if len(self.ctx.holds.waiters):
            # Fair-lock waiters' queue entries (docs/internals.md, "Waiter liveness"): same pass.
            try:
                await self.run(refresh_waiters(self.ctx, by_slot=self.route.cluster))
            except Exception:  # the next pass retries; an entry outlives two missed passes
                if not self.closing:
                    log.exception("tenure fair waiter refresh failed")
        await self._register()  # after the renewal: it never delays one

    def _drop_orphans(self) -> None:
        for hold in self.ctx.holds.orphans(self.ctx.identity.alive):
            log.warning(
                "lock %r: owner %s ended while holding it; no longer renewed, it expires "
                "with its lease", hold.key, hold.owner,
            )

    def _report(self, lost: list[Hold]) -> None:
        for hold in lost:
            observe.hold_lost(hold)  # logged (WARNING) and counted
        report_lost(lost)  # the core tells each hold's lock (docs/internals.md, "Watchdog")

    def _dispatch(self, callback: Callable[[], None], what: str) -> None:
        """Run a user callback away from the keeper: its own thread (sync) or task."""
        self._callbacks.spawn(_call_logged, callback, what)

    async def close(self) -> None:
        """Stop the keeper and the listener; holds are not released (they expire).

        The callers waiting are woken first (ClientClosedError), and the clean-up of their
        flows still runs, for up to the socket timeout: a FairLock waiter or an election
        candidate leaves its queue. Left there, its entry kept the next live waiter waiting
        until it ran out (a FairLock's ``watchdog_timeout / 3``; a candidate elected in
        passing, the whole lease). Then no I/O any more, and the connections go back."""
        if self.closing:
            return
        self.closing = True  # no flow starts any more
        await self._listener.close()  # wakes the waiters
        until = time.monotonic() + (self._timeout or self.ctx.watchdog_timeout)
        while self._waiting and (left := until - time.monotonic()) > 0:
            self._waiters_left.clear()
            if self._waiting:  # (the last may have ended before the clear)
                await self._waiters_left.wait(left)
        self.closed = True
        # A flow in a retry's pause (a reconcile, a permit's release) goes on at once, to
        # ClientClosedError; not while closing: a waiter's give-up may still retry then.
        self._pauses.end()
        self._look.set()
        if self._keeper is not None:
            await self._keeper.stop(5.0)
        await self.backend.close()


class AsyncReleasing(Coroutine):  # type: ignore[type-arg]
    """A release's coroutine in the asyncio API (what ``release()`` returns): a task made
    of it (``create_task``, ``gather``, ``wait_for``) and cancelled before it ever ran
    still releases, in the background (reviewer R5, S3): the caller called release(), and
    the owner was fixed then. Awaited at once, it is the coroutine itself."""

    __slots__ = ("_flow", "_lock", "_runner", "_running")

    def __init__(
        self, runner: AsyncDriver, lock: Any, flow: Generator[Any, Any, Any], running: Any
    ) -> None:
        self._runner, self._lock, self._flow, self._running = runner, lock, flow, running

    def __await__(self) -> Generator[Any, None, Any]:
        return self._running.__await__()  # type: ignore[no-any-return]

    def send(self, value: Any) -> Any:
        return self._running.send(value)

    def throw(self, kind: Any, value: Any = None, tb: Any = None) -> Any:
        if inspect.getgeneratorstate(self._flow) == inspect.GEN_CREATED:
            # Thrown in before the first step (a task cancelled before it ran): nothing
            # ran; the flow runs in the background, once (`AsyncDriver._release_later`).
            self._runner._spawner.spawn(self._runner._release_later, self._lock, self._flow)
        if value is None and tb is None:
            return self._running.throw(kind)
        return self._running.throw(kind, value, tb)

    def close(self) -> None:
        self._running.close()

    def __getattr__(self, name: str) -> Any:  # cr_frame, cr_await...: the coroutine's
        return getattr(self._running, name)

    def __repr__(self) -> str:
        return f"<release of {self._lock!r}>"


async def _call_logged(callback: Callable[[], None], what: str) -> None:
    call_now(callback, what)


class AsyncCompositeRunner(AsyncDriver):
    """Runs MultiLock/RedLock flows: each member flow on that member's own runner."""

    def __init__(self, runners: Sequence[AsyncRunner], workers: int) -> None:
        self._runners = list(runners)
        self._spawner = AsyncSpawner("tenure-composite", workers)
        self._started = weakref.WeakSet()
        self._started_mutex = threading.Lock()
        self._waiting = set()  # (a member's flow waits on its own runner)
        self._waiters_left = AsyncEvent()

    def owners(self) -> tuple[str, ...]:
        """The caller's owner id on each member's client."""
        return tuple(runner.owner() for runner in self._runners)

    owner = owners  # `release_by()`'s `CALLER`: the composite's owner is the tuple

    async def perform(self, effect: Any) -> Any:
        match effect:
            case OnMember(index=index, flow=flow):
                return await self._runners[index].run(flow)
            case Spawn(index=index, flow=flow):
                return self._spawner.spawn(self._runners[index].run, flow)
            case WaitAny(handles=handles, seconds=seconds):
                return (await async_wait_any(handles, seconds))[1]  # type: ignore[arg-type]
            case Join(handles=handles, seconds=seconds):
                running = [h for h in handles if not isinstance(h, Finished)]
                return await async_join(running, seconds)  # type: ignore[arg-type]
            case Together(flows=flows, seconds=seconds, enough=enough):
                return await self._together(flows, seconds, enough)
            case Sleep(seconds=seconds):
                return await async_sleep(seconds)
        raise TypeError(f"unknown effect {effect!r}")

    async def _together(
        self,
        flows: Sequence[tuple[int, Generator[Any, Any, Any]]],
        seconds: float,
        enough: Callable[[], bool],
    ) -> list[Any]:
        """Carry out `Together`: rounds of "send every script, then read every
        reply", one connection per member, no thread or task per member.

        A flow whose reply is late or that asks for an effect that waits goes on in the
        background (the composite's spawner), as does every flow under way when the caller
        is cancelled or interrupted: a script already sent is always read to its end, and
        one perhaps sent (the interrupt came as it went) is never sent again: its flow gets
        an error at its yield, so its clean-up reconciles (a release sent twice would take
        off two holds of a member held twice). Those flows' outcomes are never seen by the
        caller's flow (it gets the interrupt, not the handles): they end quietly (`_left`).
        """
        deadline = time.monotonic() + seconds
        handles: list[Any] = [None] * len(flows)
        current: list[tuple[int, int, Generator[Any, Any, Any], Any]] = []
        sent: list[tuple[int, int, Generator[Any, Any, Any], Sent]] = []
        steps: list[tuple[int, int, Generator[Any, Any, Any], Any]] = []
        # The step whose script is being sent (``steps[0]``, then perhaps in ``sent``):
        going: tuple[int, int, Generator[Any, Any, Any], Any] | None = None
        out: Sent | None = None
        try:
            for slot, (index, flow) in enumerate(flows):
                await self._advance(handles, current, slot, index, flow, None, None)
            while current:
                steps, current = current, []
                while steps:
                    slot, index, flow, effect = steps[0]
                    runner = self._runners[index]
                    if (
                        type(effect) not in (Call, Command)
                        or runner.backend.suspect
                        or time.monotonic() >= deadline
                    ):  # it may wait (or hang connecting): in the background, awaited below
                        steps.pop(0)
                        handles[slot] = self._spawner.spawn(runner.run, resumed(flow, effect))
                        continue
                    out = value = None
                    error: BaseException | None = None
                    going = steps[0]  # (a subscript and a store: no handler runs between)
                    try:
                        out = await runner.backend.send(effect)
                        if out is None:  # a cluster, or replicas: one command at a time
                            value = await runner.perform(effect)
                    except RedisError as failure:
                        error = backend_error(failure)
                    except Exception as failure:
                        error = failure
                    steps.pop(0)
                    if out is not None:
                        sent.append((slot, index, flow, out))
                        going = None
                    else:
                        going = None
                        await self._advance(handles, current, slot, index, flow, value, error)
                while sent:
                    slot, index, flow, reading = sent[0]
                    left = deadline - time.monotonic()
                    # 0: only a reply already in; None: no limit but the socket timeout
                    wait = 0.0 if left <= 0 or enough() else None if math.isinf(left) else left
                    error = None
                    try:
                        value = await self._runners[index].backend.receive(reading, wait)
                    except NotReady:  # enough answers, or out of time: read on in the background
                        sent.pop(0)
                        handles[slot] = self._spawner.spawn(
                            self._receive_later, index, reading, flow
                        )
                        continue
                    except RedisError as failure:
                        value, error = None, backend_error(failure)
                    except Exception as failure:
                        value, error = None, failure
                    except BaseException:  # the reply is lost with its connection
                        sent.pop(0)
                        lost = BackendError("interrupted while waiting for the reply")
                        handles[slot] = self._spawner.spawn(
                            self._left, self._runners[index].run, continued(flow, None, lost)
                        )
                        # Given up here if the interrupt came as `receive` began, before
                        # its own clean-up's try (else a no-op).
                        await self._runners[index].backend.abandon(reading)
                        raise
                    sent.pop(0)
                    await self._advance(handles, current, slot, index, flow, value, error)
            # Members left to the background count too, until enough answered or time ran out.
            running = {h for h in handles if not isinstance(h, Finished)}
            while running and not enough():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                running = (await async_wait_any(running, left))[1]
        finally:
            # (Only when cut short: otherwise every list is empty, and nothing is going.)
            for slot, index, flow, reading in sent:
                handles[slot] = self._spawner.spawn(
                    self._left, self._receive_later, index, reading, flow
                )
            if going is not None and not any(step[2] is going[2] for step in sent):
                slot, index, flow, _ = going
                if out is not None:  # sent: its reply is read
                    handles[slot] = self._spawner.spawn(
                        self._left, self._receive_later, index, out, flow
                    )
                else:  # perhaps sent (a signal handler's exception in or after the send)
                    lost = BackendError("interrupted while sending the script")
                    handles[slot] = self._spawner.spawn(
                        self._left, self._runners[index].run, continued(flow, None, lost)
                    )
            for slot, index, flow, effect in [*steps, *current]:
                if going is None or flow is not going[2]:  # not sent yet
                    handles[slot] = self._spawner.spawn(
                        self._left, self._runners[index].run, resumed(flow, effect)
                    )
        return handles

    async def _advance(
        self, handles: list[Any], steps: list[Any], slot: int, index: int,
        flow: Generator[Any, Any, Any], value: Any, error: BaseException | None,
    ) -> None:
        """Run ``flow`` on to its next effect that needs the server (quick local effects
        carried out on the spot), or to its end (its handle then `Finished`).

        An exception landing after the flow's step (a signal handler's, between two steps:
        the flow waits at its yield, and its effect is perhaps lost) goes on to the caller;
        the flow goes on in the background, with its effect or with that exception (its
        clean-up runs), unless it is in ``steps`` already (`_together` hands those on)."""
        runner = self._runners[index]
        effect: Any = None
        try:
            while True:
                effect = None
                try:
                    effect = flow.throw(error) if error is not None else flow.send(value)
                except StopIteration as stop:
                    handles[slot] = Finished(stop.value)
                    return
                except Exception as failure:
                    if inspect.getgeneratorstate(flow) == inspect.GEN_SUSPENDED:
                        raise  # not the flow's: it came after its step (below)
                    handles[slot] = Finished(error=failure)
                    return
                if not isinstance(effect, WatchHolds | Background):
                    steps.append((slot, index, flow, effect))
                    return
                try:
                    value, error = await runner.perform(effect), None
                except Exception as failure:
                    value, error = None, failure
        except BaseException as cut:
            if inspect.getgeneratorstate(flow) == inspect.GEN_SUSPENDED and not any(
                step[2] is flow for step in steps
            ):
                rest = continued(flow, None, cut) if effect is None else resumed(flow, effect)
                handles[slot] = self._spawner.spawn(self._left, runner.run, rest)
            raise

    async def _left(self, work: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """``work(*args)``, a member's flow that goes on in the background after `_together`
        was cut short: the caller's flow never sees how it ends (its own clean-up runs), so
        an error is only logged (DEBUG), not left in a task nobody reads."""
        try:
            await work(*args)
        except Exception as error:
            log.debug("tenure: a member's flow left to the background ended: %r", error)

    async def _receive_later(self, index: int, out: Sent, flow: Generator[Any, Any, Any]) -> Any:
        runner = self._runners[index]
        error: BaseException | None = None
        value: Any = None
        try:
            value = await runner.backend.receive(out, None)
        except RedisError as failure:
            value, error = None, backend_error(failure)
        except BaseException as failure:
            value, error = None, failure
        return await runner.run(continued(flow, value, error))

    def close(self) -> None:
        """Stop the worker threads of the sync driver once their work is done."""
        self._spawner.close()
