"""Background clean-ups of a client that is then closed stop at once (sync API, real server).

A release that failed with a BackendError is finished in the background, retried while the
server does not answer: a PermitExpirableSemaphore's (`PermitCore._finish_release_permit`,
for at most the permit's lease) and a Lock's (`LockCore.reconcile`, until the server
answers). Once the client is closed, every command it is asked for fails with
ClientClosedError (a BackendError): trying again cannot cure that. Before, the flows could
not tell it from a server away and went on retrying every 0.25 s: the permit's to its lease
end (30 s; then "failed (the client is closed)"), the lock's for ever.

The server runs a script until it is killed, and answers every other command with BUSY at
once (a BackendError): the release fails, and its finishing retries, sleeping between
tries, until the client is closed while it is in that loop."""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import tenure
from support.servers import Server
from support.twins import wait_until
from tenure.core.lock import RECONCILE_PAUSE, LockCore
from tenure.core.semaphore import PermitCore
from tenure.errors import BackendError, ClientClosedError

PROMPT = 1.0
"""Seconds from close() to the flow's end: its retry pause (at most 0.25 s) and a margin.
The permit's lease is 30 s."""
SPIN = "local i = 0 while true do i = i + 1 end"
"""A script that runs until SCRIPT KILL (it writes nothing, so it may be killed)."""


@contextlib.contextmanager
def server_busy(server: Server, r: redis.Redis) -> Iterator[None]:
    """A script runs on the server meanwhile: every other command gets BUSY at once (after
    ``busy-reply-threshold``, 10 ms here)."""
    threshold: Any = r.config_get("busy-reply-threshold")["busy-reply-threshold"]
    r.config_set("busy-reply-threshold", 10)
    spinning = server.client()
    probe = server.client()

    def spin() -> None:
        with contextlib.suppress(redis.ResponseError):  # killed
            spinning.eval(SPIN, 0)

    def busy() -> bool:
        try:
            probe.ping()
        except redis.ResponseError as error:
            return str(error).startswith("BUSY")
        return False

    thread = threading.Thread(target=spin, name="spin", daemon=True)
    thread.start()
    try:
        assert wait_until(busy, 5.0), "the script never ran"
        yield
    finally:
        probe.script_kill()
        thread.join(5.0)
        assert not thread.is_alive()
        r.config_set("busy-reply-threshold", threshold)
        spinning.close()
        probe.close()


def retrying(client: tenure.Client, function: Any, sleep: str) -> bool:
    """A background flow of ``client`` running ``function`` is in its retry pause (at
    its line holding ``sleep``), past the first (it has sent again): closed now, it is
    asked to stop before it sends anything more."""
    lines, first = inspect.getsourcelines(function)
    line = first + next(i for i, text in enumerate(lines) if sleep in text)
    started: Any = client._runner._started
    for flow in list(started):
        frame = getattr(flow, "gi_frame", None)
        if (
            getattr(flow, "gi_code", None) is function.__code__
            and frame is not None
            and frame.f_lineno == line
            and frame.f_locals.get("pause", 0) > RECONCILE_PAUSE[0]
        ):
            return True
    return False


def test_a_closed_client_refuses_with_client_closed_error(
    make_client: Callable[..., tenure.Client],
) -> None:
    client = make_client()
    lock = client.lock("closed-refuses")
    client.close()
    with pytest.raises(ClientClosedError) as raised:
        lock.acquire(timeout=1)
    assert isinstance(raised.value, BackendError)  # every `except BackendError` still works


def test_a_permit_release_finished_in_the_background_stops_when_the_client_closes(
    make_client: Callable[..., tenure.Client],
    server: Server,
    r: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tenure")
    holder = make_client()
    sem = holder.permit_expirable_semaphore("closed-pes")
    assert sem.try_set_permits(1)
    permit = sem.acquire()
    assert permit is not None
    finish = PermitCore._finish_release_permit
    with server_busy(server, r):
        with pytest.raises(BackendError):
            sem.release(permit)  # its finishing now retried in the background
        assert wait_until(lambda: retrying(holder, finish, "yield Sleep("), 3.0)
        holder.close()
        closed = time.monotonic()
        ended = wait_until(lambda: gave_up(caplog, permit), PROMPT)
        took = time.monotonic() - closed
        print(f"the background release stopped {took:.3f} s after close()")
        assert ended, f"still retrying {PROMPT} s after close(): {caplog.text}"
        assert "the client is closed" in gave_up(caplog, permit)


def test_a_lock_reconcile_stops_when_the_client_closes(
    make_client: Callable[..., tenure.Client], server: Server, r: redis.Redis
) -> None:
    holder = make_client()
    lock = holder.lock("closed-lock")
    assert lock.acquire(timeout=5)
    reconciling = holder._runner.ctx.reconciling
    with server_busy(server, r):
        with pytest.raises(BackendError):
            lock.release()  # finished by a reconcile in the background
        reconcile = LockCore.reconcile
        assert wait_until(lambda: retrying(holder, reconcile, "yield Sleep(pause)"), 3.0)
        holder.close()
        closed = time.monotonic()
        ended = wait_until(lambda: not reconciling, PROMPT)
        took = time.monotonic() - closed
        print(f"the reconcile stopped {took:.3f} s after close()")
        assert ended, f"still reconciling {PROMPT} s after close(): {set(reconciling)}"


def gave_up(caplog: pytest.LogCaptureFixture, permit: str) -> str:
    """The message of the background release of ``permit`` ending without an answer
    ("" while it has not)."""
    for record in list(caplog.records):
        message = record.getMessage()
        if "finishing a release of permit" in message and permit in message:
            return message
    return ""


def test_a_reconcile_whose_read_is_in_flight_stops_on_close_as_closed(
    make_client: Callable[..., tenure.Client],
    server: Server,
    r: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """close() while a background reconcile's script waits for its reply (the server
    paused): closing the pool closes that socket under the read, which redis-py reports
    as whatever it met (ValueError: I/O operation on closed file, from its parser's
    buffer). Before, the flow ended with that ValueError, as with a bug; now the backend
    says ClientClosedError, and the reconcile stops on it as after close()."""
    caplog.set_level(logging.DEBUG, logger="tenure")
    holder = make_client()
    lock = holder.lock("closed-in-flight")
    assert lock.acquire(timeout=5)
    reconciling = holder._runner.ctx.reconciling
    with server_busy(server, r):
        with pytest.raises(BackendError):
            lock.release()  # finished by a reconcile in the background
        reconcile = LockCore.reconcile
        # In a pause of 0.1 s or more: the server is paused before it sends again.
        assert wait_until(lambda: retrying(holder, reconcile, "yield Sleep(pause)"), 3.0)
    r.execute_command("CLIENT", "PAUSE", 5000, "WRITE")  # its next script waits
    try:
        assert wait_until(lambda: script_waits(r), 3.0), "the reconcile's script never waited"
        holder.close()
        closed = time.monotonic()
        ended = wait_until(lambda: not reconciling, PROMPT)
        print(f"the reconcile stopped {time.monotonic() - closed:.3f} s after close()")
    finally:
        r.execute_command("CLIENT", "UNPAUSE")
    assert ended, f"still reconciling {PROMPT} s after close()"
    stopped = [rec.getMessage() for rec in caplog.records if "stopped" in rec.getMessage()]
    assert stopped, "the reconcile's end was not logged"
    assert all(m.endswith("stopped: the client is closed") for m in stopped), stopped


def script_waits(r: redis.Redis) -> bool:
    """A script waits on the paused server (its connection flagged ``b``)."""
    return any(
        entry.get("cmd") in ("evalsha", "eval") and "b" in entry["flags"]
        for entry in r.client_list()
    )


def test_a_pause_between_tries_ends_when_the_client_closes(
    make_client: Callable[..., tenure.Client], server: Server, r: redis.Redis
) -> None:
    """close() as a background reconcile begins its longest pause between tries (0.25 s):
    the pause ends then, and the flow with it. Before, it slept to the pause's end."""
    holder = make_client()
    lock = holder.lock("closed-pause")
    assert lock.acquire(timeout=5)
    reconciling = holder._runner.ctx.reconciling
    reconcile = LockCore.reconcile
    longest = RECONCILE_PAUSE[1]
    with server_busy(server, r):
        with pytest.raises(BackendError):
            lock.release()  # finished by a reconcile in the background
        # Its pauses have grown to the longest; close as the next one begins.
        assert wait_until(lambda: pausing(holder, reconcile) == longest, 3.0)
        assert wait_until(lambda: pausing(holder, reconcile) == 0, 1.0, 0.0002)  # it sends
        assert wait_until(lambda: pausing(holder, reconcile) == longest, 1.0, 0.0002)
        holder.close()
        closed = time.monotonic()
        ended = wait_until(lambda: not reconciling, PROMPT, 0.001)
        took = time.monotonic() - closed
    print(f"the reconcile stopped {took:.3f} s after close(), in a pause of {longest} s")
    assert ended, f"still reconciling {PROMPT} s after close()"
    assert took < longest / 2, took


def pausing(client: tenure.Client, function: Any) -> float:
    """The pause (seconds) a background flow of ``client`` running ``function`` is in, at
    its line holding ``yield Sleep(pause)``; 0 when it is elsewhere."""
    lines, first = inspect.getsourcelines(function)
    line = first + next(i for i, text in enumerate(lines) if "yield Sleep(pause)" in text)
    started: Any = client._runner._started
    for flow in list(started):
        frame = getattr(flow, "gi_frame", None)
        if (
            getattr(flow, "gi_code", None) is function.__code__
            and frame is not None
            and frame.f_lineno == line
        ):
            return float(frame.f_locals.get("pause", 0))
    return 0.0
