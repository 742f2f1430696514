# GENERATED from tests/_async/test_safety.py by tools/unasync.py: edit that file, not this one.
"""Safety review items on real servers (issue 9): ``ReadLock.locked`` with a writer's reads,
kind collisions, ``extend``, pub/sub permission errors, the fencing persistence warning.

The caller is a task here and a thread in the generated sync twin (tests/_sync)."""

from __future__ import annotations

import redis

import tenure


# ------------------------------------------------------------------ item 16
def test_read_side_is_locked_while_the_writer_holds_reads(
    client: tenure.Client, r: redis.Redis
) -> None:
    rw = client.read_write_lock("rw16")
    read, write = rw.read_lock(), rw.write_lock()
    assert write.acquire(lease_time=10)
    assert not read.locked()  # write mode, no read holds: the read side is free
    assert read.acquire(lease_time=10)  # the writer takes a read hold too
    assert r.hget("rw16", "mode") == b"write"
    assert read.locked() and write.locked()
    read.release()
    assert not read.locked()
    write.release()
    assert not read.locked() and not write.locked()
