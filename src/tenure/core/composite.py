"""MultiLock and RedLock, sans I/O: every decision of both, as flows over member flows.

A composite flow yields composite effects (`tenure.core.effects`): run a member's flow
on that member's runner (`OnMember`), run member flows side by side with their
scripts sent together (`Together`: N members cost about one round trip, with no
thread or task per member), start one in the background (`Spawn`), wait for them
(`Join`), sleep. The drivers only carry these out. Here: the rounds and member
leases of MultiLock, RedLock's concurrent attempts, quorum, clock drift and validity, the
release of late grants, the retry delay, the verdict of a best-effort release, and the
roll-up of member losses into a composite loss.

Sources: Redis, "Distributed Locks with Redis" (the Redlock algorithm,
https://redis.io/docs/latest/develop/use/patterns/distributed-locks/); Redisson's
``RedissonMultiLock`` / ``RedissonRedLock``; M. Kleppmann, "How to do distributed locking"
(2016) for what Redlock does not guarantee.
"""

from __future__ import annotations

import inspect
import logging
import math
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tenure.core.args import check_lease, check_positive, check_wait
from tenure.core.clock import validity
from tenure.core.effects import (
    CLEAN_UP_TRIES,
    Background,
    CompositeFlow,
    Deadline,
    Flow,
    Handle,
    Join,
    OnMember,
    Sleep,
    Spawn,
    Together,
    began,
    just,
)
from tenure.core.holds import LossScope
from tenure.core.lock import LockCore, LossCallback
from tenure.errors import BackendError, LockLostError, NotOwnedError, ServerError

log = logging.getLogger("tenure")

RETRY_DELAY = (0.005, 0.05)
"""Random sleep (seconds) between RedLock attempts: desynchronises competing clients."""
MULTI_ROUND_PER_MEMBER = 1.5
"""Without a timeout a MultiLock round lasts a random 1x to 2x this many seconds per member
(Redisson ``lock()``: 1500 ms per lock); then it lets go and starts over, so two composites
taking shared members in different orders cannot deadlock."""
DEFAULT_NODE_TIMEOUT = 0.1
"""Default RedLock per-node timeout (seconds): small next to the lease, as the Redlock page asks."""


def quorum(members: int) -> int:
    """The majority RedLock needs: N // 2 + 1."""
    return members // 2 + 1


def retry_delay(remaining: float) -> float:
    """A random pause before the next RedLock attempt, never past the deadline."""
    return max(0.0, min(random.uniform(*RETRY_DELAY), remaining))


def multi_round(wait: float, members: int) -> float:
    """Seconds one MultiLock round may take: the whole wait, or a random slice if unbounded."""
    if math.isfinite(wait):
        return wait
    base = MULTI_ROUND_PER_MEMBER * members
    return random.uniform(base, 2 * base)


def multi_member_lease(lease: float | None, round_wait: float) -> float | None:
    """Lease for each member: at least 2 x the round's wait, so the first members taken
    cannot expire while the later ones are waited for (Redisson ``RedissonMultiLock``)."""
    if lease is None:
        return None
    return max(lease, 2 * round_wait)


Caller = tuple[str, ...]
"""A composite's caller: the owner id the caller has on each member's client."""


@dataclass(eq=False)
class Acquisition:
    """One acquisition of a composite by one caller: which member holds it has."""

    owners: Caller
    members: dict[int, str] = field(default_factory=dict)
    """Member index -> owner, for every member believed held (late replies included)."""
    lost_members: set[int] = field(default_factory=set)
    validity: float | None = None
    attempts: list[Handle] = field(default_factory=list)
    """In-flight member attempts (RedLock), awaited briefly at release."""
    lost: bool = False
    settled: bool = False
    """True once the attempt failed or the composite was released: a member granted after
    that (a reply that came back late) must be released at once."""
    scopes: list[LossScope] = field(default_factory=list)
    """Bodies running under this acquisition, told when it is lost."""


class CompositeCore:
    """Shared state of one MultiLock or RedLock: acquisitions per caller and loss roll-up.

    A member hold lost (its member's watchdog found it gone, or its lease surely ran out
    without renewal) counts against every acquisition that holds that member. A MultiLock
    (``needed`` = all members) is lost at the first such member; a RedLock (``needed`` =
    quorum) once fewer than a majority of its members are still held — member watchdogs renew
    within each member's lease, so "a majority renewed within validity" is what keeps it.
    Then ``lost`` turns True and ``on_lost()`` is called, once per acquisition.
    """

    kind = "composite"

    def __init__(
        self, cores: Sequence[LockCore], needed: int, on_lost: LossCallback | None
    ) -> None:
        if not cores:
            raise ValueError(f"a {self.kind} needs at least one member lock")
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        self.cores = list(cores)
        self.needed = needed
        self.on_lost = on_lost
        self._mutex = threading.Lock()
        self._held: dict[Caller, list[Acquisition]] = {}
        self._lost: set[Caller] = set()
        self.on_doubt: LossCallback | None = None
        """Called with no argument when an acquisition goes in doubt (the front binds it)."""
        for core in self.cores:
            core.add_loss_listener(self._member_lost)
            core.add_doubt_listener(self._member_doubt)

    @property
    def name(self) -> str:
        return f"{self.kind}({', '.join(core.name for core in self.cores)})"

    # ------------------------------------------------------------ bookkeeping
    def start(self, owners: Caller) -> Acquisition:
        return Acquisition(owners)

    def granted(self, acq: Acquisition, index: int) -> bool:
        """Record member ``index`` granted; False if the attempt is already settled (the
        caller must then release that member)."""
        with self._mutex:
            if acq.settled:
                return False
            acq.members[index] = acq.owners[index]
            return True

    def abandon(self, acq: Acquisition) -> dict[int, str]:
        """Settle a failed attempt; the members to release now."""
        with self._mutex:
            acq.settled = True
            return dict(acq.members)

    def conclude(self, acq: Acquisition, validity: float | None) -> dict[int, str] | None:
        """Decide an attempt atomically with late grants: None when it succeeded (recorded
        for release and loss reporting), else the members to release now."""
        with self._mutex:
            held = len(acq.members)
            if held >= self.needed and (validity is None or validity > 0):
                acq.validity = validity
                self._held.setdefault(acq.owners, []).append(acq)
                self._lost.discard(acq.owners)
                return None
            acq.settled = True
            return dict(acq.members)

    def has(self, acq: Acquisition, index: int) -> bool:
        with self._mutex:
            return index in acq.members

    def held_count(self, acq: Acquisition) -> int:
        with self._mutex:
            return len(acq.members)

    def forget(self, owners: Caller) -> Acquisition | None:
        """Forget the caller's latest acquisition (it is being released); None if none."""
        into: list[Acquisition] = []
        self.forget_into(owners, into)
        return into[0] if into else None

    def forget_into(self, owners: Caller, into: list[Acquisition]) -> None:
        """`forget()`, the acquisition put in ``into`` (left empty if none). No call between
        the two, where a signal handler could run: a release cut short has it in ``into``
        once it is out of the table."""
        with self._mutex:
            stack = self._held.get(owners)
            if stack:
                into[:] = stack[-1:]
                del stack[-1]
                if not stack:
                    del self._held[owners]
                into[0].settled = True

    def current(self, owners: Caller) -> Acquisition | None:
        with self._mutex:
            stack = self._held.get(owners)
            return stack[-1] if stack else None

    def is_lost(self, owners: Caller) -> bool:
        with self._mutex:
            return owners in self._lost

    # ------------------------------------------------ validity, jeopardy, scopes
    def _member_validity(self, acq: Acquisition) -> list[float]:
        with self._mutex:
            members = [(i, o) for i, o in acq.members.items() if i not in acq.lost_members]
        return sorted((self.cores[i].valid_for(o) for i, o in members), reverse=True)

    def valid_for(self, owners: Caller) -> float:
        """Seconds the caller's acquisition is surely still valid on the local clock: the
        ``needed``-th longest member validity (MultiLock: the shortest; RedLock: the
        quorum's); 0.0 when it holds none or it was lost. No I/O."""
        acq = self.current(owners)
        if acq is None or acq.lost:
            return 0.0
        valid = self._member_validity(acq)
        return valid[self.needed - 1] if len(valid) >= self.needed else 0.0

    def checkpoint(self, owners: Caller) -> None:
        """LockLostError when the caller's acquisition was lost or ran out, NotOwnedError
        when it holds none. No I/O."""
        acq = self.current(owners)
        if acq is None:
            self._held_members(owners)  # raises LockLostError or NotOwnedError
            return
        if acq.lost or self.valid_for(owners) <= 0:
            raise LockLostError(f"{self.name}: the caller's acquisition was lost or ran out")

    def in_doubt(self, owners: Caller) -> bool:
        """True while the acquisition still holds but fewer than ``needed`` of its members
        are held without doubt (a renewal failed on the others)."""
        acq = self.current(owners)
        if acq is None or acq.lost or self.valid_for(owners) <= 0:
            return False
        with self._mutex:
            members = [(i, o) for i, o in acq.members.items() if i not in acq.lost_members]
        sure = sum(not self.cores[i].in_doubt(o) for i, o in members)
        return sure < self.needed

    def watch(self, owners: Caller, scope: LossScope) -> bool:
        """Tell ``scope`` when the caller's latest acquisition is lost; False if there is
        none or it was lost already."""
        with self._mutex:
            stack = self._held.get(owners)
            if not stack or stack[-1].lost:
                return False
            stack[-1].scopes.append(scope)
            return True

    def unwatch(self, owners: Caller, scope: LossScope) -> None:
        with self._mutex:
            for acq in self._held.get(owners, []):
                if scope in acq.scopes:
                    acq.scopes.remove(scope)

    # ---------------------------------------------------------------- flows
    def acquire(
        self,
        owners: Caller,
        blocking: object,
        timeout: object,
        lease_time: object,
        max_hold: object = None,
    ) -> CompositeFlow[bool]:
        """Acquire the composite. Arguments are checked now, before any I/O. ``max_hold``:
        every member hold is renewed for at most that many seconds after its grant
        (`LockCore.capped()`)."""
        flow = self._acquire(owners, check_wait(blocking, timeout), check_lease(lease_time))
        if max_hold is None:
            return flow
        return self._capped(owners, check_positive(max_hold, "max_hold"), flow)

    def _capped(self, owners: Caller, cap: float, flow: CompositeFlow[bool]) -> CompositeFlow[bool]:
        for core, owner in zip(self.cores, owners, strict=True):
            core._caps[owner] = cap
        try:
            return (yield from flow)
        finally:
            for core, owner in zip(self.cores, owners, strict=True):
                core._caps.pop(owner, None)

    def _acquire(self, owners: Caller, wait: float, lease: float | None) -> CompositeFlow[bool]:
        raise NotImplementedError

    release_wait: float = math.inf
    """Seconds the members' releases are waited for (RedLock: ``node_timeout``)."""

    def release(self, owners: Caller) -> CompositeFlow[None]:
        """Forget the caller's latest acquisition and release its members side by side
        (`Together`, for `release_wait`); the verdict is the kind's (`_released()`).

        The caller called release(): it meant to let go (reviewer R5, S3). An exception
        that cuts this short (a signal handler's, a cancellation) must not leave members
        held and renewed for ever: a member's release that began finishes itself
        (`tenure.core.lock.LockCore.release()`) or its driver does; the others are
        started in the background (`_release_unbegun`). Cut short as the acquisition was
        being forgotten, it is forgotten here and every member released so. (All in this
        flow's own ``try``, no flow it delegates to first: one cut short as it begins
        would count as begun.)
        """
        taken: list[Acquisition] = []
        releases: list[tuple[int, Flow[None]]] = []
        try:
            # (Every step in the try: an interrupt after any of them is seen below.)
            self.forget_into(owners, taken)
            if not taken:
                raise NotOwnedError(f"{self.name} is not held by the caller")
            if not taken[0].members:
                raise NotOwnedError(f"{self.name}: no member was held")
            members = sorted(taken[0].members.items())
            releases = [(i, self.cores[i].release(owner)) for i, owner in members]
            handles = yield Together(releases, self.release_wait)
        except GeneratorExit:
            raise
        except BaseException as cut:
            if not taken and not isinstance(cut, NotOwnedError):
                self.forget_into(owners, taken)
            ended = [(i, flow, cut) for i, flow in releases]
            late = (yield from self._release_unbegun(taken[0].members, ended)) if taken else None
            if late is not None:
                raise late from cut
            raise
        if any(h.done() and h.exception() is not None for h in handles):
            # A member's release cut short as it began (a signal handler's exception as
            # `_together` started it; the driver took it for the member's error).
            finished = [
                (i, flow, h.exception() if h.done() else None)
                for (i, flow), h in zip(releases, handles, strict=True)
            ]
            yield from self._release_unbegun(taken[0].members, finished)
        yield from self._released(taken[0], handles)

    def _released(self, acq: Acquisition, handles: list[Handle]) -> CompositeFlow[None]:
        """The verdict of the release of ``acq``'s members (``handles``, in index order)."""
        raise NotImplementedError

    def owned(self, owners: Caller) -> CompositeFlow[bool]:
        raise NotImplementedError

    def extend(self, owners: Caller, additional_time: object) -> CompositeFlow[None]:
        """Add ``additional_time`` seconds to every member hold of the caller's latest
        acquisition (each member as `LockCore.extend()`). Checked now, before any I/O."""
        add = check_positive(additional_time, "additional_time")
        return self._extend(owners, add)

    def _extend(self, owners: Caller, add: float) -> CompositeFlow[None]:
        raise NotImplementedError

    def _held_members(self, owners: Caller) -> dict[int, str]:
        acq = self.current(owners)
        if acq is None:
            if self.is_lost(owners):
                raise LockLostError(f"{self.name}: the caller's acquisition was lost")
            raise NotOwnedError(f"{self.name} is not held by the caller")
        with self._mutex:
            return dict(acq.members)

    def release_member(self, index: int, owner: str, quiet: bool = True) -> Flow[None]:
        """Release one member hold; with ``quiet``, a failure is only logged (a member
        whose server did not answer finishes the release in the background once it does,
        `tenure.core.lock.LockCore.release()`; one that refused it keeps the hold to its
        lease end)."""
        try:
            yield from self.cores[index].release(owner)
        except Exception as error:
            if not quiet:
                raise
            log.warning("%s: releasing member %d failed: %s", self.name, index, error)

    def _release_unbegun(
        self,
        held: dict[int, str],
        flows: Sequence[tuple[int, Flow[Any], BaseException | None]],
    ) -> CompositeFlow[BaseException | None]:
        """Release in the background the members of ``held`` whose release never began:
        not made, not started, or ended by the error given with it as it began
        (`tenure.core.effects.began`).

        Each goes on its member's runner as `Background` (run once however often it was
        yielded), yielded again while interrupts are thrown in at that yield: the last such
        interrupt is returned, for the caller to raise once its clean-up ran."""
        begun = {
            i
            for i, flow, error in flows
            if inspect.getgeneratorstate(flow) != inspect.GEN_CREATED
            and (error is None or began(flow, error))
        }
        late: BaseException | None = None
        for index, owner in sorted(held.items()):
            if index in begun:
                continue
            flow = self.release_member(index, owner)
            for _ in range(CLEAN_UP_TRIES):
                try:
                    yield OnMember(index, just(Background(flow)))
                    break
                except GeneratorExit:
                    raise
                except BaseException as interrupt:  # perhaps started: it runs once
                    late = interrupt
        return late

    # ---------------------------------------------------------------- loss
    def _member_doubt(self, core: LockCore, owner: str) -> None:
        """A member hold went in doubt: an acquisition whose members held without doubt
        fall below ``needed`` because of it goes in doubt (``on_doubt``, once per
        crossing)."""
        crossed = 0
        with self._mutex:
            acquisitions = [acq for stack in self._held.values() for acq in stack]
            held = [
                (acq, [(i, o) for i, o in acq.members.items() if i not in acq.lost_members])
                for acq in acquisitions
                if not acq.lost
            ]
        for _acq, members in held:
            hit = sum(self.cores[i] is core and o == owner for i, o in members)
            if not hit:
                continue
            sure = sum(not self.cores[i].in_doubt(o) for i, o in members)
            if sure < self.needed <= sure + hit:
                crossed += 1
        for _ in range(crossed):
            if self.on_doubt is not None:
                core.ctx.deliver(self.on_doubt, f"on_doubt callback of {self.name}")

    def _member_lost(self, core: LockCore, owner: str) -> None:
        report = 0
        scopes: list[LossScope] = []
        with self._mutex:
            for owners, stack in self._held.items():
                for acq in stack:
                    for index, member_owner in acq.members.items():
                        if self.cores[index] is core and member_owner == owner:
                            acq.lost_members.add(index)
                    left = len(acq.members) - len(acq.lost_members)
                    if not acq.lost and acq.lost_members and left < self.needed:
                        acq.lost = True
                        self._lost.add(owners)
                        report += 1
                        scopes += acq.scopes
                        acq.scopes = []
        for scope in scopes:
            scope.lost()
        for _ in range(report):
            if self.on_lost is not None:
                core.ctx.deliver(self.on_lost, f"on_lost callback of {self.name}")


class MultiLockCore(CompositeCore):
    """All members or none (Redisson ``RedissonMultiLock``).

    A round takes the first member (waiting for it), then tries all the others at once (one
    round trip when they are free), then waits in order for each one refused. Taking the
    first member first keeps the progress of in-order taking: of callers contending for the
    same members, the first member's holder is the one that goes on. If a member cannot be
    taken in the round's wait, the ones
    taken are released and a new round starts while the wait allows. Without a timeout a
    round lasts a random 1.5-3 s per member, so two multi-locks sharing members in different
    orders cannot deadlock. A member with a lease gets at least 2 x the round's wait (early
    members must not expire while later ones are awaited); once all are held, each member's
    expiry is set back to the lease asked for.
    """

    kind = "MultiLock"

    def __init__(self, cores: Sequence[LockCore], on_lost: LossCallback | None) -> None:
        super().__init__(cores, len(cores), on_lost)

    def _acquire(self, owners: Caller, wait: float, lease: float | None) -> CompositeFlow[bool]:
        deadline = Deadline(wait)
        while True:
            round_deadline = Deadline(min(multi_round(wait, len(owners)), deadline.remaining()))
            member_lease = multi_member_lease(lease, max(0.0, round_deadline.remaining()))
            acq = self.start(owners)
            taken = True
            try:
                # The first member in order, waiting for it: of the multi-locks over these
                # members in this order, only its holder goes on, so two callers never split
                # the members between them (the same progress as taking all in order)...
                first_wait = max(0.0, round_deadline.remaining())
                member = self.cores[0]._acquire(owners[0], first_wait, member_lease)
                taken = bool((yield OnMember(0, member)))
                if taken:
                    self.granted(acq, 0)
                    # ...then one try of every other member at once: one round trip for all
                    # when they are free, instead of one each...
                    rest = [(i, self._take(acq, i, member_lease)) for i in range(1, len(owners))]
                    yield from self._together(rest)
                # ...then, in order, each member refused, waiting for it in this round.
                for index, owner in enumerate(owners):
                    if not taken:
                        break
                    if self.has(acq, index):
                        continue
                    member_wait = max(0.0, round_deadline.remaining())
                    if member_wait <= 0:  # its one try is made
                        taken = False
                        break
                    member = self.cores[index]._acquire(owner, member_wait, member_lease)
                    if not (yield OnMember(index, member)):
                        taken = False
                        break
                    self.granted(acq, index)
                if taken and lease is not None and member_lease != lease:
                    expiries = [
                        (i, core.expire(lease, owners[i])) for i, core in enumerate(self.cores)
                    ]
                    yield from self._together(expiries)  # all at once
            except GeneratorExit:
                raise
            except BaseException:  # cancelled or failed: the release must still happen
                yield from self._release_all(self.abandon(acq), shielded=True)
                raise
            if taken:
                self.conclude(acq, None)
                return True
            yield from self._release_all(self.abandon(acq))
            if deadline.remaining() <= 0:
                return False

    @staticmethod
    def _together(flows: list[tuple[int, Flow[Any]]]) -> CompositeFlow[None]:
        """Run member ``flows`` side by side until all are done; raise the first error."""
        if not flows:
            return
        handles = yield Together(flows, math.inf)
        running = [handle for handle in handles if not handle.done()]
        if running:
            yield Join(running)
        for handle in handles:
            error = handle.exception()
            if error is not None:
                raise error

    def _take(self, acq: Acquisition, index: int, lease: float | None) -> Flow[bool]:
        """One try of member ``index``, run on its runner; a grant that comes after the
        round was given up (the caller cancelled meanwhile) is released at once."""
        owner = acq.owners[index]
        if not (yield from self.cores[index]._acquire(owner, 0.0, lease)):
            return False
        if not self.granted(acq, index):
            yield from self.release_member(index, owner)
        return True

    def _release_all(self, held: dict[int, str], shielded: bool = False) -> CompositeFlow[None]:
        """Release ``held`` members, quietly; ``shielded``: on an error path, in the
        background and waited for whatever happens to the caller."""
        if shielded:
            tasks = []
            for index, owner in sorted(held.items()):
                tasks.append((yield Spawn(index, self.release_member(index, owner))))
            yield Join(tasks)
            return
        for index, owner in sorted(held.items()):
            yield OnMember(index, self.release_member(index, owner))

    def _released(self, acq: Acquisition, handles: list[Handle]) -> CompositeFlow[None]:
        """Every member released (all at once), even if some failed: raise the first
        failure (the others attached as notes). (`release()`: NotOwnedError if the caller
        holds no acquisition.)"""
        running = [handle for handle in handles if not handle.done()]
        if running:
            yield Join(running)
        errors = [e for e in (h.exception() for h in handles) if isinstance(e, Exception)]
        first = release_outcome(self.kind, errors)
        if first is not None:
            raise first

    def _extend(self, owners: Caller, add: float) -> CompositeFlow[None]:
        """Extend every member, even if some fail; raise the first failure (the others
        attached as notes)."""
        errors: list[BaseException] = []
        for index, owner in sorted(self._held_members(owners).items()):
            try:
                yield OnMember(index, self.cores[index].extend(owner, add))
            except Exception as error:
                errors.append(error)
        first = release_outcome(self.kind, errors)
        if first is not None:
            raise first

    def owned(self, owners: Caller) -> CompositeFlow[bool]:
        """True if the caller holds every member."""
        for index, owner in enumerate(owners):
            if not (yield OnMember(index, self.cores[index].owned(owner))):
                return False
        return True


class RedLockCore(CompositeCore):
    """The Redlock algorithm over independent masters (Redisson ``RedissonRedLock``).

    Each attempt tries every member at once, one try each, and waits for answers until a
    quorum (N // 2 + 1) holds or ``node_timeout`` passed; it succeeds iff a quorum was taken
    and the validity ``lease - elapsed - drift`` (monotonic clock) is still > 0. Otherwise
    every member is released — including those still answering, since a late grant may land —
    and, while the wait allows, another attempt follows after a random 5-50 ms delay. Dead or
    hung nodes count as not acquired, never as errors.
    """

    kind = "RedLock"

    def __init__(
        self, cores: Sequence[LockCore], node_timeout: object, on_lost: LossCallback | None
    ) -> None:
        super().__init__(cores, quorum(len(cores)), on_lost)
        self.node_timeout = check_positive(node_timeout, "node_timeout")
        self.release_wait = self.node_timeout

    def _acquire(self, owners: Caller, wait: float, lease: float | None) -> CompositeFlow[bool]:
        deadline = Deadline(wait)
        validity_lease = lease if lease is not None else self._watchdog_lease()
        while True:
            acq = self.start(owners)
            start = time.monotonic()
            tries = [(index, self._try(acq, index, lease)) for index in range(len(owners))]
            try:
                # Every member at once; return as soon as a quorum holds. Late answers
                # settle themselves (_try) in the background.
                handles = yield Together(tries, self.node_timeout, partial(self._quorum, acq))
                acq.attempts = [h for h in handles if not h.done()]
            except GeneratorExit:
                raise
            except BaseException:  # cancelled: give the attempt up; late grants release
                for index, owner in self.abandon(acq).items():
                    yield Spawn(index, self.release_member(index, owner))
                raise
            held = self.conclude(acq, validity(validity_lease, time.monotonic() - start))
            if held is None:
                return True
            if held:  # at once and briefly, so a refused caller leaves nothing behind
                releases = [(i, self.release_member(i, owner)) for i, owner in held.items()]
                yield Together(releases, self.node_timeout)
            remaining = deadline.remaining()
            if remaining <= 0:
                return False
            yield Sleep(retry_delay(remaining))

    def _quorum(self, acq: Acquisition) -> bool:
        return self.held_count(acq) >= self.needed

    def _watchdog_lease(self) -> float:
        return min(core.ctx.watchdog_timeout for core in self.cores)

    def _try(self, acq: Acquisition, index: int, lease: float | None) -> Flow[bool]:
        """One member's try, run on its runner; settles a grant that came too late."""
        owner = acq.owners[index]
        try:
            if not (yield from self.cores[index]._acquire(owner, 0.0, lease)):
                return False
        except (BackendError, ServerError):  # a failing or refusing node: not acquired
            # The script may have run although its reply was lost: release it too.
            yield from self.release_member(index, owner)
            return False
        if not self.granted(acq, index):  # the attempt gave up on this member meanwhile
            yield from self.release_member(index, owner)
        return True

    def _released(self, acq: Acquisition, tasks: list[Handle]) -> CompositeFlow[None]:
        """Best-effort release on every member held, concurrently, for ``node_timeout``.

        Raises NotOwnedError when the caller holds no acquisition or no member was still
        held (LockLostError if they had all been lost).
        """
        # Attempts still answering settle themselves (a late grant is released at once).
        running = [h for h in [*tasks, *acq.attempts] if not h.done()]
        pending = (yield Join(running, self.node_timeout)) if running else set()
        released = 0
        not_owned: list[NotOwnedError] = []
        for task in tasks:
            if task in pending or not task.done():
                continue
            error = task.exception()
            if error is None:
                released += 1
            elif isinstance(error, NotOwnedError):
                not_owned.append(error)
            elif not isinstance(error, BackendError | ServerError):
                raise error
        if released == 0 and len(not_owned) == len(tasks):
            lost = [e for e in not_owned if isinstance(e, LockLostError)]
            if lost:
                raise LockLostError(f"{self.name}: every member hold was lost") from lost[0]
            raise NotOwnedError(f"{self.name}: no member was held")

    def _extend(self, owners: Caller, add: float) -> CompositeFlow[None]:
        """Extend every member held, concurrently, for ``node_timeout``; a quorum of
        extended members is success. Else LockLostError (a member's own error other than a
        server failure or a lost hold, say a watchdog hold, is raised as it is)."""
        held = sorted(self._held_members(owners).items())
        tasks = yield Together(
            [(index, self.cores[index].extend(owner, add)) for index, owner in held],
            self.node_timeout,
        )
        running = [task for task in tasks if not task.done()]
        pending = (yield Join(running, self.node_timeout)) if running else set()
        extended = 0
        for task in tasks:
            if task in pending or not task.done():
                continue
            error = task.exception()
            if error is None:
                extended += 1
            elif not isinstance(error, BackendError | ServerError | NotOwnedError):
                raise error
        if extended < self.needed:
            raise LockLostError(
                f"{self.name}: only {extended} of {len(self.cores)} members were extended, "
                f"fewer than the quorum of {self.needed}"
            )

    def owned(self, owners: Caller) -> CompositeFlow[bool]:
        """True if the caller holds a majority of the members (dead nodes: not held)."""
        tasks = yield Together(
            [(index, self.cores[index].owned(owner)) for index, owner in enumerate(owners)],
            self.node_timeout,
        )
        running = [task for task in tasks if not task.done()]
        pending = (yield Join(running, self.node_timeout)) if running else set()
        held = sum(
            1
            for t in tasks
            if t not in pending and t.done() and t.exception() is None and t.result()
        )
        return held >= self.needed


def release_outcome(kind: str, errors: Sequence[BaseException]) -> BaseException | None:
    """The error a best-effort release raises: the first, the others attached as notes."""
    if not errors:
        return None
    first = errors[0]
    for other in errors[1:]:
        first.add_note(f"{kind}: another member failed too: {type(other).__name__}: {other}")
    return first

