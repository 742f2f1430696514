"""SpinLock's back-off (Redisson's default ExponentialBackOff), with no server."""

from __future__ import annotations

import itertools
import random

from tenure.core.spin import MAX_DELAY, BackOff


def test_pauses_start_at_1_ms_double_with_growing_jitter_and_cap_at_128_ms() -> None:
    for seed in range(50):
        backoff = BackOff(random.Random(seed))
        pauses = [round(backoff.next() * 1000) for _ in range(30)]
        assert pauses[0] == 1
        for n, (before, after) in enumerate(itertools.pairwise(pauses), start=1):
            if before == 128:
                assert after == 128
            else:  # twice the last, plus 0 .. n-1 ms of jitter, at most 128
                assert min(128, 2 * before) <= after <= min(128, 2 * before + n - 1)
        assert pauses[-1] == round(MAX_DELAY * 1000)
        assert pauses.index(128) <= 8  # the cap is reached after at most 8 refusals


def test_without_jitter_the_pauses_are_powers_of_two() -> None:
    class Zero(random.Random):
        def randrange(self, *args: object, **kwargs: object) -> int:
            return 0

    backoff = BackOff(Zero())
    pauses = [round(backoff.next() * 1000) for _ in range(10)]
    assert pauses == [1, 2, 4, 8, 16, 32, 64, 128, 128, 128]
