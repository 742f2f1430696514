"""Argument checks, run before any I/O so a bad call fails at once and names its argument."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any


def check_name(name: Any, what: str = "name") -> str:
    """A lock name: a non-empty ``str``."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{what} must not be empty")
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

    ``timeout`` None or -1 means forever, like :meth:`threading.Lock.acquire`.
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
    """A lease in seconds (finite, > 0), or None for a watchdog-renewed hold."""
    if lease_time is None:
        return None
    value = _number(lease_time, "lease_time")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"lease_time must be a finite number of seconds > 0, not {lease_time!r}")
    return value


def check_positive(value: Any, what: str) -> float:
    """A finite number of seconds > 0 (client options such as ``watchdog_timeout``)."""
    number = _number(value, what)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what} must be a finite number of seconds > 0, not {value!r}")
    return number


def to_ms(seconds: float) -> int:
    """Seconds to whole wire milliseconds, never below 1 (0 would mean 'no expiry' to some)."""
    return max(1, round(seconds * 1000))


def bind_callback(callback: Any, subject: object) -> Callable[[], None] | None:
    """``on_lost``, checked (callable or None) and bound to the public object it reports."""
    if callback is None:
        return None
    if not callable(callback):
        raise TypeError(f"on_lost must be callable, not {type(callback).__name__}")
    return functools.partial(callback, subject)
