"""A scripted driver: runs a core flow against a list of expected effects and canned replies.

Each step is ``(expect, reply)``:

* ``expect`` is an effect class (``Subscribe``), a script name (``"lock_acquire"``, meaning a
  :class:`Call` of that script) or a predicate ``effect -> bool``;
* ``reply`` is the value sent back into the flow, an exception (instance or class) thrown into
  it, or :class:`Do` wrapping ``effect -> value`` for replies that depend on the effect or
  move the clock.

Effects other than the five of :mod:`tenure.core.effects` (the driver rewrite may add more) are
answered ``None`` and recorded, without consuming a step. The flow must ask for exactly the
scripted effects in order and then finish (or raise).
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from tenure.core.effects import Call, Command, Subscribe, Unsubscribe, Wait

KNOWN = (Call, Command, Subscribe, Unsubscribe, Wait)


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
    """Effects of types this driver does not know, answered None."""

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.effects if isinstance(e, kind)]

    def calls(self, name: str | None = None) -> list[Call]:
        return [e for e in self.of(Call) if name is None or e.script.name == name]

    @property
    def names(self) -> list[str]:
        """A compact trace: script names for calls, class names for the rest."""
        return [e.script.name if isinstance(e, Call) else type(e).__name__ for e in self.effects]


def drive(
    flow: Generator[Any, Any, Any],
    steps: Iterable[Step],
    *,
    clock: Clock | None = None,
    raises: bool = False,
) -> Run:
    """Run ``flow`` through ``steps``; returns the :class:`Run`.

    An exception the flow raises is re-raised unless ``raises=True`` (then it is in
    ``run.error``). With ``clock``, a ``Wait`` answered False (timed out) advances the clock
    by the wait's seconds, as a real sleep would.
    """
    run = Run()
    pending = list(steps)
    position = 0
    sending: tuple[bool, Any] = (False, None)
    while True:
        is_error, value = sending
        try:
            effect = flow.throw(value) if is_error else flow.send(value)
        except StopIteration as stop:
            run.result = stop.value
            break
        except BaseException as error:
            if not raises:
                raise
            run.error = error
            break
        if not isinstance(effect, KNOWN):
            run.extra.append(effect)
            sending = (False, None)
            continue
        run.effects.append(effect)
        if position >= len(pending):
            flow.close()
            raise AssertionError(f"unscripted effect #{position}: {effect!r}\nseen: {run.names}")
        expect, reply = pending[position]
        position += 1
        if not matches(expect, effect):
            flow.close()
            raise AssertionError(
                f"effect #{position - 1}: expected {describe(expect)}, got {effect!r}\n"
                f"seen: {run.names}"
            )
        if isinstance(reply, Do):
            try:
                reply = reply.fn(effect)
            except BaseException as error:  # thrown into the flow
                sending = (True, error)
                continue
        if isinstance(reply, type) and issubclass(reply, BaseException):
            reply = reply()
        if isinstance(reply, BaseException):
            sending = (True, reply)
            continue
        if clock is not None and isinstance(effect, Wait) and reply is False:
            clock.advance(effect.seconds)
        sending = (False, reply)
    if position != len(pending):
        left = [describe(expect) for expect, _ in pending[position:]]
        raise AssertionError(f"flow ended with steps left: {left}\nseen: {run.names}")
    return run


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
