"""What the tests of the shared pub/sub connection's table (``core/listening.py``, with its
``core/parking.py``) start from, with no server: a lock channel, no waiting owners, a clock
under the test's control and a table whose connection is up."""

from __future__ import annotations

from tenure.core.listening import LINGER, Listening

from .scripted import Clock

CH = "redisson_lock__channel:{l}"
"""A Lock's channel (docs/wire.md)."""
NOBODY: frozenset[str] = frozenset()
"""No owner of this client waiting elsewhere (``Parking.join``'s ``waiting``)."""


def up(
    clock: Clock, *, sharded: bool = False, timeout: float = 5.0, linger: float = LINGER
) -> Listening:
    """A table on ``clock`` whose pub/sub connection has just connected (nothing to ask)."""
    table = Listening(sharded=sharded, timeout=timeout, linger=linger, clock=clock)
    table.connected_now()
    return table


ALIAS = CH + ":tenure:c"
"""The Lock channel's client channel (its alias: an unlock sent to this client alone)."""


def relayed(clock: Clock) -> Listening:
    """A table :func:`up` on ``clock`` in which owner ``"w"`` waits on :data:`CH` with the
    client channel :data:`ALIAS` (relayed on by ``"relay"``), its SUBSCRIBE confirmed."""
    table = up(clock)
    table.parking.join(CH, NOBODY, "w", object, ALIAS, "relay")
    table.subscribing(table.parking.names(CH))
    table.received("subscribe", CH, "1")
    return table
