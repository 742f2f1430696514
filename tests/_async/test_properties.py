# Property tests (asyncio source of tests/_sync/test_properties.py).
"""Property tests: random acquire/release sequences against a model, on a real server."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenure

names = itertools.count()

STEP = st.one_of(
    st.tuples(st.just("acquire"), st.integers(0, 1), st.sampled_from([None, 30.0])),
    st.tuples(st.just("release"), st.integers(0, 1), st.none()),
)


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(STEP, max_size=15))
async def test_reentrant_lock_matches_model(server, steps):
    """Two owners (two clients) issue random non-blocking acquires and releases.

    The model: the lock is free or held by one owner with a hold count; an acquire succeeds
    iff free or already the caller's; a release without a hold raises NotOwnedError.
    """
    async with tenure.AsyncClient(server.url) as a, tenure.AsyncClient(server.url) as b:
        name = f"prop{next(names)}"
        locks = [a.lock(name), b.lock(name)]
        counts = [0, 0]
        for action, who, lease in steps:
            if action == "acquire":
                free_or_mine = counts[1 - who] == 0
                got = await locks[who].acquire(blocking=False, lease_time=lease)
                assert got == free_or_mine
                if free_or_mine:
                    counts[who] += 1
            elif counts[who] == 0:
                with pytest.raises(tenure.NotOwnedError):
                    await locks[who].release()
            else:
                await locks[who].release()
                counts[who] -= 1
            # the server agrees with the model after every step
            for i in (0, 1):
                assert await locks[i].hold_count() == counts[i]
                assert await locks[i].owned() == (counts[i] > 0)
            assert await locks[0].locked() == any(counts)
