"""Client options shared by [`tenure.Client`][tenure.Client] and
[`tenure.AsyncClient`][tenure.AsyncClient]."""

from __future__ import annotations

from typing import Any

from tenure.core.args import MIN_WATCHDOG_TIMEOUT, check_positive, to_ms
from tenure.core.context import Context
from tenure.core.effects import Call
from tenure.errors import ReplicationError


def make_context(
    *,
    watchdog_timeout: Any,
    name_prefix: Any,
    wait_for_replicas: Any,
    replica_timeout: Any,
) -> Context:
    """Check the options (before any I/O) and build the client's context."""
    if not isinstance(name_prefix, str):
        raise TypeError(f"name_prefix must be a str, not {type(name_prefix).__name__}")
    if isinstance(wait_for_replicas, bool) or not isinstance(wait_for_replicas, int):
        raise TypeError("wait_for_replicas must be an int")
    if wait_for_replicas < 0:
        raise ValueError(f"wait_for_replicas must be >= 0, not {wait_for_replicas}")
    return Context(
        watchdog_timeout=check_positive(
            watchdog_timeout, "watchdog_timeout", minimum=MIN_WATCHDOG_TIMEOUT
        ),
        name_prefix=name_prefix,
        wait_for_replicas=wait_for_replicas,
        replica_timeout=check_positive(replica_timeout, "replica_timeout"),
    )


def check_timeouts(socket_timeout: Any, socket_connect_timeout: Any) -> None:
    for value, what in (
        (socket_timeout, "socket_timeout"),
        (socket_connect_timeout, "socket_connect_timeout"),
    ):
        if value is not None:
            check_positive(value, what)


def check_replica_timeout(ctx: Context, socket_timeout: float | None) -> None:
    """Refuse, before any I/O, a ``replica_timeout`` that is not below the command timeout
    ``socket_timeout`` (None: no timeout) while ``wait_for_replicas`` is on.

    ``WAIT`` is one command on the script's connection: a missing replica keeps it open for
    the whole ``replica_timeout``, so with ``replica_timeout >= socket_timeout`` the socket
    times out first and the caller gets BackendError (outcome unknown) instead of
    ReplicationError, and the undo of the unreplicated grant, which waits the same way, can
    fail as well. Refused rather than silently shortened: the caller chose both numbers.
    """
    if ctx.wait_for_replicas < 1 or socket_timeout is None:
        return
    if ctx.replica_timeout >= socket_timeout:
        raise ValueError(
            f"replica_timeout ({ctx.replica_timeout} s) must be below socket_timeout "
            f"({socket_timeout} s) when wait_for_replicas={ctx.wait_for_replicas}: the "
            "WAIT for replicas would outlast the command timeout and end in BackendError "
            "instead of ReplicationError; lower replica_timeout or raise socket_timeout"
        )


def replica_wait(ctx: Context, call: Call, reply: object) -> tuple[int, int] | None:
    """``(replicas, timeout_ms)`` of the ``WAIT`` a driver sends after ``call`` answered
    ``reply``, or None.

    Only scripts that changed lock state wait, and only with ``wait_for_replicas`` >= 1.
    """
    if ctx.wait_for_replicas < 1:
        return None
    if not (call.changes(reply) if callable(call.changes) else call.changes):
        return None
    return ctx.wait_for_replicas, to_ms(ctx.replica_timeout)


def check_replicas(ctx: Context, call: Call, reply: object, acknowledged: int) -> None:
    """Raise `ReplicationError` when ``WAIT`` saw fewer replicas than required.

    (Redisson's ``checkLockSyncedSlaves``.) The error carries the script's ``reply`` so the
    flow that sent the script can undo what it changed (see ``LockCore.acquire_call``).
    """
    if acknowledged < ctx.wait_for_replicas:
        raise ReplicationError(
            f"{call.script.name}: {acknowledged} of {ctx.wait_for_replicas} replicas "
            f"acknowledged within {ctx.replica_timeout} s",
            reply=reply,
            acknowledged=acknowledged,
        )
