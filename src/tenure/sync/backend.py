# GENERATED from src/tenure/aio/backend.py by tools/unasync.py: edit that file, not this one.
"""Commands on the client's redis-py pools, once each: no hidden retries.

redis-py retries a failed command on the same connection object by default, which multiplies
the time a dead server takes to report and can send a lock script twice. tenure sends each
command once and lets the algorithm decide what a failure means. A command that failed or
was cancelled mid-way disconnects its socket, so a late reply is never read by the next user.

In a cluster each command goes to the node owning its first key's slot (every key of one
script shares a slot, DESIGN §3). A MOVED or ASK reply means the command did not run, so it
is sent again where the cluster says (MOVED also updates the slot map; TRYAGAIN, a script
whose keys are split by a migration in progress, is resent shortly); a connection failure
is not retried, but the slot map is refreshed before the next command (a replica may have
been promoted).
"""

from __future__ import annotations

from typing import Any

from tenure._concurrency import sleep
from tenure._redis import (
    AskError,
    Route,
    MovedError,
    NoScriptError,
    ResponseError,
    TryAgainError,
    send_command,
    check_one_slot,
)
from tenure.core.context import Context
from tenure.core.effects import Call
from tenure.core.options import check_replicas, replica_wait
from tenure.scripts import sharded

REDIRECTS = 20
"""MOVED/ASK/TRYAGAIN replies followed for one command before giving up."""
TRY_AGAIN = 0.05
"""Seconds before resending after TRYAGAIN (a multi-key script while its slot migrates)."""


class Backend:
    """Sends commands and scripts over the connection pool that serves their keys."""

    def __init__(self, route: Route, ctx: Context) -> None:
        self.route = route
        self.ctx = ctx

    def execute(self, *args: Any) -> Any:
        """One command; its reply. Raises redis-py errors unchanged."""
        key = str(args[1]) if len(args) > 1 else None
        return self._routed(key, self._command, args)

    def call(self, call: Call) -> Any:
        """One script (EVALSHA, EVAL on NOSCRIPT); then WAIT for replicas if configured.

        Raises ValueError, before any I/O, in a cluster when the keys span slots (a name
        with a ``{`` but no non-empty ``{tag}``: its Redisson-layout keys hash apart).
        """
        if self.route.cluster and call.keys:
            check_one_slot(call.script.name, call.keys)
        reply, acknowledged = self._routed(
            call.keys[0] if call.keys else None, self._script, call
        )
        if acknowledged is not None:
            check_replicas(self.ctx, call, reply, acknowledged)
        return reply

    def _routed(self, key: str | None, send: Any, what: Any) -> Any:
        pool = self.route.pool_for(key)
        asking = False
        for _ in range(REDIRECTS):
            try:
                return self._on(pool, send, what, asking)
            except MovedError as moved:
                self.route.moved(moved)
                pool, asking = self.route.pool_for(key), False
            except AskError as ask:
                pool, asking = self.route.pool_at(ask.host, ask.port), True
            except TryAgainError:  # did not run: the slot is half-migrated for a moment
                sleep(TRY_AGAIN)
                pool, asking = self.route.pool_for(key), False
        return self._on(pool, send, what, asking)

    def _on(self, pool: Any, send: Any, what: Any, asking: bool) -> Any:
        try:
            conn = pool.get_connection()
        except BaseException:  # refused: the node may be gone
            self.route.failed()
            raise
        try:
            if asking:
                send_command(conn, "ASKING")
                conn.read_response()
            return send(conn, what)
        except ResponseError:
            raise
        except BaseException:  # the reply may still be on its way: never reuse this socket
            conn.disconnect()
            self.route.failed()
            raise
        finally:
            pool.release(conn)

    def _command(self, conn: Any, args: Any) -> Any:
        send_command(conn, *args)
        return conn.read_response()

    def _script(self, conn: Any, call: Call) -> tuple[Any, int | None]:
        script, keys = call.script, call.keys
        if self.route.sharded:
            script = sharded(script)
        try:
            send_command(conn, "EVALSHA", script.sha, len(keys), *keys, *call.args)
            reply = conn.read_response()
        except NoScriptError:
            send_command(conn, "EVAL", script.source, len(keys), *keys, *call.args)
            reply = conn.read_response()
        wait = replica_wait(self.ctx, call, reply)
        if wait is None:
            return reply, None
        send_command(conn, "WAIT", *wait)
        return reply, int(conn.read_response())
