"""Times and names that would make a script fail after it wrote refuse before any I/O."""

from __future__ import annotations

import pytest

from tenure.core.args import MAX_SECONDS, check_name
from tenure.core.context import Context
from tenure.core.fair import FairLockCore
from tenure.core.lock import LockCore
from tenure.core.options import make_context

from .scripted import drive


def context(**options: object) -> Context:
    defaults: dict[str, object] = dict(
        watchdog_timeout=30.0, name_prefix="", wait_for_replicas=0, replica_timeout=1.0
    )
    defaults.update(options)
    return make_context(**defaults)


@pytest.mark.parametrize("lease", [MAX_SECONDS * 10, 9.3e15, 1e300])
def test_lease_beyond_what_pexpire_takes_refused_before_io(lease: float) -> None:
    core = LockCore(context(), "big")
    with pytest.raises(ValueError, match="lease_time"):
        core.acquire("owner:1", True, None, lease)  # the flow never starts


def test_largest_lease_passes_and_its_ms_are_exact() -> None:
    core = LockCore(context(), "big")
    assert core.lease_ms(MAX_SECONDS) == 10**15 < 2**53


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("watchdog_timeout", 9.3e15),
        ("watchdog_timeout", 0.1),
        ("watchdog_timeout", 0.001),
        ("replica_timeout", MAX_SECONDS * 2),
    ],
)
def test_client_times_have_bounds(option: str, value: float) -> None:
    with pytest.raises(ValueError, match=option):
        context(**{option: value})


def test_sane_watchdog_timeout_accepted() -> None:
    assert context(watchdog_timeout=0.2).watchdog_timeout == 0.2


def test_fair_queue_entry_lasts_three_renewal_periods_whatever_the_wait() -> None:
    lock = FairLockCore(context(watchdog_timeout=3.0), "f")
    assert lock.entry_ms() == 3000
    run = drive(lock.acquire("u:1", True, 1e20, None), [("fair_acquire", None)])
    assert run.effects[0].args[2:4] == [3000, 1000]


@pytest.mark.parametrize("name", ["\ud800", "ok\udfffno"])
def test_unencodable_name_refused_before_io(name: str) -> None:
    with pytest.raises(ValueError, match="UTF-8"):
        check_name(name)
    with pytest.raises(ValueError, match="name"):
        LockCore(context(), name)
