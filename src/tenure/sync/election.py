# GENERATED from src/tenure/aio/election.py by tools/unasync.py: edit that file, not this one.
"""The election front: campaign, lead, resign, observe."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Awaitable

from tenure._scope import LossScope, scope_caller
from tenure.sync.runner import Runner
from tenure.core.args import bind_callback
from tenure.core.effects import Flow
from tenure.core.election import ElectionCore, Leader
from tenure.core.holds import OnLost
from tenure.core.lock import LockCore
from tenure.errors import LockError, LockLostError, LockTimeout


def _always(_: object) -> bool:
    return True


_NOBODY = object()
"""`Election._resigned`'s answer for a term nobody resigned while blocks ran."""


def _caller() -> object:
    """Who calls: the running task (the calling thread in sync code); None outside one."""
    with contextlib.suppress(RuntimeError):
        return scope_caller()
    return None


class Election:
    """Leader election: one leader at a time per name, chosen among the candidates in the
    order they started campaigning (etcd ``concurrency.Election``, Curator ``LeaderLatch``;
    Redisson has none).

    Made by ``client.election(name)``. The candidate is this object: each Election object
    campaigns for itself (its owner field is drawn once per object), whichever thread or
    task calls it. Leadership is a lease of ``watchdog_timeout`` seconds renewed by the
    client's watchdog, and is lost as a lock hold is: a renewal that finds it gone, or its
    lease running out on the local clock, sets [`lost`][tenure.Election.lost] and calls
    ``on_lost``.

    Every new leadership draws a **term** that strictly increases per name (a counter with
    no TTL: across leaderships, crashes, and restarts of a server that persists), usable as
    a fencing token with [`tenure.fenced_write()`][tenure.fencing.fenced_write]. A resigning leader
    hands over inside
    its resign script (the next live candidate is elected at once and told on the
    election's channel); a crashed leader is replaced when its lease ends. A candidate
    whose process died is dropped within ``watchdog_timeout`` of its last refresh.

    Wire layout: docs/wire.md, "Election".

    Example:
        ```python
        election = client.election("scheduler")
        with election.leadership("host-a:42") as term:
            ...                               # cancelled if the leadership is lost
        for leader in election.observe():
            print(leader)                     # Leader(...) or None when vacant
        ```
    """

    def __init__(
        self,
        runner: Runner,
        name: str,
        on_lost: OnLost | None = None,
        client_name: str | None = None,
    ) -> None:
        self.runner = runner
        """The client's runner (what carries out the election's flows)."""
        self.core = ElectionCore(runner.ctx, name, bind_callback(on_lost, self), client_name)
        """The election's algorithm (`tenure.core.election`)."""
        self._identity: object = None
        self._owner_id = ""
        self._scopes: dict[LossScope, tuple[int, object]] = {}
        """The cancel scope of each `leadership()` block running in asyncio -> its term and
        the task that entered it."""
        self._blocks: dict[int, int] = {}
        """Term -> `leadership()` blocks running under that leadership (nested, or entered
        by several tasks: they share this candidate's one leadership)."""
        self._resigned: dict[int, object] = {}
        """Term -> who resigned it (a task, or a thread in sync code) while blocks ran
        under it, until the last of them exits: those blocks end with it."""
        self.core.add_loss_listener(self._lost)

    @property
    def name(self) -> str:
        """The election's name as given (without the client's ``name_prefix``)."""
        return self.core.name

    def _owner(self) -> str:
        """This candidate's owner field on the client (a new one in a forked child)."""
        # After os.fork(): the child's own identity first. (Asyncio outside a task, e.g. a
        # property read from a callback: no fork check.)
        with contextlib.suppress(RuntimeError):
            self.runner.owner()
        identity = self.runner.ctx.identity
        if self._identity is not identity:
            self._identity = identity
            self._owner_id = identity.owner_of(self, _always)
        return self._owner_id

    def campaign(self, value: str, timeout: float | None = None) -> int | None:
        """Wait to become the leader, then return the new term.

        Candidates are elected in the order they started campaigning. Campaigning again
        while leading returns the current term at once (and proclaims ``value`` if it
        differs); if that leadership was lost on the server meanwhile (a pause past its
        lease, before a renewal found it gone), the loss is reported and LockLostError
        raised, with nothing done: campaign again for a new term. A candidate that stops
        waiting (timeout, cancellation, error) leaves the queue; if it was elected
        meanwhile, it steps down at once.

        Args:
            value: what the leader announces (str; any UTF-8 text, e.g. ``"host-a:8080"``).
            timeout: seconds to wait (float); None or -1 waits forever, 0 makes one
                attempt.

        Returns:
            The term (int) of the caller's leadership; None when the wait ran out.

        Raises:
            TypeError, ValueError: a bad argument, before any I/O.
            LockLostError: the leadership this candidate held was lost (also reported
                through ``lost``, ``on_lost`` and its ``leadership()`` blocks).
            LockKindError: a key of the election holds another type.
            BackendError: the server failed or did not answer, or the client is closed
                (nothing is sent then).
        """
        owner = self._owner()
        return self.runner.run(self.core.campaign(owner, value, timeout))

    def resign(self) -> None:
        """Step down; the first live candidate is elected in the same script.

        The `leadership()` blocks running under the leadership end with it, as on a loss:
        those of other tasks (threads) raise LockLostError (in asyncio their bodies are
        cancelled at once, unless ``cancel_on_loss=False``); those of the caller's own
        task (thread) end quietly at their exit. No block resigns again.

        Raises:
            LockLostError: the leadership was lost before (also reported through ``lost``
                and ``on_lost``).
            NotOwnedError: the caller is not the leader.
            BackendError: the server failed; the leadership then expires with its lease.
        """
        return self.runner.run(self._resign(self._owner(), _caller()))

    def _resign(self, owner: str, caller: object) -> Flow[None]:
        """`ElectionCore.resign()`, then the blocks under the leadership it ended end too.
        Its first step forgets the leadership (never renewed again): it ends then, however
        the script fares."""
        holds, key = self.runner.ctx.holds, self.core.key
        term = self.core.term(owner)
        leading = holds.get(key, owner) is not None
        try:
            yield from self.core.resign(owner)
        finally:
            if leading and term is not None and holds.get(key, owner) is None:
                self._ended(term, caller)

    def _ended(self, term: int, caller: object) -> None:
        """``caller`` resigned the leadership of ``term``: every block running under it ends
        (a body that went on would believe it leads). The caller's own blocks are not
        cancelled: it resigned on purpose."""
        if not self._blocks.get(term):
            return
        self._resigned[term] = caller
        for scope, (under, entered_by) in list(self._scopes.items()):
            if under == term and entered_by != caller:
                scope.lost()

    def proclaim(self, value: str) -> int:
        """Change the leader's value, keeping its term; observers are told.

        Args:
            value: the new value (str).

        Returns:
            The term (int).

        Raises:
            TypeError, ValueError: a bad value, before any I/O.
            LockLostError: the leadership was lost.
            NotOwnedError: the caller is not the leader.
            BackendError: the server failed.
        """
        return self.runner.run(self.core.proclaim(self._owner(), value))

    def leader(self) -> Leader | None:
        """The current leader ([`tenure.Leader`][tenure.Leader]), or None when vacant.

        Raises:
            LockKindError: a key of the election holds another type.
            BackendError: the server failed.
        """
        return self.runner.run(self.core.leader())

    def is_leader(self) -> bool:
        """True if this candidate leads now, as the server says. Raises BackendError."""
        return self.runner.run(self.core.is_leader(self._owner()))

    def valid_for(self) -> float:
        """Seconds this candidate's leadership is surely still valid on the local monotonic
        clock (last confirmed grant or renewal + lease - clock-drift allowance - now); 0.0
        when lost or not leading. No I/O: a sync body checks it between steps."""
        return self.core.valid_for(self._owner())

    def checkpoint(self) -> None:
        """Return if this candidate surely still leads (no I/O), else raise.

        Raises:
            LockLostError: the leadership was lost, or its validity ran out on the local
                clock (a renewal is overdue: the process or the server was paused).
            NotOwnedError: this candidate does not lead.
        """
        self.core.checkpoint(self._owner())

    @property
    def term(self) -> int | None:
        """The term of this candidate's latest leadership; None if it never led (no I/O)."""
        return self.core.term(self._owner())

    @property
    def lost(self) -> bool:
        """True if this candidate's latest leadership was lost (expired or taken away)."""
        return self.core.is_lost(self._owner())

    def observe(self) -> Iterator[Leader | None]:
        """Leader changes, current leader first: a [`tenure.Leader`][tenure.Leader], or None when
        the
        leadership is vacant (``for`` in asyncio, ``for`` in sync code).

        Every change is seen, in order: each election, new value and vacancy is logged on
        the server (a stream of the last ~128 changes), and the observer reads the log
        from the last change it yielded. It wakes on the election's channel, never polls:
        while the leader lives (and renews) and nothing changes, it sends no command.
        When a leader's lease ends without a message (its process died), the observer
        reads again at that moment and the vacancy (or the next leader) is logged then.
        Nothing is held between two items, so leaving the loop early needs no clean-up.

        Raises:
            LockKindError: a key of the election holds another type.
            BackendError: the server failed or the client closed.
        """
        runner, core = self.runner, self.core
        since: str | None = None
        while True:
            changes, since = runner.run(core.observe_round(since))
            for leader in changes:  # noqa: RUF100, UP028 (the sync twin could yield from)
                yield leader

    def leadership(
        self,
        value: str,
        timeout: float | None = None,
        *,
        cancel_on_loss: bool = True,
    ) -> Leadership:
        """A context manager: campaign, run the body while leading, resign at the end.

        ``with election.leadership("host-a") as term:`` (``with`` in sync code)
        enters with the term once elected; raises [`tenure.LockTimeout`][tenure.errors.LockTimeout]
        when
        ``timeout`` (seconds; None waits forever) runs out first. In asyncio code the body
        runs as a cancel scope: when the leadership is reported lost, its task is
        cancelled and the block raises [`tenure.LockLostError`][tenure.errors.LockLostError] (the
        body's
        ``CancelledError`` chained); ``cancel_on_loss=False`` lets the body run on and
        raises LockLostError at exit. A sync body cannot be cancelled: it checks
        [`lost`][tenure.Election.lost] between steps, and the block raises LockLostError at
        exit.

        Blocks of one Election share its one leadership (nested, or entered by several
        tasks): each gets the same term, and the leadership is resigned at the last exit,
        as a reentrant lock is released. A block whose leadership was replaced by a newer
        one (lost, then won again) raises LockLostError at exit and leaves the new one be.
        An explicit [`resign()`][tenure.Election.resign] ends every block under the
        leadership: those of other tasks as on a loss, the caller's own quietly.

        Raises:
            TypeError, ValueError: a bad argument, before any I/O.
        """
        if not isinstance(cancel_on_loss, bool):
            raise TypeError(f"cancel_on_loss must be a bool, not {type(cancel_on_loss).__name__}")
        return Leadership(self, value, timeout, cancel_on_loss)

    def _lost(self, core: LockCore, owner: str) -> None:
        """Loss listener: a lost leadership cancels the bodies running under it."""
        if owner == self._owner_id:
            for scope in list(self._scopes):
                scope.lost()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class Leadership:
    """What [`Election.leadership()`][tenure.Election.leadership] returns: campaign on
    entry, resign on exit."""

    def __init__(
        self, election: Election, value: str, timeout: float | None, cancel: bool
    ) -> None:
        self._election = election
        self._value = value
        self._timeout = timeout
        self._cancel = cancel
        self._scope: LossScope | None = None
        self._term = 0
        self._caller: object = None

    def __enter__(self) -> int:
        election = self._election
        term = election.campaign(self._value, self._timeout)
        if term is None:
            raise LockTimeout(f"{election!r}: not elected within {self._timeout} s")
        self._term = term
        self._caller = _caller()
        election._blocks[term] = election._blocks.get(term, 0) + 1
        scope = LossScope(election, self._cancel)
        if scope.active:
            self._scope = scope
            election._scopes[scope] = (term, self._caller)
            if election.lost:
                scope.lost()
        return term

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        election, scope, term = self._election, self._scope, self._term
        self._scope = None
        loss: LockLostError | None = None
        if scope is not None:
            del election._scopes[scope]
            loss = scope.finish(error)
        inside = election._blocks.pop(term, 1) - 1
        if inside:
            election._blocks[term] = inside
        resigner = election._resigned.get(term, _NOBODY)
        if not inside:
            election._resigned.pop(term, None)
        if resigner is not _NOBODY:
            # Resigned while the block ran: nothing is left to resign. The block of the
            # caller that resigned ends quietly; any other ends as on a loss (its body
            # believed it led).
            if resigner == self._caller and loss is None:
                return
            resigned = LockLostError(
                f"{election!r}: the leadership of term {term} was resigned while the block ran"
            )
            if loss is None and error is not None:  # the body's own error goes on
                error.add_note(f"tenure: {resigned}")
                return
            raise resigned from error
        if inside or election.term != term:
            # Not this block's to resign: another block still runs under the leadership
            # (it resigns at the last exit, as a reentrant lock is released), or this one
            # was lost and a campaign since won a new term, which another caller holds.
            if loss is None and (election.lost or election.term != term):
                loss = LockLostError(
                    f"{election!r}: the leadership of term {term} was lost while the block ran"
                )
                if error is not None:  # the body's own error goes on, the loss noted
                    error.add_note(f"tenure: {loss}")
                    return
            if loss is not None:
                raise loss from error
            return
        if loss is not None:
            try:
                election.resign()  # the loss again (no I/O), or a failed resign
            except LockLostError:
                pass
            except LockError as failure:
                loss.add_note(f"tenure: resigning after the loss failed: {failure!r}")
            raise loss from error
        if error is None:
            election.resign()
            return
        try:
            election.resign()
        except LockError as failure:
            error.add_note(f"tenure: resigning {election!r} failed too: {failure!r}")
