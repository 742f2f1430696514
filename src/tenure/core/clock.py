"""How long a grant stays valid on the caller's clock: the clock-drift allowance.

A server sets a lease when the script runs, some time after the client sent it; the client
measures from just before sending, on the monotonic clock, so its view of the lease's end is
never later than the server's. Clocks still run at slightly different rates, so a share of
the lease is assumed lost to drift (the Redlock page: 0.01 x lease + 2 ms). Every kind of
grant uses the same rule: a lock grant, a renewal, a RedLock quorum.
"""

from __future__ import annotations

CLOCK_DRIFT_FACTOR = 0.01
"""Share of the lease assumed lost to clock drift between nodes (Redlock page)."""
CLOCK_DRIFT_MIN = 0.002
"""Fixed drift allowance in seconds (2 ms, as the Redlock page's reference code)."""


def drift(lease: float) -> float:
    """Clock-drift allowance of a lease: 0.01 x lease + 2 ms."""
    return CLOCK_DRIFT_FACTOR * lease + CLOCK_DRIFT_MIN


def validity(lease: float, elapsed: float) -> float:
    """Seconds of exclusion left after an acquisition that took ``elapsed`` seconds.

    lease - elapsed - drift, both measured with ``time.monotonic()``; > 0 is required.
    """
    return lease - elapsed - drift(lease)


def valid_until(sent: float, lease: float) -> float:
    """Monotonic time at which a lease applied by a command sent at ``sent`` surely ended
    (less the drift allowance): after it, the holder must assume another may hold the lock."""
    return sent + lease - drift(lease)
