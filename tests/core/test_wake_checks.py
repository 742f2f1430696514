"""The back-up looks after targeted unlocks (`tenure.core.lock.WAKE_CHECK_GRACE`): one
flow per client makes them, so that a release starts no thread or task while another
flow runs (issue 27: a thread started per release ran beside the woken client's acquire).
What the look does on a server is tested in tests/_async/test_wake_queue.py and
tests/process/test_wake_paused.py; here, when each look is made and by how many flows, and
whom the look's script wakes when it finds the lock free."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import Any

import pytest
import redis

from tenure import keys, scripts
from tenure.core import lock as lock_module
from tenure.core.context import WakeChecks
from tenure.core.effects import Background, Call, Sleep
from tenure.core.lock import wake_checks
from tenure.errors import BackendError, ServerError

from .conftest import new_context
from .scripted import drive as drive_flow
from .scripted import fails


class Looked:
    """A lock object's look: the flow yields it where the real one sends its script."""

    def __init__(self, lock: FakeLock) -> None:
        self.lock = lock


class FakeLock:
    def __init__(self, name: str, fail: BaseException | None = None) -> None:
        self.name = name
        self.fail = fail

    def _wake_check(self) -> Generator[Any, Any, None]:
        yield Looked(self)
        if self.fail is not None:
            raise self.fail


def drive(
    flow: Generator[Any, Any, None], armed: dict[float, list[Any]] | None = None
) -> list[tuple[str, float]]:
    """Run ``flow`` on the real clock to its end: each Sleep slept, each look recorded as
    (lock name, monotonic time). ``armed``: seconds after the start -> arms to make at the
    first turn after then (a release arming a look while the flow runs)."""
    start = time.monotonic()
    looks: list[tuple[str, float]] = []
    pending = sorted((armed or {}).items())
    value: Any = None
    while True:
        try:
            effect = flow.send(value)
        except StopIteration:
            return looks
        value = None
        if isinstance(effect, Looked):
            looks.append((effect.lock.name, time.monotonic()))
        else:
            assert isinstance(effect, Sleep)
            assert 0 <= effect.seconds <= lock_module.WAKE_CHECK_GRACE + 1e-9
            time.sleep(effect.seconds)
        while pending and time.monotonic() - start >= pending[0][0]:
            for arm in pending.pop(0)[1]:
                arm()


@pytest.fixture
def short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_module, "WAKE_CHECK_GRACE", 0.05)
    monkeypatch.setattr(lock_module, "WAKE_CHECK_LINGER", 0.2)


def test_one_flow_is_started_while_it_runs() -> None:
    checks, a, b = WakeChecks(), FakeLock("a"), FakeLock("b")
    now = time.monotonic()
    assert checks.arm(a, now + 0.1, stale=1.0)  # none runs: start it
    assert not checks.arm(b, now + 0.1, stale=1.0)
    assert not checks.arm(a, now + 0.2, stale=1.0)  # moved later, same flow
    # A flow that took no turn for `stale` seconds (stuck, or its event loop gone): another.
    assert checks.arm(a, now + 0.3, stale=0.0)


def test_each_look_once_due_and_moved_later_by_a_new_unlock(short: None) -> None:
    checks, a, b = WakeChecks(), FakeLock("a"), FakeLock("b")
    grace = lock_module.WAKE_CHECK_GRACE
    start = time.monotonic()
    assert checks.arm(a, start + grace, stale=1.0)
    assert not checks.arm(b, start + grace, stale=1.0)
    rearmed: list[float] = []

    def rearm_a() -> None:  # another targeted unlock of `a`, before its look was due
        rearmed.append(time.monotonic())
        assert not checks.arm(a, rearmed[0] + grace, stale=1.0)

    looks = drive(wake_checks(checks), {0.02: [rearm_a]})
    names = [name for name, _ in looks]
    assert sorted(names) == ["a", "b"]  # one look each: `a`'s moved, not doubled
    at = dict(looks)
    assert at["b"] >= start + grace
    assert at["a"] >= rearmed[0] + grace  # never before the grace after its last unlock
    assert at["a"] < rearmed[0] + 3 * grace  # and not long after: the next turn


def test_the_flow_lingers_then_ends_and_the_next_unlock_starts_one(short: None) -> None:
    checks, a = WakeChecks(), FakeLock("a")
    grace, linger = lock_module.WAKE_CHECK_GRACE, lock_module.WAKE_CHECK_LINGER
    assert checks.arm(a, time.monotonic() + grace, stale=1.0)
    late: list[float] = []

    def arm_again() -> None:  # after the first look, within the linger: no new flow
        late.append(time.monotonic())
        assert not checks.arm(a, late[0] + grace, stale=1.0)

    began = time.monotonic()
    looks = drive(wake_checks(checks), {grace + 0.05: [arm_again]})
    ended = time.monotonic()
    assert [name for name, _ in looks] == ["a", "a"]
    assert looks[1][1] >= late[0] + grace
    assert ended - looks[1][1] >= linger - 0.01  # it stayed the linger after its last look
    assert ended - began < grace + 0.05 + grace + linger + 1.0
    assert checks.arm(a, time.monotonic() + grace, stale=1.0)  # ended: start one again


def test_a_server_error_in_one_look_leaves_the_others(short: None) -> None:
    checks = WakeChecks()
    bad, good = FakeLock("bad", ServerError("ERR refused")), FakeLock("good")
    now = time.monotonic()
    checks.arm(bad, now, stale=1.0)
    checks.arm(good, now, stale=1.0)
    looks = drive(wake_checks(checks))
    assert sorted(name for name, _ in looks) == ["bad", "good"]


def test_a_failed_connection_ends_the_flow_and_the_next_makes_the_looks_left(
    short: None,
) -> None:
    # Also the look whose call failed: its script may not have run (before, it was
    # dropped, and its lock's waiters slept on if the handoff it backs up had failed).
    checks = WakeChecks()
    down = FakeLock("down", BackendError("connection lost"))
    left = FakeLock("left")
    now = time.monotonic()
    checks.arm(down, now, stale=1.0)
    checks.arm(left, now, stale=1.0)
    flow = wake_checks(checks)
    first = flow.send(None)
    assert isinstance(first, Looked)
    expected = ["down", "left", "next"]
    if first.lock is left:  # the order of two looks due together is not promised
        second = flow.send(None)
        assert isinstance(second, Looked)
        assert second.lock is down
        expected.remove("left")  # looked at already
    with pytest.raises(BackendError):
        flow.send(None)
    down.fail = None  # the connection is back
    # The flow ended: the next unlock starts a flow, which makes the looks left.
    nxt = FakeLock("next")
    assert checks.arm(nxt, time.monotonic(), stale=1.0)
    looks = drive(wake_checks(checks))
    assert sorted(name for name, _ in looks) == expected


def test_a_cancelled_sleep_lets_the_next_unlock_start_a_flow(short: None) -> None:
    checks, a = WakeChecks(), FakeLock("a")
    assert checks.arm(a, time.monotonic() + 10, stale=1.0)
    flow = wake_checks(checks)
    assert isinstance(flow.send(None), Sleep)
    with pytest.raises(KeyboardInterrupt):  # asyncio's cancellation, a closing loop
        flow.throw(KeyboardInterrupt())
    assert checks.arm(a, time.monotonic(), stale=1.0)
    assert [name for name, _ in drive(wake_checks(checks))] == ["a"]


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, asyncio.CancelledError])
def test_an_interrupt_as_a_release_starts_the_flow_of_looks_lets_the_next_start_one(
    interrupt: type[BaseException],
) -> None:
    # The release armed its look and was to start the flow (marked running); an interrupt
    # (a signal handler's exception, a cancellation) thrown at that Background, perhaps
    # before the runner started it: the next release must start one, not take the flow
    # for running and leave every armed look to an arm WAKE_CHECK_STALE (1 s) later, or
    # to none if no release follows (reviewer R).
    ctx = new_context()
    lock = lock_module.LockCore(ctx, "interrupted")
    flow = lock.release(ctx.identity.thread_owner())
    call = flow.send(None)
    assert isinstance(call, Call)
    assert call.script.name == "lock_release"
    start = flow.send(lock_module.WOKE_OTHER)  # the unlock woke one other client
    assert isinstance(start, Background)
    start.flow.close()  # never started
    with pytest.raises(interrupt):
        flow.throw(interrupt())
    other = lock_module.LockCore(ctx, "next")
    now = time.monotonic()
    assert ctx.wake_checks.arm(other, now, lock_module.WAKE_CHECK_STALE)
    # Both looks are pending: the flow the next release starts makes them.
    turn = ctx.wake_checks.take(now + 1.0, now, 0.1)
    assert turn is not None
    assert turn[0] == [lock, other]


# Found by a long mixed run of the simulator (seed 5): an unlock went to one client alone,
# whose waiters had left (its socket read only at its janitor's next look, up to its
# linger later); the release put the releaser's client behind it in the queue; a waiter of
# the releaser's client, refused just before the release, slept; and the look sent the
# next wake-up to the client it backed up again. The lock stayed free 0.24 s (bound 0.235).
def test_a_look_that_finds_the_lock_free_wakes_every_listening_client(r: redis.Redis) -> None:
    name = "look-free"
    channel, queue = keys.lock_channel(name), keys.lock_wake_queue(name)
    listeners = {}
    for client in ("woken", "releaser"):  # in the order the release left them
        listeners[client] = r.pubsub()
        listeners[client].subscribe(channel, keys.lock_client_channel(name, client))
        for _ in range(2):
            assert listeners[client].get_message(timeout=1)["type"] == "subscribe"
    r.zadd(queue, {"woken": 3, "releaser": 4})
    try:
        script = scripts.get("lock_wake_check")
        assert r.eval(script.source, 3, name, channel, queue, "0") == 1  # free
        for client, pubsub in listeners.items():
            message = pubsub.get_message(timeout=1)
            assert message is not None, client  # before: the woken client's channel alone
            assert (message["channel"], message["data"]) == (channel.encode(), b"0"), client
    finally:
        for pubsub in listeners.values():
            pubsub.close()


# Found by a long mixed run of the simulator (seed 40): the undo of a grant whose reply was
# lost freed the lock with an unlock to one client alone (its own: another waiter of it
# took the lock with a 0.67 s lease) and armed no look, so the other clients, refused by
# the undone grant's 3 s lease, slept to its end with the lock free.
@pytest.mark.parametrize("reply", [lock_module.WOKE_SELF, lock_module.WOKE_OTHER])
def test_an_undone_grant_whose_unlock_woke_one_client_arms_a_look(reply: int) -> None:
    ctx = new_context()
    owner = ctx.identity.thread_owner()
    lock = lock_module.LockCore(ctx, "undone")
    lost = [("lock_acquire", BackendError("timeout"))]
    run = fails(lock.acquire(owner, True, 5, None), lost)
    (reconcile,) = [e.flow for e in run.extra if isinstance(e, Background)]
    undo = "lock_release+guard"
    run = drive_flow(reconcile, [(undo, reply), (undo, None), (undo, None)])
    looks = [e.flow for e in run.extra if isinstance(e, Background)]
    assert [getattr(flow, "__name__", None) for flow in looks] == ["wake_checks"]
