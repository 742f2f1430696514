"""The watchdog's renewal pass (``core/watchdog.renew``) and the hold table it works on."""

from __future__ import annotations

import threading

import pytest

from tenure import keys
from tenure.core.context import Context
from tenure.core.fair import FairLockCore
from tenure.core.fenced import FencedLockCore
from tenure.core.holds import Hold
from tenure.core.lock import LockCore
from tenure.core.rwlock import ReadLockCore, WriteLockCore
from tenure.core.watchdog import BATCH, batches, refresh_waiters, renew
from tenure.errors import BackendError, ReplicationError
from tenure.keys import key_slot

from .conftest import new_context
from .scripted import Clock, Do, drive

RENEW = "lock_renew"


def take(lock: LockCore, owner: str, lease: float | None = None, script: str | None = None) -> Hold:
    name = script or lock.acquire_script.name
    assert drive(lock.acquire(owner, True, 0, lease), [(name, None)]).result is True
    hold = lock.ctx.holds.get(lock.key, lock.field(owner))
    assert hold is not None
    return hold


def all_present(call: object) -> list[int]:
    """One 1 per hold of a batch: ARGV is the lease, then a field, a key count and a channel
    per hold."""
    return [1] * ((len(call.args) - 1) // 3)  # type: ignore[attr-defined]


def channel(name: str) -> str:
    """A Lock's channel, told of its renewal."""
    return keys.lock_channel(name)


def held(call: object) -> list[str]:
    """The owner fields of a batch, hold by hold."""
    return list(call.args[1::3])  # type: ignore[attr-defined]


def test_nothing_to_renew_sends_nothing(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "leased"), owner, lease=5)
    run = drive(renew(ctx), [])
    assert run.result == []


def test_renews_watchdog_holds_with_the_watchdog_lease(owner: str) -> None:
    ctx = new_context(watchdog_timeout=9)
    a, b = LockCore(ctx, "a"), LockCore(ctx, "b")
    take(a, owner)
    take(b, owner)
    take(LockCore(ctx, "c"), owner, lease=3)  # has its own lease: not renewed
    run = drive(renew(ctx), [(RENEW, [1, 1])])
    assert run.result == []
    (call,) = run.effects
    assert call.keys == ["a", "b"]
    # each hold's channel is told of its renewal (its waiters sleep on to the new lease end)
    assert call.args == [9000, owner, 1, channel("a"), owner, 1, channel("b")]
    assert call.changes is True  # with wait_for_replicas, a renewal waits for replicas too


def test_hold_with_a_leased_and_a_watchdog_hold_is_renewed(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner, lease=5)
    take(lock, owner)
    (call,) = drive(renew(ctx), [(RENEW, [1])]).effects
    assert call.keys == ["l"]
    assert call.args == [30000, owner, 1, channel("l")]


@pytest.mark.parametrize(
    ("holds", "batches"), [(100, [100]), (101, [100, 1]), (250, [100, 100, 50])]
)
def test_batches_of_one_hundred(ctx: Context, holds: int, batches: list[int]) -> None:
    owner = ctx.identity.thread_owner()
    for i in range(holds):
        take(LockCore(ctx, f"l{i}"), owner)
    assert BATCH == 100
    run = drive(renew(ctx), [(RENEW, Do(all_present))] * len(batches))
    assert [len(c.keys) for c in run.effects] == batches
    start = 0
    for call, size in zip(run.effects, batches, strict=True):
        assert call.keys == [f"l{i}" for i in range(start, start + size)]
        names = range(start, start + size)
        assert call.args == [30000, *(a for i in names for a in (owner, 1, channel(f"l{i}")))]
        start += size


def test_one_call_per_renewal_script(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "plain"), owner)
    take(FairLockCore(ctx, "fair"), owner)
    reader = ReadLockCore(ctx, "rw")
    take(reader, owner, lease=7)
    take(reader, owner)
    take(WriteLockCore(ctx, "rw"), owner)  # the write side renews like a plain lock
    any_renewal = (lambda c: c.script.name.endswith("renew"), Do(all_present))
    run = drive(renew(ctx), [any_renewal] * 2)
    # one batch per script, in the order of each script's first hold in the table; a fair
    # lock's hold renews as a plain one (its waiters' entries do not follow the lease)
    assert run.names == ["lock_renew", "rw_read_renew"]
    plain, read = run.effects
    assert plain.keys == ["plain", "fair", "rw"]
    # a fair lock's waiters listen on channels of their own: no channel for its renewal
    rw = keys.rw_channel("rw")
    assert plain.args == [30000, owner, 1, channel("plain"), owner, 1, "", f"{owner}:write", 1, rw]
    # a read hold: its hash, then the timeout keys of every hold in the table (1..2)
    assert read.keys == [
        "rw",
        f"{{rw}}:{owner}:rwlock_timeout:1",
        f"{{rw}}:{owner}:rwlock_timeout:2",
    ]
    assert read.args == [30000, owner, 3, rw]


def test_a_hold_reported_gone_is_lost_and_removed(ctx: Context, owner: str) -> None:
    a, b = LockCore(ctx, "a"), LockCore(ctx, "b")
    take(a, owner)
    take(b, owner)
    run = drive(renew(ctx), [(RENEW, Do(lambda c: [int(k == "a") for k in c.keys]))])
    assert run.effects[0].keys == ["a", "b"]
    (lost,) = run.result
    assert lost.key == "b"
    assert lost.sink is b
    assert lost.owner == owner
    assert ctx.holds.get("b", owner) is None
    assert ctx.holds.get("a", owner) is not None
    # the driver then reports it: LockLostError at release
    lost.sink.hold_lost(lost.owner)
    assert b.is_lost(owner)
    assert not a.is_lost(owner)


def test_renewal_confirms_at_send_time(ctx: Context, owner: str, clock: Clock) -> None:
    hold = take(LockCore(ctx, "l"), owner)
    assert hold.confirmed == clock.now
    clock.advance(10)
    sent = clock.now

    def slow_reply(call: object) -> list[int]:
        clock.advance(4)  # the reply takes 4 s: the lease was renewed when the call was sent
        return [1]

    drive(renew(ctx), [(RENEW, Do(slow_reply))])
    assert hold.confirmed == sent


def test_backend_error_keeps_holds_until_their_lease_surely_ran_out(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    hold = take(lock, owner)  # confirmed at t0, lease 30 s, valid for 30 - 0.302 s
    assert hold.valid_until == pytest.approx(clock.now + 29.698)
    clock.advance(10)
    assert drive(renew(ctx), [(RENEW, BackendError("down"))]).result == []
    assert ctx.holds.expired(clock.now) == []
    clock.advance(19.697)
    assert drive(renew(ctx), [(RENEW, BackendError("down"))]).result == []
    assert ctx.holds.expired(clock.now) == []
    assert ctx.holds.get("l", owner) is hold
    clock.advance(0.002)  # the lease surely ran out on the local clock: lost, no I/O needed
    assert ctx.holds.expired(clock.now) == [hold]
    assert ctx.holds.get("l", owner) is None
    assert drive(renew(ctx), []).result == []


def test_a_leased_hold_expires_on_the_clock_too(ctx: Context, owner: str, clock: Clock) -> None:
    hold = take(LockCore(ctx, "l"), owner, lease=2)
    assert ctx.holds.plan(clock.now + 10) == pytest.approx(clock.now + 2 - 0.022)
    clock.advance(1.977)
    assert ctx.holds.expired(clock.now) == []
    clock.advance(0.002)
    assert ctx.holds.expired(clock.now) == [hold]


def test_backend_error_counts_from_the_last_successful_renewal(
    ctx: Context, owner: str, clock: Clock
) -> None:
    hold = take(LockCore(ctx, "l"), owner)
    clock.advance(20)
    drive(renew(ctx), [(RENEW, [1])])
    clock.advance(29)  # 49 s after the grant, 29 s after the renewal
    assert drive(renew(ctx), [(RENEW, BackendError)]).result == []
    assert ctx.holds.expired(clock.now) == []
    clock.advance(0.7)
    assert ctx.holds.expired(clock.now) == [hold]


def test_unacknowledged_renewal_confirms_nothing(owner: str, clock: Clock) -> None:
    """A renewal too few replicas saw does not move the lease's end (issue 9 item 9)."""
    ctx = new_context(wait_for_replicas=1)
    hold = take(LockCore(ctx, "l"), owner)
    end = hold.valid_until
    clock.advance(10)
    refused = ReplicationError("0 of 1 replicas", reply=[1], acknowledged=0)
    assert drive(renew(ctx), [(RENEW, refused)]).result == []
    assert hold.valid_until == end


def test_backend_error_in_one_batch_does_not_stop_the_others(
    ctx: Context, owner: str, clock: Clock
) -> None:
    for i in range(150):
        take(LockCore(ctx, f"l{i}"), owner)
    clock.advance(31)
    run = drive(renew(ctx), [(RENEW, BackendError("first batch failed")), (RENEW, Do(all_present))])
    assert run.result == []
    assert len(ctx.holds.expired(clock.now)) == 100  # unconfirmed and past their lease
    assert len(ctx.holds.watchdog_holds()) == 50


def test_hold_released_while_the_renewal_was_in_flight_is_not_lost(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)

    def released_meanwhile(call: object) -> list[int]:
        ctx.holds.pop("l", owner)  # release() forgets the hold before its script
        return [0]

    assert drive(renew(ctx), [(RENEW, Do(released_meanwhile))]).result == []


def test_hold_reacquired_while_the_renewal_was_in_flight_is_left_alone(
    ctx: Context, owner: str, clock: Clock
) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner)

    def released_and_taken_again(call: object) -> list[int]:
        ctx.holds.pop("l", owner)
        take(lock, owner)
        return [0]

    assert drive(renew(ctx), [(RENEW, Do(released_and_taken_again))]).result == []
    assert ctx.holds.get("l", owner) is not None

    def released_and_taken_again_then_error(call: object) -> None:
        ctx.holds.pop("l", owner)
        take(lock, owner)
        raise BackendError("down")

    clock.advance(100)
    run = drive(renew(ctx), [(RENEW, Do(released_and_taken_again_then_error))])
    assert run.result == []


def test_renewal_replies_as_bytes_or_str(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "a"), owner)
    take(LockCore(ctx, "b"), owner)
    run = drive(renew(ctx), [(RENEW, Do(lambda c: [b"1", "0"]))])
    assert [h.key for h in run.result] == [run.effects[0].keys[1]]


def test_reply_is_per_hold_not_per_key(ctx: Context, owner: str) -> None:
    mate = ctx.identity.owner_of(threading.Event())  # another task of the client
    reader = ReadLockCore(ctx, "r")
    for who in (owner, owner, owner, mate):
        take(reader, who)
    take(ReadLockCore(ctx, "s"), owner)
    run = drive(renew(ctx), [("rw_read_renew", Do(lambda c: [1, 0, 1]))])
    (call,) = run.effects
    assert held(call) == [owner, mate, owner]
    r, s = keys.rw_channel("r"), keys.rw_channel("s")
    assert call.args == [30000, owner, 4, r, mate, 2, r, owner, 2, s]
    assert call.keys == [
        "r",
        *(f"{{r}}:{owner}:rwlock_timeout:{n}" for n in (1, 2, 3)),
        "r",
        f"{{r}}:{mate}:rwlock_timeout:1",
        "s",
        f"{{s}}:{owner}:rwlock_timeout:1",
    ]
    (lost,) = run.result
    assert lost.key == "r"
    assert lost.owner == mate
    assert ctx.holds.get("r", owner) is not None
    assert ctx.holds.get("s", owner) is not None


# ------------------------------------------------------------------------ renewal keys


def test_renewal_keys_per_kind(ctx: Context, owner: str) -> None:
    assert LockCore(ctx, "l").renewal_keys(owner, 3) == ["l"]
    assert FencedLockCore(ctx, "t").renewal_keys(owner, 1) == ["t"]
    assert WriteLockCore(ctx, "rw").renewal_keys(owner, 2) == ["rw"]
    assert FairLockCore(ctx, "f").renewal_keys(owner, 2) == ["f"]
    read = ReadLockCore(ctx, "rw")
    assert read.renewal_keys(owner, 1) == ["rw", f"{{rw}}:{owner}:rwlock_timeout:1"]
    assert read.renewal_keys(owner, 3) == [
        "rw",
        f"{{rw}}:{owner}:rwlock_timeout:1",
        f"{{rw}}:{owner}:rwlock_timeout:2",
        f"{{rw}}:{owner}:rwlock_timeout:3",
    ]


def test_renewal_keys_of_prefixed_and_tagged_names(owner: str) -> None:
    ctx = new_context(name_prefix="app:")
    assert LockCore(ctx, "l").renewal_keys(owner, 1) == ["app:l"]
    assert FairLockCore(ctx, "{t}f").renewal_keys(owner, 1) == ["app:{t}f"]
    assert ReadLockCore(ctx, "{t}r").renewal_keys(owner, 2) == [
        "app:{t}r",
        f"app:{{t}}r:{owner}:rwlock_timeout:1",
        f"app:{{t}}r:{owner}:rwlock_timeout:2",
    ]
    # every key of a hold shares its lock's slot
    for lock in (FairLockCore(ctx, "f"), ReadLockCore(ctx, "r")):
        assert len({key_slot(k) for k in lock.renewal_keys(owner, 2)}) == 1


def test_a_hold_names_its_keys_by_its_count_of_holds(ctx: Context, owner: str) -> None:
    reader = ReadLockCore(ctx, "rw")
    hold = take(reader, owner, lease=3)
    assert hold.renewal_keys() == ["rw", f"{{rw}}:{owner}:rwlock_timeout:1"]
    take(reader, owner)
    assert hold.renewal_keys() == reader.renewal_keys(owner, 2)
    fair = take(FairLockCore(ctx, "f"), owner)
    take(FairLockCore(ctx, "f"), owner)
    assert fair.renewal_keys() == ["f"]


# ------------------------------------------------------------------- batches by slot


def test_batches_group_by_hash_slot(ctx: Context, owner: str) -> None:
    assert key_slot("a") == key_slot("exj") == 15495  # CLUSTER KEYSLOT a
    assert key_slot("b") != key_slot("a")
    names = ["{a}:1", "{b}:1", "{exj}:2", "a", "{b}:2", "c"]
    holds = [take(LockCore(ctx, name), owner) for name in names]
    by_key = {h.key: h for h in holds}
    assert [(s.name, b) for s, b in batches(holds)] == [("lock_renew", holds)]
    grouped = [(s.name, [h.key for h in b]) for s, b in batches(holds, by_slot=True)]
    # one batch per slot, in order of first appearance; equal slots share a batch
    assert grouped == [
        ("lock_renew", ["{a}:1", "{exj}:2", "a"]),
        ("lock_renew", ["{b}:1", "{b}:2"]),
        ("lock_renew", ["c"]),
    ]
    for _, batch in batches(holds, by_slot=True):
        assert len({key_slot(k) for h in batch for k in h.renewal_keys()}) == 1
    run = drive(renew(ctx, by_slot=True), [(RENEW, Do(all_present))] * 3)
    assert [c.keys for c in run.effects] == [keys for _, keys in grouped]
    assert run.effects[0].args == [
        30000, *(a for k in grouped[0][1] for a in (owner, 1, channel(k)))
    ]  # fmt: skip
    assert run.result == []
    assert ctx.holds.watchdog_holds() == list(by_key.values())


def test_batches_by_slot_keep_scripts_apart_and_split_at_one_hundred(
    ctx: Context, owner: str
) -> None:
    holds = [take(LockCore(ctx, f"{{s}}:{i}"), owner) for i in range(BATCH + 5)]
    holds.append(take(FairLockCore(ctx, "{s}:fair"), owner))
    holds.append(take(ReadLockCore(ctx, "{s}:read"), owner))
    sizes = [(s.name, len(b)) for s, b in batches(holds, by_slot=True)]
    assert sizes == [
        ("lock_renew", BATCH),
        ("lock_renew", 6),
        ("rw_read_renew", 1),
    ]
    assert [(s.name, len(b)) for s, b in batches(holds)] == sizes


def test_batches_by_slot_of_prefixed_names(owner: str) -> None:
    ctx = new_context(name_prefix="app:")
    holds = [take(LockCore(ctx, name), owner) for name in ("x", "y", "{x}z")]
    assert holds[2].key == "app:{x}z"
    grouped = [[h.key for h in b] for _, b in batches(holds, by_slot=True)]
    slots = {key_slot("app:x"), key_slot("app:y")}
    assert len(slots) == 2  # untagged keys: the whole key (prefix included) picks the slot
    assert key_slot("app:{x}z") == key_slot("x") not in slots
    assert grouped == [["app:x"], ["app:y"], ["app:{x}z"]]


# ------------------------------------------------------------------------ hold table


def test_hold_table_pop_takes_the_newest_then_the_entry(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    take(lock, owner, lease=1)
    take(lock, owner, lease=2)
    hold = ctx.holds.pop("l", owner)
    assert hold is not None
    assert hold.leases == [1]
    ctx.holds.pop("l", owner)
    assert ctx.holds.get("l", owner) is None
    assert ctx.holds.pop("l", owner) is None


def test_context_after_fork_owns_nothing(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "l"), owner)
    assert ctx.forked() is False
    before = ctx.identity.client_id
    ctx.identity.pid = -1  # as seen from a forked child
    assert ctx.forked() is True
    assert ctx.identity.client_id != before
    assert ctx.holds.watchdog_holds() == []
    assert ctx.identity.thread_owner() != owner


def test_owner_numbers_are_per_thread_and_never_reused(ctx: Context, owner: str) -> None:
    assert ctx.identity.thread_owner() == owner
    assert owner.startswith(ctx.identity.client_id + ":")
    seen: list[str] = []
    for _ in range(3):
        t = threading.Thread(target=lambda: seen.append(ctx.identity.thread_owner()))
        t.start()
        t.join()
    assert len({owner, *seen}) == 4


def test_hold_table_clear(ctx: Context, owner: str) -> None:
    take(LockCore(ctx, "l"), owner)
    ctx.holds.clear()
    assert ctx.holds.get("l", owner) is None
    assert drive(renew(ctx), []).result == []


# ------------------------------------------------------------ fair waiters' entries


def test_queued_fair_waiters_are_refreshed_in_batches_per_slot(owner: str) -> None:
    ctx = new_context(watchdog_timeout=3.0)
    locks = [FairLockCore(ctx, f"{{s}}:{i}") for i in range(BATCH + 1)] + [FairLockCore(ctx, "t")]
    for lock in locks:
        ctx.holds.waiters.add(lock, owner)
    run = drive(
        refresh_waiters(ctx, by_slot=True),
        [("fair_refresh", [1] * BATCH), ("fair_refresh", [0]), ("fair_refresh", [1])],
    )
    assert run.result == 1  # one entry was gone
    first = run.effects[0]
    assert first.keys[:4] == locks[0].waiter_keys()
    assert len(first.keys) == 4 * BATCH
    # entry lease, grace (one renewal period), wake-up message, then owner and channel prefix
    assert first.args[:5] == [3000, 1000, "0", owner, "redisson_lock__channel:{s}:0:"]
    for call in run.effects:
        assert len({key_slot(k) for k in call.keys}) == 1
    ctx.holds.waiters.remove(locks[0], owner)
    assert len(ctx.holds.waiters) == len(locks) - 1


def test_waiters_of_ended_owners_are_not_refreshed(ctx: Context, owner: str) -> None:
    lock = FairLockCore(ctx, "f")
    ctx.holds.waiters.add(lock, f"{ctx.identity.client_id}:999999")  # no such thread or task
    assert drive(refresh_waiters(ctx), []).effects == []
    assert len(ctx.holds.waiters) == 0
