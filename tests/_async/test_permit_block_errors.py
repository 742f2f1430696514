# A permit block whose body raises (asyncio source of tests/_sync/test_permit_block_errors.py).
"""``with psem(...) as permit_id:`` when the body raises: the body's exception propagates
and the permit goes back; if giving it back fails too (the permit was taken away behind the
client's back), the body's exception still propagates, with the failure attached as a note
(DESIGN §2.1: the body's exception wins, the other one is a note)."""

from __future__ import annotations

import pytest

from tenure import keys


class BodyError(Exception):
    """What the block's body raises."""


async def test_a_body_that_raises_gives_the_permit_back(async_client):
    psem = async_client.permit_expirable_semaphore("permit-body")
    assert await psem.try_set_permits(1)
    taken: list[str] = []

    async def work() -> None:
        async with psem(timeout=1, lease_time=10) as permit:
            taken.append(permit)
            assert await psem.available_permits() == 0
            raise BodyError("the work failed")

    with pytest.raises(BodyError, match="the work failed") as caught:
        await work()
    assert not getattr(caught.value, "__notes__", None)  # the release went well
    assert await psem.available_permits() == 1  # given back, not left to its lease
    assert await psem.remaining_lease(taken[0]) is None
    again = await psem.acquire(blocking=False)  # another caller gets it at once
    assert again is not None
    await psem.release(again)


async def test_a_failed_release_after_a_raising_body_is_a_note_on_the_bodys_error(async_client, r):
    psem = async_client.permit_expirable_semaphore("permit-note")
    assert await psem.try_set_permits(1)
    taken: list[str] = []

    async def work() -> None:
        async with psem(timeout=1, lease_time=10) as permit:
            taken.append(permit)
            # Taken away on the server (a lease of 10 s: no renewal looks meanwhile).
            assert r.zrem(keys.permit_timeout_key("permit-note"), bytes.fromhex(permit)) == 1
            raise BodyError("the work failed")

    with pytest.raises(BodyError) as caught:
        await work()
    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1, notes
    assert f"releasing permit {taken[0]} failed too" in notes[0]
    assert "NotOwnedError" in notes[0] or "LockLostError" in notes[0]
