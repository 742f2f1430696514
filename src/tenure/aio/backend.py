"""asyncio twin of :mod:`tenure.sync.backend`: each command sent once, no hidden retries."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
from redis.exceptions import NoScriptError

from tenure.core.context import Context
from tenure.core.effects import Call
from tenure.core.options import check_replicas, replica_wait


class AsyncBackend:
    """Sends commands and scripts over connections of one ``redis.asyncio`` pool."""

    def __init__(self, client: redis.asyncio.Redis, ctx: Context) -> None:
        self.pool = client.connection_pool
        self.ctx = ctx

    async def execute(self, *args: Any) -> Any:
        """One command; its reply. Raises redis-py errors unchanged."""
        conn = await self.pool.get_connection()
        try:
            await conn.send_command(*args)
            return await conn.read_response()
        except redis.ResponseError:
            raise
        except BaseException:  # cancelled or failed mid-command: the socket is out of step
            await conn.disconnect()
            raise
        finally:
            await self.pool.release(conn)

    async def call(self, call: Call) -> Any:
        """One script (EVALSHA, EVAL on NOSCRIPT); then WAIT for replicas if configured."""
        script, keys = call.script, call.keys
        conn = await self.pool.get_connection()
        try:
            try:
                await conn.send_command("EVALSHA", script.sha, len(keys), *keys, *call.args)
                reply = await conn.read_response()
            except NoScriptError:
                await conn.send_command("EVAL", script.source, len(keys), *keys, *call.args)
                reply = await conn.read_response()
            wait = replica_wait(self.ctx, call)
            if wait is None:
                return reply
            await conn.send_command("WAIT", *wait)
            acknowledged = int(await conn.read_response())
        except redis.ResponseError:
            raise
        except BaseException:
            await conn.disconnect()
            raise
        finally:
            await self.pool.release(conn)
        check_replicas(self.ctx, call, reply, acknowledged)
        return reply
