"""A scripted driver: runs a core flow against a list of expected effects and canned replies.

Each step is ``(expect, reply)``:

* ``expect`` is an effect class (``Subscribe``), a script name (``"lock_acquire"``, meaning a
  :class:`Call` of that script) or a predicate ``effect -> bool``;
* ``reply`` is the value sent back into the flow, an exception (instance or class) thrown into
  it, or :class:`Do` wrapping ``effect -> value`` for replies that depend on the effect or
  move the clock.

Only the effects that talk to the server take steps (``Call``, ``Command``, ``Subscribe``,
``Unsubscribe``, ``Wait``). :class:`~tenure.core.effects.WatchHolds` and any effect this driver
does not know are answered ``None`` and recorded in ``run.extra``, without consuming a step;
composite effects (``OnMember``, ``Spawn``...) are carried out by the driver itself (see
:func:`drive`). ``run.trace`` has every effect of all three sorts in the order asked. The flow
must ask for exactly the scripted effects in order and then finish (or raise).
"""

from __future__ import annotations

import math
import time
import types
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from tenure.core.effects import (
    Call,
    Command,
    Join,
    OnMember,
    Sleep,
    Spawn,
    Subscribe,
    Together,
    Unsubscribe,
    Wait,
    WaitAny,
)

KNOWN = (Call, Command, Subscribe, Unsubscribe, Wait)
"""The effects that take a step."""
COMPOSITE = (OnMember, Spawn, WaitAny, Join, Together, Sleep)
"""The composite effects, carried out by the driver."""


@dataclass(frozen=True)
class Do:
    """A reply computed from the effect (may raise, may move a clock)."""

    fn: Callable[[Any], Any]


Expect = type | str | Callable[[Any], bool]
Step = tuple[Expect, Any]


def matches(expect: Expect, effect: object) -> bool:
    if isinstance(expect, type):
        return isinstance(effect, expect)
    if isinstance(expect, str):
        return isinstance(effect, Call) and effect.script.name == expect
    return bool(expect(effect))


def describe(expect: Expect) -> str:
    if isinstance(expect, type):
        return expect.__name__
    if isinstance(expect, str):
        return f"Call({expect})"
    return getattr(expect, "__name__", repr(expect))


@dataclass
class Run:
    """What a scripted run saw: the flow's result or error, and every effect in order."""

    result: Any = None
    error: BaseException | None = None
    effects: list[Any] = field(default_factory=list)
    extra: list[Any] = field(default_factory=list)
    """Effects answered None without a step: WatchHolds and types this driver does not know."""
    trace: list[Any] = field(default_factory=list)
    """Every effect, scripted, composite or extra, in the order the flows asked for them."""

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.effects if isinstance(e, kind)]

    def calls(self, name: str | None = None) -> list[Call]:
        return [e for e in self.of(Call) if name is None or e.script.name == name]

    @property
    def names(self) -> list[str]:
        """A compact trace: script names for calls, class names for the rest."""
        return [e.script.name if isinstance(e, Call) else type(e).__name__ for e in self.effects]


DEAD, SLOW = "dead", "slow"
"""Member node behaviours for composite flows: a dead node never answers a spawned flow; a
slow node answers only once the composite stops waiting for answers (at its next ``Join``)."""


class Handle:
    """A spawned member flow, as the composite sees it (``done``/``exception``/``result``)."""

    def __init__(self, index: int, flow: Generator[Any, Any, Any]) -> None:
        self.index = index
        self.flow = flow
        self._done = False
        self._result: Any = None
        self._error: BaseException | None = None
        self.slow = False
        """Runs at the next ``Join`` that waits for it (of this run or a later one)."""

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self._done, self._result, self._error = True, result, error

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        assert self._done, "exception() of a pending handle"
        return self._error

    def result(self) -> Any:
        assert self._done, "result() of a pending handle"
        if self._error is not None:
            raise self._error
        return self._result


class Driver:
    """Performs the effects of one flow (and of the member flows a composite runs)."""

    def __init__(self, steps: Iterable[Step], clock: Clock | None, nodes: dict[int, str]) -> None:
        self.pending = list(steps)
        self.position = 0
        self.clock = clock
        self.nodes = nodes
        self.run = Run()

    def flow(self, flow: Generator[Any, Any, Any]) -> Any:
        """Run ``flow`` to its end; its result, or its exception raised."""
        sending: tuple[bool, Any] = (False, None)
        while True:
            is_error, value = sending
            try:
                effect = flow.throw(value) if is_error else flow.send(value)
            except StopIteration as stop:
                return stop.value
            try:
                sending = (False, self.perform(effect))
            except AssertionError:
                flow.close()
                raise
            except BaseException as error:
                sending = (True, error)

    def perform(self, effect: Any) -> Any:
        self.run.trace.append(effect)
        if isinstance(effect, KNOWN):
            return self.scripted(effect)
        if isinstance(effect, COMPOSITE):
            self.run.effects.append(effect)
            return getattr(self, type(effect).__name__.lower())(effect)
        self.run.extra.append(effect)
        return None

    def scripted(self, effect: Any) -> Any:
        self.run.effects.append(effect)
        if self.position >= len(self.pending):
            raise AssertionError(f"unscripted effect #{self.position}: {effect!r}\n{self.seen}")
        expect, reply = self.pending[self.position]
        self.position += 1
        if not matches(expect, effect):
            raise AssertionError(
                f"effect #{self.position - 1}: expected {describe(expect)}, got {effect!r}\n"
                f"{self.seen}"
            )
        if isinstance(reply, Do):
            reply = reply.fn(effect)  # may raise: thrown into the flow
        if isinstance(reply, type) and issubclass(reply, BaseException):
            reply = reply()
        if isinstance(reply, BaseException):
            raise reply
        if self.clock is not None and isinstance(effect, Wait) and reply is False:
            self.clock.advance(effect.seconds)
        return reply

    @property
    def seen(self) -> str:
        return f"seen: {self.run.names}"

    # ------------------------------------------------------------ composite effects
    def onmember(self, effect: Any) -> Any:
        return self.flow(effect.flow)

    def spawn(self, effect: Any) -> Handle:
        handle = Handle(effect.index, effect.flow)
        node = self.nodes.get(effect.index)
        if node == SLOW:
            handle.slow = True
        elif node != DEAD:
            self.settle(handle)
        return handle

    def settle(self, handle: Handle) -> None:
        try:
            handle.finish(self.flow(handle.flow))
        except AssertionError:
            raise
        except BaseException as error:
            handle.finish(error=error)

    def together(self, effect: Any) -> list[Handle]:
        """Member flows in order, each run inline as :meth:`spawn` runs it; when dead or
        slow members keep ``enough()`` False, the wait lasts ``seconds``."""
        handles = [self.spawn(Spawn(index, flow)) for index, flow in effect.flows]
        if any(not h.done() for h in handles) and not effect.enough():
            self.sleep_for(effect.seconds)
        return handles

    def waitany(self, effect: Any) -> set[Any]:
        pending = {h for h in effect.handles if not h.done()}
        if len(pending) == len(effect.handles):  # nothing answers in time
            self.sleep_for(effect.seconds)
        return pending

    def join(self, effect: Any) -> set[Any]:
        for handle in effect.handles:
            if isinstance(handle, Handle) and handle.slow and not handle.done():
                self.settle(handle)
        pending = {h for h in effect.handles if not h.done()}
        if pending:
            assert math.isfinite(effect.seconds), (
                f"Join without a limit on a dead node\n{self.seen}"
            )
            self.sleep_for(effect.seconds)
        return pending

    def sleep(self, effect: Any) -> None:
        self.sleep_for(effect.seconds)

    def sleep_for(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.advance(seconds)


def drive(
    flow: Generator[Any, Any, Any],
    steps: Iterable[Step],
    *,
    clock: Clock | None = None,
    raises: bool = False,
    nodes: dict[int, str] | None = None,
) -> Run:
    """Run ``flow`` through ``steps``; returns the :class:`Run`.

    An exception the flow raises is re-raised unless ``raises=True`` (then it is in
    ``run.error``). With ``clock``, a ``Wait`` answered False (timed out) advances the clock
    by the wait's seconds, as a real sleep would (so do composite sleeps and timed-out
    waits). Composite flows: member flows run inline when started (their effects take the
    next steps), except on ``nodes`` marked :data:`DEAD` or :data:`SLOW`.
    """
    driver = Driver(steps, clock, nodes or {})
    try:
        driver.run.result = driver.flow(flow)
    except AssertionError:
        raise
    except BaseException as error:
        if not raises:
            raise
        driver.run.error = error
    if driver.position != len(driver.pending):
        left = [describe(expect) for expect, _ in driver.pending[driver.position :]]
        raise AssertionError(f"flow ended with steps left: {left}\n{driver.seen}")
    return driver.run


def fails(
    flow: Generator[Any, Any, Any], steps: Iterable[Step], *, clock: Clock | None = None
) -> Run:
    """:func:`drive` for a flow expected to raise; ``run.error`` holds the error."""
    run = drive(flow, steps, clock=clock, raises=True)
    assert run.error is not None, f"the flow returned {run.result!r} instead of raising"
    return run


class Clock:
    """A monotonic clock under the test's control (starts at 1000.0 s)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def time_module(self) -> types.SimpleNamespace:
        """A stand-in for the ``time`` module whose ``monotonic`` is this clock."""
        shim = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if n[0] != "_"})
        shim.monotonic = self
        return shim
