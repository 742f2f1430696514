"""A signal handler raising inside redis-py's connection handshake (sync API), after it
sent ``CLIENT SETINFO`` and before it read the reply: redis-py's pool takes the connection
back as it is, one reply behind (or with its handshake's later steps never run), and may
lend it again. tenure must not use it: its next command would read the handshake's reply
as its own (Redis 7.0: "unknown subcommand 'SETINFO'"; Valkey: a stray ``OK``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
import redis

import tenure


class Alarm(Exception):
    """What the stand-in for a signal handler raises."""


def warmed_up(make_client: Callable[..., tenure.Client]) -> tenure.Client:
    """A client past its first commands (its route's INFO), with a spare connection kept."""
    client = make_client()
    warm = client.lock("warm-up")
    assert warm.acquire()
    warm.release()
    return client


def interrupted_read(client: tenure.Client, profile: Callable[[FrameType, str, Any], None]) -> None:
    """A read (no clean-up flow takes the connection first) under ``profile``, a
    ``sys.setprofile`` hook that raises ``Alarm`` from inside it."""
    sys.setprofile(profile)
    try:
        with pytest.raises(Alarm):
            client.semaphore("handshake").available_permits()
    finally:
        sys.setprofile(None)


def locks_served(client: tenure.Client, r: redis.Redis, prefix: str) -> None:
    """Three locks taken and released in turn: the next commands are answered as their own."""
    for i in range(3):
        lock = client.lock(f"{prefix}-{i}")
        assert lock.acquire(timeout=2)
        assert r.hgetall(f"{prefix}-{i}") != {}
        lock.release()
        assert r.exists(f"{prefix}-{i}") == 0


def test_a_connection_whose_handshake_an_interrupt_cut_short_is_not_lent(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    client = warmed_up(make_client)
    # No spare connection kept by the client: the next command's connection is made anew,
    # inside the pool's get_connection().
    client._runner.backend.spare.clear()
    sent: list[bytes] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        back = frame.f_back
        if (
            frame.f_code.co_name != "send_command"
            or back is None
            or back.f_code.co_name not in ("on_connect", "on_connect_check_health")
            or b"SETINFO" not in repr(frame.f_locals.get("args")).encode()
        ):
            return
        if event == "call":
            # The server answers it late (under load; here paused): the next command is
            # lent the connection before the reply came, and reads it as its own.
            r.execute_command("CLIENT", "PAUSE", 300, "ALL")
        elif event == "return":  # written: the handler raises before the reply is read
            sent.append(repr(frame.f_locals.get("args")).encode())
            sys.setprofile(None)
            raise Alarm("alarm")

    interrupted_read(client, profile)
    assert sent
    # At once: the next commands use the pool's connections.
    locks_served(client, r, "after")


def test_a_spare_connection_whose_reconnect_an_interrupt_cut_short_goes_back(
    make_client: Callable[..., tenure.Client], r: redis.Redis
) -> None:
    # The client keeps a spare connection between commands; one found without its socket
    # (dropped meanwhile) is connected again by the look that it is clean. An interrupt in
    # that handshake lost the connection: out of the spares and never given back to the
    # pool, it counted as in use for good (the pool's bound then runs out).
    client = warmed_up(make_client)
    pool = client._runner.route.client.connection_pool
    assert client._runner.backend.spare
    pool.disconnect()  # the spare's socket too: the next look connects it again
    made = len(pool._connections)
    fired: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        back = frame.f_back
        if (
            event == "return"
            and not fired
            and frame.f_code.co_name == "send_command"
            and back is not None
            and back.f_code.co_name in ("on_connect", "on_connect_check_health")
        ):
            fired.append("handshake")
            sys.setprofile(None)
            raise Alarm("alarm")

    interrupted_read(client, profile)
    assert fired
    locks_served(client, r, "spare")
    assert len(pool._connections) == made  # the connection came back and served again
