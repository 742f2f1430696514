# GENERATED from src/tenure/aio/backend.py by tools/unasync.py: edit that file, not this one.
"""Commands on the client's redis-py pool, once each: no hidden retries.

redis-py retries a failed command on the same connection object by default, which multiplies
the time a dead server takes to report and can send a lock script twice. tenure sends each
command once and lets the algorithm decide what a failure means. A command that failed or
was cancelled mid-way disconnects its socket, so a late reply is never read by the next user.
"""

from __future__ import annotations

from typing import Any

from tenure._redis import Redis, NoScriptError, ResponseError
from tenure.core.context import Context
from tenure.core.effects import Call
from tenure.core.options import check_replicas, replica_wait


class Backend:
    """Sends commands and scripts over connections of one redis-py connection pool."""

    def __init__(self, client: Redis, ctx: Context) -> None:
        self.pool = client.connection_pool
        self.ctx = ctx

    def execute(self, *args: Any) -> Any:
        """One command; its reply. Raises redis-py errors unchanged."""
        conn = self.pool.get_connection()
        try:
            conn.send_command(*args)
            return conn.read_response()
        except ResponseError:
            raise
        except BaseException:  # the reply may still be on its way: never reuse this socket
            conn.disconnect()
            raise
        finally:
            self.pool.release(conn)

    def call(self, call: Call) -> Any:
        """One script (EVALSHA, EVAL on NOSCRIPT); then WAIT for replicas if configured."""
        script, keys = call.script, call.keys
        conn = self.pool.get_connection()
        try:
            try:
                conn.send_command("EVALSHA", script.sha, len(keys), *keys, *call.args)
                reply = conn.read_response()
            except NoScriptError:
                conn.send_command("EVAL", script.source, len(keys), *keys, *call.args)
                reply = conn.read_response()
            wait = replica_wait(self.ctx, call, reply)
            if wait is None:
                return reply
            conn.send_command("WAIT", *wait)
            acknowledged = int(conn.read_response())
        except ResponseError:
            raise
        except BaseException:
            conn.disconnect()
            raise
        finally:
            self.pool.release(conn)
        check_replicas(self.ctx, call, reply, acknowledged)
        return reply
