"""Property tests: random acquire/release sequences against a model, on a real server."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import tenure

names = itertools.count()


def test_reentrant_lock_matches_model(server, r):
    """Two owners (two clients) issue random non-blocking acquires and releases.

    The model: the lock is free or held by one owner with a hold count; an acquire succeeds
    iff free or already the caller's; a release without a hold raises NotOwnedError.
    """

    class LockModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.clients = [tenure.Client(server.url) for _ in range(2)]
            name = f"prop{next(names)}"
            self.locks = [c.lock(name) for c in self.clients]
            self.counts = [0, 0]

        @rule(who=st.integers(0, 1), lease=st.sampled_from([None, 30.0]))
        def acquire(self, who: int, lease: float | None) -> None:
            free_or_mine = self.counts[1 - who] == 0
            assert self.locks[who].acquire(blocking=False, lease_time=lease) == free_or_mine
            if free_or_mine:
                self.counts[who] += 1

        @rule(who=st.integers(0, 1))
        def release(self, who: int) -> None:
            if self.counts[who] == 0:
                with pytest.raises(tenure.NotOwnedError):
                    self.locks[who].release()
            else:
                self.locks[who].release()
                self.counts[who] -= 1

        @invariant()
        def server_agrees(self) -> None:
            for who in (0, 1):
                assert self.locks[who].hold_count() == self.counts[who]
                assert self.locks[who].owned() == (self.counts[who] > 0)
            assert self.locks[0].locked() == any(self.counts)

        def teardown(self) -> None:
            for c in self.clients:
                c.close()

    run_state_machine_as_test(
        LockModel, settings=settings(max_examples=25, stateful_step_count=15, deadline=None)
    )
