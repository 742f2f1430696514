# Safety review (issue 9): ReadLock.locked, kind collisions, extend, pub/sub permissions.
"""Safety review items on real servers (issue 9): ``ReadLock.locked`` with a writer's reads,
kind collisions, ``extend``, pub/sub permission errors, the fencing persistence warning.

The caller is a task here and a thread in the generated sync twin (tests/_sync)."""

from __future__ import annotations

import redis

import tenure


# ------------------------------------------------------------------ item 16
async def test_read_side_is_locked_while_the_writer_holds_reads(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    rw = async_client.read_write_lock("rw16")
    read, write = rw.read_lock(), rw.write_lock()
    assert await write.acquire(lease_time=10)
    assert not await read.locked()  # write mode, no read holds: the read side is free
    assert await read.acquire(lease_time=10)  # the writer takes a read hold too
    assert r.hget("rw16", "mode") == b"write"
    assert await read.locked() and await write.locked()
    await read.release()
    assert not await read.locked()
    await write.release()
    assert not await read.locked() and not await write.locked()
