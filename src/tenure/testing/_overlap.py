"""Recording critical sections and checking that none overlapped."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """One critical section: who ran it, and when (``time.monotonic()`` seconds, a clock
    shared by every process of one host)."""

    enter: float
    exit: float
    label: str = ""


class OverlapError(AssertionError):
    """Two or more critical sections ran at the same time; the message lists each pair."""


def _as_interval(item: Interval | tuple[float, float] | tuple[float, float, str]) -> Interval:
    if isinstance(item, Interval):
        return item
    if len(item) == 2:
        return Interval(float(item[0]), float(item[1]))
    return Interval(float(item[0]), float(item[1]), str(item[2]))


def check_no_overlap(
    intervals: Iterable[Interval | tuple[float, float] | tuple[float, float, str]],
    *,
    limit: int = 10,
) -> None:
    """Fail when any two (enter, exit) intervals overlap.

    Args:
        intervals: `Interval` objects or ``(enter, exit)`` / ``(enter, exit, label)``
            tuples, in seconds of one clock, in any order.
        limit: at most this many overlapping pairs are listed in the report (int >= 1).

    Raises:
        ValueError: an interval exits before it enters, or ``limit`` < 1.
        OverlapError: some sections overlapped; the message gives the count and, per pair,
            both sections (label, enter, exit relative to the first enter) and how long they
            overlapped.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, not {limit!r}")
    spans = sorted((_as_interval(i) for i in intervals), key=lambda i: (i.enter, i.exit))
    for span in spans:
        if span.exit < span.enter:
            raise ValueError(f"interval {span} exits before it enters")
    pairs: list[tuple[Interval, Interval]] = []
    active: list[Interval] = []  # sections entered earlier that may still run
    for span in spans:
        active = [earlier for earlier in active if earlier.exit > span.enter]
        pairs += [(earlier, span) for earlier in active]
        active.append(span)
    if not pairs:
        return
    origin = spans[0].enter
    lines = [
        f"{len(pairs)} pair(s) of critical sections overlapped "
        f"(of {len(spans)} sections; times in s from the first enter):"
    ]
    for first, second in pairs[:limit]:
        overlap = min(first.exit, second.exit) - second.enter
        lines.append(
            f"  {first.label or '?'} [{first.enter - origin:.3f}, {first.exit - origin:.3f}]"
            f" and {second.label or '?'} [{second.enter - origin:.3f}, "
            f"{second.exit - origin:.3f}]: {overlap * 1000:.1f} ms together"
        )
    if len(pairs) > limit:
        lines.append(f"  ... and {len(pairs) - limit} more")
    raise OverlapError("\n".join(lines))


class IntervalRecorder:
    """Collects critical sections from any number of threads (and, through
    `add()`, from other processes), then checks them with `check_no_overlap()`."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self.intervals: list[Interval] = []
        """The sections recorded so far."""

    @contextmanager
    def section(self, label: str = "") -> Iterator[None]:
        """``with recorder.section("worker 3"):`` records the block's enter and exit
        (also when it raises). Put it inside the ``with lock:`` block it checks."""
        enter = time.monotonic()
        try:
            yield
        finally:
            self.add(enter, time.monotonic(), label)

    def add(self, enter: float, exit: float, label: str = "") -> None:
        """Record one section measured elsewhere (``time.monotonic()`` seconds)."""
        with self._mutex:
            self.intervals.append(Interval(enter, exit, label))

    def check(self, *, limit: int = 10) -> None:
        """`check_no_overlap()` over the recorded sections (raises OverlapError)."""
        with self._mutex:
            intervals = list(self.intervals)
        check_no_overlap(intervals, limit=limit)

    def __len__(self) -> int:
        return len(self.intervals)
