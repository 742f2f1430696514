"""Bugs the simulator (tenure.testing.sim) found, pinned as plain flow tests: each drives the
core flow through the exact steps of the failing run with scripted replies, no server."""

from __future__ import annotations

from typing import Any

import pytest

from tenure.core.context import Context
from tenure.core.effects import Background, Call
from tenure.core.fair import FairLockCore


class _Owner:
    """What an owner id is made for (held weakly by the identity)."""


# Found by the simulator (interrupts=4.0, slow=0.1, "orphan hold"): a sync FairLock acquire
# with lease_time interrupted right after its grant was recorded, at the turn watcher's
# Background (reply 'W'), kept the hold: the acquire's clean-up did not know the grant was
# recorded. It now compares the recorded holds with those before the attempt.
def test_an_interrupt_at_the_turn_watch_after_a_fair_grant_leaves_no_hold() -> None:
    ctx = Context(watchdog_timeout=30.0, name_prefix="", wait_for_replicas=0, replica_timeout=0)
    core = FairLockCore(ctx, "f")
    token = _Owner()
    owner = ctx.identity.owner_of(token, running=lambda _: True)
    flow = core.acquire(owner, True, 5.0, 2.0)

    def drive() -> None:
        effect: Any = flow.send(None)
        interrupted = False
        while True:
            if isinstance(effect, Call) and effect.script.name == "fair_acquire":
                effect = flow.send(b"W")  # granted, waiters remain
            elif isinstance(effect, Background) and not interrupted:
                # the turn watcher's start: the signal handler raises here
                interrupted = True
                effect = flow.throw(KeyboardInterrupt())
            else:
                effect = flow.send(None)

    with pytest.raises(KeyboardInterrupt):
        drive()
    assert ctx.holds.get(core.key, owner) is None, "the interrupted grant is still recorded"
