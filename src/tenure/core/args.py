"""Argument checks, run before any I/O so a bad call fails at once and names its argument."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

MAX_SECONDS = 1e12
"""Longest lease, watchdog timeout or other time tenure sends (about 31,700 years). Its
milliseconds (1e15) stay below 2**53, exact as a Lua number and a sorted-set score, and far
below what ``PEXPIRE`` accepts, so no script can fail on a time after it has written."""

MIN_LEASE = 0.01
"""Shortest ``lease_time``: a grant is valid for its lease less the clock-drift allowance
(0.01 x lease + 2 ms, `tenure.core.clock`) and the round trip; below 10 ms almost
nothing would be left, and below about 2 ms no grant could ever be valid."""

MIN_WATCHDOG_TIMEOUT = 0.1
"""Shortest ``watchdog_timeout``: renewal runs every third of it, and a renewal round trip
must fit in that many times over."""


def check_name(name: Any, what: str = "name") -> str:
    """A lock name: a non-empty ``str`` that UTF-8 can encode (no lone surrogates)."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{what} must not be empty")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{what} cannot be encoded as UTF-8: {error.reason}") from None
    return name


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    number = float(value)
    if math.isnan(number):
        raise ValueError(f"{what} must not be NaN")
    return number


def check_wait(blocking: Any, timeout: Any) -> float:
    """Seconds an acquire may wait: ``math.inf`` (forever), ``0.0`` (one attempt) or more.

    ``timeout`` None or -1 means forever, like `threading.Lock.acquire()`.
    """
    if not isinstance(blocking, bool):
        raise TypeError(f"blocking must be a bool, not {type(blocking).__name__}")
    if not blocking:
        if timeout is not None and timeout != -1 and timeout != 0:
            raise ValueError("timeout cannot be given with blocking=False")
        return 0.0
    if timeout is None:
        return math.inf
    value = _number(timeout, "timeout")
    if value == -1:
        return math.inf
    if value < 0:
        raise ValueError(f"timeout must be >= 0, None or -1, not {timeout!r}")
    return value


def check_lease(lease_time: Any) -> float | None:
    """A lease in seconds (finite, at least `MIN_LEASE`), or None for a
    watchdog-renewed hold."""
    if lease_time is None:
        return None
    lease = check_positive(lease_time, "lease_time")
    if lease < MIN_LEASE:
        raise ValueError(f"lease_time must be at least {MIN_LEASE} s, not {lease_time!r}")
    return lease


def check_positive(value: Any, what: str, minimum: float = 0.0) -> float:
    """A number of seconds > ``minimum`` (0) and at most `MAX_SECONDS`."""
    number = _number(value, what)
    if not math.isfinite(number) or number <= minimum or number > MAX_SECONDS:
        low = f"> {minimum}" if minimum else "> 0"
        raise ValueError(
            f"{what} must be a number of seconds {low} and <= {MAX_SECONDS:.0e}, not {value!r}"
        )
    return number


def to_ms(seconds: float) -> int:
    """Seconds to whole wire milliseconds, never below 1 (0 would mean 'no expiry' to some)."""
    return max(1, round(seconds * 1000))


def bind_callback(
    callback: Any, subject: object, what: str = "on_lost"
) -> Callable[[], None] | None:
    """``callback`` (the argument named ``what``: ``on_lost``, ``on_doubt``), checked
    (callable or None; TypeError otherwise) and bound to the public object it reports."""
    if callback is None:
        return None
    if not callable(callback):
        raise TypeError(f"{what} must be callable, not {type(callback).__name__}")
    return functools.partial(callback, subject)
