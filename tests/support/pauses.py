"""A server paused until the test ends the pause (CLIENT UNPAUSE), at a moment it knows.

A test of the background finishing a failed release times the lock's (the permit's) return
from the server's answering again. A timed CLIENT PAUSE is a poor start for that span: the
server ends it only at its next cron tick (up to 0.1 s late at hz 10), and at a moment of
its own it may find the background between two sends (a pause of up to 0.25 s, then a
connection made anew: TCP connect, HELLO, then the script), each step a wake-up of the test
process that a loaded host stretches. Here the pause lasts until `Pause.end`, called just
after a send of the holder's is seen waiting on the server (`async_sends_waiting`): the
server then answers a send that is already there."""

from __future__ import annotations

import select
import socket
import time

import redis

from support.twins import async_wait_until, wait_until
from support.wire import SCRIPT_COMMANDS

HOLDER = "holder"
"""The connection name of the holder's client (CLIENT LIST tells its sends apart)."""

LONGEST = 30_000
"""A pause's length in ms: longer than any wait of the test's (`Pause.end` ends it)."""


def holder_url(url: str) -> str:
    """``url`` (a server's, without a query) naming the client's connections `HOLDER`."""
    return f"{url}?client_name={HOLDER}"


def holder_scripts_waiting(r: redis.Redis) -> set[int]:
    """Ids of the holder's connections whose script waits on the paused server (CLIENT
    LIST flag ``b``: its command postponed)."""
    return {
        int(entry["id"])
        for entry in r.client_list()
        if entry["name"] == HOLDER and entry.get("cmd") in SCRIPT_COMMANDS and "b" in entry["flags"]
    }


class Pause:
    """The server paused until `end`: for writes alone (WRITE), or (ALL) for everything for
    ``all_seconds``, then for writes alone. An ALL pause cannot be ended early (CLIENT
    UNPAUSE waits too), so a CLIENT PAUSE WRITE is sent meanwhile on a connection of its
    own: it waits its turn and runs first when the ALL pause ends, replying then."""

    def __init__(self, r: redis.Redis, port: int, mode: str, all_seconds: float = 1.0) -> None:
        self.r = r
        self.queued: socket.socket | None = None
        if mode == "WRITE":
            r.execute_command("CLIENT", "PAUSE", LONGEST, "WRITE")
            return
        assert mode == "ALL", mode
        r.execute_command("CLIENT", "PAUSE", round(all_seconds * 1000), "ALL")
        self.queued = socket.create_connection(("127.0.0.1", port))
        self.queued.sendall(f"CLIENT PAUSE {LONGEST} WRITE\r\n".encode())

    def all_over(self) -> bool:
        """True once the server answers reads again (never blocks): the ALL pause over."""
        return self.queued is None or bool(select.select([self.queued], [], [], 0)[0])

    def end(self) -> float:
        """End the pause (CLIENT UNPAUSE, after the ALL pause if still on): returns the
        moment the server answers again (time.monotonic())."""
        self.r.execute_command("CLIENT", "UNPAUSE")
        if self.queued is not None:
            self.queued.close()
        return time.monotonic()


async def async_sends_waiting(
    r: redis.Redis, pause: Pause, besides: set[int] | None = None, seconds: float = 5.0
) -> set[int]:
    """Once the ALL part of ``pause`` is over (CLIENT LIST would wait for it) and a send of
    the holder's not in ``besides`` waits on the server (each within ``seconds``, asserted:
    waits for a state, one send cycle of the background's is up to 0.8 s on a loaded host):
    the ids of the holder's sends waiting. A coroutine for the tests in ``tests/_async``;
    `sends_waiting` is its twin for the generated sync ones."""
    assert await async_wait_until(pause.all_over, seconds)
    assert await async_wait_until(lambda: holder_scripts_waiting(r) - (besides or set()), seconds)
    return holder_scripts_waiting(r)


def sends_waiting(
    r: redis.Redis, pause: Pause, besides: set[int] | None = None, seconds: float = 5.0
) -> set[int]:
    """The sync twin of `async_sends_waiting`."""
    assert wait_until(pause.all_over, seconds)
    assert wait_until(lambda: holder_scripts_waiting(r) - (besides or set()), seconds)
    return holder_scripts_waiting(r)
