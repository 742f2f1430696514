"""Properties: reentrancy against a model server, and the wait arithmetic of the loop."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tenure.core.args import to_ms
from tenure.core.effects import MIN_WAIT, wait_for
from tenure.core.lock import LockCore
from tenure.core.watchdog import renew
from tenure.errors import LockLostError, NotOwnedError

from .conftest import new_context
from .scripted import Do, drive


@dataclass
class Model:
    """What the server holds and what the client should believe, for two owners."""

    server: dict[str, int] = field(default_factory=dict)
    leases: dict[str, list[float | None]] = field(default_factory=dict)
    unreported: set[str] = field(default_factory=set)


leases = st.sampled_from([None, 1.0, 2.5])
kinds = st.sampled_from(["acquire"] * 4 + ["release"] * 3 + ["expire", "renew"])
operations = st.lists(
    st.tuples(kinds, st.sampled_from([0, 0, 0, 1]), leases),  # mostly the same owner
    max_size=30,
)


@given(operations)
@settings(max_examples=150, deadline=None)
def test_reentrancy_matches_a_model_server(ops: list[tuple[str, int, float | None]]) -> None:
    ctx = new_context(watchdog_timeout=30)
    lock = LockCore(ctx, "l")
    owners = [ctx.identity.thread_owner(), "other-client:1"]
    model = Model()

    def acquire_reply(call: object) -> int | str | None:
        owner = call.args[1]  # type: ignore[attr-defined]
        if call.args[2:3] == [2] and owner not in model.server:  # type: ignore[attr-defined]
            return "lost"  # a re-entry expected, and the hold is gone: nothing granted
        if not model.server or owner in model.server:
            model.server[owner] = model.server.get(owner, 0) + 1
            return None
        return 1000

    def release_reply(call: object) -> int | None:
        owner = call.args[2]  # type: ignore[attr-defined]
        if owner not in model.server:
            return None
        model.server[owner] -= 1
        if model.server[owner]:
            return 0
        del model.server[owner]
        return 1

    def renew_reply(call: object) -> list[int]:
        # ARGV: lease, then per hold its owner field, its key count (one: the hash) and the
        # channel told of the renewal
        args = call.args  # type: ignore[attr-defined]
        fields, counts, channels = args[1::3], args[2::3], args[3::3]
        assert args[0] == 30000
        assert counts == [1] * len(fields)
        assert channels == ["redisson_lock__channel:{l}"] * len(fields)
        assert call.keys == ["l"] * len(fields)  # type: ignore[attr-defined]
        return [int(o in model.server) for o in fields]

    for op, who, lease in ops:
        owner = owners[who]
        mine = model.leases.setdefault(owner, [])
        if op == "acquire":
            free = not model.server or owner in model.server
            reentry = bool(mine)
            run = drive(
                lock.acquire(owner, False, None, lease),
                [("lock_acquire", Do(acquire_reply))],
                raises=True,
            )
            assert run.effects[0].args == [to_ms(lease or 30), owner, *([2] * reentry)]
            if reentry and owner not in model.server:
                # Its earlier hold was lost: reported, and the acquire took nothing.
                event("re-entry found the hold lost")
                assert type(run.error) is LockLostError
                mine.clear()
                model.unreported.add(owner)
            else:
                assert run.error is None
                assert run.result is free
            if free and not (reentry and owner not in model.server):
                mine.append(lease)
                model.unreported.discard(owner)
        elif op == "release" and not mine and owner in model.unreported:
            run = drive(lock.release(owner), [], raises=True)  # a known loss: no I/O
            event("release raised LockLostError with no I/O")
            assert type(run.error) is LockLostError
            model.unreported.discard(owner)
        elif op == "release":
            had_hold = bool(mine)
            if mine:
                mine.pop()
            run = drive(lock.release(owner), [("lock_release", Do(release_reply))], raises=True)
            assert run.effects[0].args[1] == to_ms((mine[-1] if mine else None) or 30)
            if run.error is None:
                event(f"release reply {'1' if owner not in model.server else '0'}")
                if owner not in model.server and mine:
                    # Reply 1 while the client counted more: a loss, reported.
                    event("release found the other holds lost")
                    model.unreported.add(owner)
                if owner not in model.server:
                    mine.clear()  # reply 1: the last hold is gone
            else:
                if had_hold or owner in model.unreported:
                    event("release raised LockLostError")
                    assert type(run.error) is LockLostError
                else:
                    assert type(run.error) is NotOwnedError
                model.unreported.discard(owner)
                mine.clear()
        elif op == "expire":
            model.server.clear()
        else:
            renewing = any(None in model.leases.get(o, []) for o in owners)
            run = drive(renew(ctx), [("lock_renew", Do(renew_reply))] if renewing else [])
            for hold in run.result:
                event("renewal found a hold lost")
                hold.sink.hold_lost(hold.owner)
                model.leases[hold.owner].clear()
                model.unreported.add(hold.owner)
        for o in owners:
            hold = ctx.holds.get("l", o)
            assert (hold.leases if hold else []) == model.leases.get(o, [])
            assert hold is None or hold.leases  # no empty entries


class Remaining:
    """A deadline stand-in: ``wait_for`` only asks for the seconds left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def remaining(self) -> float:
        return self.seconds


@given(
    ttl=st.integers(min_value=-1, max_value=10**9),
    left=st.floats(min_value=0, max_value=1e9) | st.just(math.inf),
)
@settings(max_examples=300, deadline=None)
def test_wait_is_the_sooner_of_lease_end_and_deadline_never_below_min(
    ttl: int, left: float
) -> None:
    seconds = wait_for(ttl, Remaining(left))  # type: ignore[arg-type]
    assert seconds >= MIN_WAIT
    if ttl >= 0:
        assert seconds <= max(MIN_WAIT, ttl / 1000)
    assert seconds <= max(MIN_WAIT, left)
    lease_end = ttl / 1000 if ttl >= 0 else math.inf
    assert seconds == max(MIN_WAIT, min(lease_end, left))
