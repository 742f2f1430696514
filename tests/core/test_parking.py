"""The listener's wake-up table (``core/parking.py``): who is subscribed, whom a message wakes."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.core.parking import Parked, Parking, Ticket

CH = "redisson_lock__channel:{l}"
WRITE = "1"  # a payload in wake_all (as the RW write unlock)
UNLOCK = "0"
NOBODY: frozenset[str] = frozenset()


def parked(n: int, wake_all: frozenset[str] = NOBODY) -> tuple[Parking, Parked, list[Ticket]]:
    """A table with ``n`` waiters (keys 0..n-1, joined in that order) on CH."""
    table = Parking()
    tickets = []
    for key in range(n):
        entry, ticket, _first = table.join(CH, wake_all, key, object)
        tickets.append(ticket)
    return table, entry, tickets


def permits(tickets: list[Ticket]) -> list[bool]:
    return [t.permit for t in tickets]


# --------------------------------------------------------------------------- join


def test_first_join_subscribes_later_joins_share_the_entry_with_a_ticket_each() -> None:
    table = Parking()
    made: list[object] = []

    def cond() -> object:
        made.append(object())
        return made[-1]

    entry, a, first = table.join(CH, frozenset({WRITE}), "a", cond)
    assert first is True
    assert entry.refs == 1
    assert entry.permits == 0
    assert not entry.confirmed
    assert entry.wake_all == frozenset({WRITE})
    assert a.cond is made[0]
    again, b, first = table.join(CH, frozenset({WRITE}), "b", cond)
    assert again is entry
    assert first is False
    assert b is not a
    assert entry.refs == 2
    assert len(made) == 2  # one wake-up object per waiter
    assert entry.head() is a  # the oldest
    assert table.channels == {CH: entry}


def test_the_same_waiter_joining_twice_keeps_one_ticket() -> None:
    table = Parking()
    _, a, _ = table.join(CH, NOBODY, "a", object)
    _, again, first = table.join(CH, NOBODY, "a", object)
    assert again is a
    assert not first
    assert a.depth == 2
    assert table.leave(CH, "a", pass_on=False) == ([], False)
    assert table.leave(CH, "a", pass_on=False) == ([], True)


def test_channels_are_separate() -> None:
    table = Parking()
    a, ta, first_a = table.join("a", NOBODY, 1, object)
    b, tb, first_b = table.join("b", NOBODY, 1, object)
    assert first_a
    assert first_b
    assert a is not b
    assert table.received("message", "a", UNLOCK) == [ta]
    assert (ta.permit, tb.permit) == (True, False)


# -------------------------------------------------------------------------- leave


def test_last_leaver_unsubscribes_and_the_channel_is_forgotten() -> None:
    table, _entry, _ = parked(1)
    assert table.leave(CH, 0, pass_on=False) == ([], True)
    assert table.channels == {}
    # joining again starts afresh: a new SUBSCRIBE, unconfirmed, no old wake-ups
    entry, ticket, first = table.join(CH, NOBODY, 0, object)
    assert first
    assert entry.refs == 1
    assert not ticket.permit
    assert not entry.confirmed


def test_last_leaver_with_pass_on_unsubscribes_and_notifies_nobody() -> None:
    table, _entry, _ = parked(1)
    assert table.leave(CH, 0, pass_on=True) == ([], True)
    assert table.channels == {}


def test_a_waiter_behind_the_head_leaves_quietly() -> None:
    table, entry, t = parked(3)
    assert table.leave(CH, 1, pass_on=False) == ([], False)
    assert entry.refs == 2
    assert entry.permits == 0
    assert list(entry.tickets.values()) == [t[0], t[2]]


def test_the_head_leaving_wakes_the_next_to_take_the_lease_end_check_over() -> None:
    table, entry, t = parked(3)
    assert table.leave(CH, 0, pass_on=False) == ([t[1]], False)
    assert entry.head() is t[1]
    assert not t[1].permit  # notified, not given a wake-up


def test_leave_with_pass_on_hands_a_wake_up_to_the_oldest_without_one() -> None:
    table, _entry, t = parked(3)
    table.received("message", CH, UNLOCK)  # to waiter 0
    assert table.leave(CH, 2, pass_on=True) == ([t[1]], False)
    assert permits(t[:2]) == [True, True]


def test_an_unused_wake_up_is_passed_on_by_a_normal_leave() -> None:
    table, entry, t = parked(3)
    table.received("message", CH, UNLOCK)  # to waiter 0, who acquires without using it
    notify, last = table.leave(CH, 0, pass_on=False)
    assert notify == [t[1]]
    assert not last
    assert t[1].permit
    assert entry.permits == 1


def test_leave_with_pass_on_never_makes_more_wake_ups_than_waiters() -> None:
    table, entry, _t = parked(2)
    table.received("message", CH, UNLOCK)
    table.received("message", CH, UNLOCK)
    assert entry.permits == 2
    table.leave(CH, 1, pass_on=True)  # one waiter left, already woken
    assert entry.refs == 1
    assert entry.permits == 1


def test_leave_of_a_channel_or_waiter_not_there_is_a_no_op() -> None:
    table = Parking()
    assert table.leave(CH, 0, pass_on=True) == ([], False)
    table.join(CH, NOBODY, 0, object)
    assert table.leave(CH, 9, pass_on=True) == ([], False)
    assert table.channels[CH].refs == 1


# --------------------------------------------------------------------------- take


def test_take_uses_the_waiters_own_wake_up_once() -> None:
    table, entry, t = parked(2)
    assert table.take(t[0]) is False
    table.received("message", CH, UNLOCK)
    assert table.take(t[1]) is False  # the wake-up is waiter 0's
    assert table.take(t[0]) is True
    assert table.take(t[0]) is False
    assert entry.permits == 0


# ----------------------------------------------------------------------- received


@pytest.mark.parametrize("kind", ["message", "smessage"])
def test_an_unlock_wakes_the_oldest_waiter_only(kind: str) -> None:
    table, _entry, t = parked(3)
    assert table.received(kind, CH, UNLOCK) == [t[0]]
    assert permits(t) == [True, False, False]
    assert table.received(kind, CH, UNLOCK) == [t[1]]  # the next without one
    assert table.take(t[0])
    assert table.received(kind, CH, UNLOCK) == [t[0]]
    assert permits(t) == [True, True, False]


@pytest.mark.parametrize("kind", ["message", "smessage"])
def test_a_wake_all_payload_wakes_every_waiter(kind: str) -> None:
    table, _entry, t = parked(3, frozenset({WRITE}))
    assert table.received(kind, CH, WRITE) == t
    assert permits(t) == [True] * 3


def test_an_ordinary_payload_on_a_wake_all_channel_wakes_one() -> None:
    table, entry, t = parked(3, frozenset({WRITE}))
    assert table.received("message", CH, UNLOCK) == [t[0]]
    assert entry.permits == 1


def test_messages_never_make_more_wake_ups_than_waiters() -> None:
    table, entry, _ = parked(2, frozenset({WRITE}))
    for _ in range(5):
        table.received("message", CH, UNLOCK)
    assert entry.permits == 2
    assert table.received("message", CH, UNLOCK) == []
    table.received("message", CH, WRITE)
    assert entry.permits == 2


def test_a_message_on_a_channel_nobody_waits_on_is_ignored() -> None:
    table, entry, _ = parked(1)
    assert table.received("message", "other", UNLOCK) == []
    assert entry.permits == 0
    assert "other" not in table.channels


@pytest.mark.parametrize("kind", ["subscribe", "ssubscribe"])
def test_subscribe_reply_confirms_once(kind: str) -> None:
    table, entry, t = parked(2)
    assert table.received(kind, CH, "1") == t  # every waiter awaiting it is notified
    assert entry.confirmed
    assert entry.permits == 0  # a confirmation is no wake-up
    assert table.received(kind, CH, "1") == []  # e.g. the re-subscribe after a reconnect
    assert entry.confirmed


def test_confirmation_of_a_channel_nobody_waits_on_is_ignored() -> None:
    table = Parking()
    assert table.received("subscribe", CH, "1") == []
    assert table.channels == {}


@pytest.mark.parametrize(("kind", "payload"), [("pong", ""), ("psubscribe", "1")])
def test_other_replies_change_nothing(kind: str, payload: str) -> None:
    table, entry, _ = parked(2)
    assert table.received(kind, CH, payload) == []
    assert (entry.refs, entry.permits, entry.confirmed) == (2, 0, False)


@pytest.mark.parametrize("kind", ["unsubscribe", "sunsubscribe"])
def test_the_answer_to_our_own_unsubscribe_changes_nothing(kind: str) -> None:
    table, entry, _ = parked(2)
    table.unsubscribing(CH)  # e.g. left (UNSUBSCRIBE sent) and joined again
    assert table.received(kind, CH, "0") == []
    assert (entry.refs, entry.permits) == (2, 0)
    assert CH not in table.dropped
    assert table.leaving == {}


@pytest.mark.parametrize("kind", ["unsubscribe", "sunsubscribe"])
def test_an_unsubscribe_we_did_not_ask_for_wakes_all_and_marks_the_channel_dropped(
    kind: str,
) -> None:
    # A cluster drops the sharded subscriptions of a slot that moved to another shard.
    table, entry, t = parked(3)
    assert table.received(kind, CH, "0") == t
    assert entry.permits == 3
    assert CH in table.dropped
    table.resubscribing(CH)
    assert CH not in table.dropped
    assert table.in_flight == {CH: 1}


def test_evicted_channel_wakes_its_waiters_and_is_adopted_elsewhere() -> None:
    table, entry, _ = parked(2)
    assert table.evict(CH) is entry
    assert CH not in table.channels
    assert entry.permits == 2
    assert entry.confirmed  # a waiter awaiting its SUBSCRIBE goes on
    other = Parking()
    moved = other.adopt(CH, NOBODY, list(entry.tickets), object)
    assert moved.refs == 2
    assert moved.permits == 2  # each re-checks on its new listener
    assert other.leave(CH, 0, pass_on=False)[1] is False
    assert other.leave(CH, 1, pass_on=False) == ([], True)


# ----------------------------------------------------------------- lease-end check


def test_only_the_head_sleeps_until_the_lease_end() -> None:
    _table, entry, t = parked(2)
    entry.expiry = 5.0
    assert entry.sleep_until(t[0], math.inf, shared=True) == 5.0
    assert entry.sleep_until(t[1], math.inf, shared=True) == math.inf
    assert entry.sleep_until(t[1], 3.0, shared=True) == 3.0
    assert entry.sleep_until(t[0], 3.0, shared=True) == 3.0
    # without a shared lease end (semaphores, latches) each sleeps its own time
    assert entry.sleep_until(t[0], 9.0, shared=False) == 9.0


def test_a_renewal_message_moves_the_lease_end_and_wakes_nobody() -> None:
    table, entry, t = parked(2)
    table.received("subscribe", CH, "1")
    quiet = entry.quiet_since
    entry.expiry = 5.0
    now = table.clock()
    assert table.received("message", CH, "-3000") == []
    assert permits(t) == [False, False]
    assert now + 3.0 <= entry.expiry <= table.clock() + 3.0
    assert entry.quiet_since == quiet  # not an unlock: an attempt before it is still fresh
    assert table.received("message", CH, UNLOCK) == [t[0]]  # an unlock still wakes one


# ------------------------------------------------------------------- disconnected


def test_a_disconnect_wakes_every_waiter_once_its_new_subscribe_is_confirmed() -> None:
    # Not before: a waiter re-checking while the new SUBSCRIBE is still on its way would
    # miss an unlock published in between and sleep to the holder's lease end.
    table = Parking()
    a, a0, _ = table.join("a", NOBODY, 0, object)
    _, a1, _ = table.join("a", NOBODY, 1, object)
    b, b0, _ = table.join("b", NOBODY, 0, object)
    table.received("subscribe", "a", "1")
    table.received("subscribe", "b", "1")
    assert table.disconnected() == []
    assert (a.permits, b.permits) == (0, 0)
    assert not a.confirmed
    assert not table.hears("a")  # the driver subscribes every channel
    assert table.channels == {"a": a, "b": b}
    table.subscribing(["a", "b"])
    assert table.received("subscribe", "a", "1") == [a0, a1]
    assert a.permits == 2
    assert b.permits == 0
    assert not b.fresh(1e9)
    assert table.received("subscribe", "b", "1") == [b0]
    assert b.permits == 1
    assert table.received("subscribe", "b", "1") == []  # confirmed: no second wake-up


def test_disconnect_with_nobody_waiting() -> None:
    assert Parking().disconnected() == []


# ----------------------------------------------------------------------- forbidden


def test_a_forbidden_channel_tells_its_waiters_and_nobody_else() -> None:
    table = Parking()
    a, a0, _ = table.join("a", NOBODY, 0, object)
    b, b0, _ = table.join("b", NOBODY, 0, object)
    table.subscribing(["a"])
    table.subscribing(["b"])
    assert table.forbidden(["a"], "NOPERM a") == [a0]
    assert a.refusal == "NOPERM a"
    assert a.confirmed
    assert "a" not in table.in_flight
    assert b.refusal is None
    assert not b.confirmed
    assert not b0.permit
    assert table.in_flight == {"b": 1}
    assert table.dropped == set()


# ----------------------------------------------------------------------- property

op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from("ab"), st.integers(0, 3)),
    st.tuples(st.just("leave"), st.sampled_from("ab"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("take"), st.sampled_from("ab"), st.integers(0, 3)),
    st.tuples(st.just("message"), st.sampled_from("ab"), st.sampled_from([UNLOCK, WRITE])),
    st.tuples(st.just("subscribe"), st.sampled_from("ab")),
    st.tuples(st.just("disconnected")),
)


@given(st.lists(op, max_size=60))
@settings(max_examples=300, deadline=None)
def test_the_table_follows_its_rules(ops: list[tuple[Any, ...]]) -> None:
    """Against a model of waiters: SUBSCRIBE on 0 -> 1, UNSUBSCRIBE on 1 -> 0, one message
    wakes the oldest waiter not yet woken, wake-ups are never lost by a leave."""
    table = Parking()
    model: dict[str, dict[int, bool]] = {"a": {}, "b": {}}  # waiter -> has a wake-up
    depth: dict[tuple[str, int], int] = {}
    wake_all = {"a": frozenset({WRITE}), "b": NOBODY}
    recheck = {"a": False, "b": False}  # disconnected since its last SUBSCRIBE answer

    def give_one(ch: str) -> None:
        for key, has in model[ch].items():
            if not has:
                model[ch][key] = True
                return

    for name, *args in ops:
        if name == "join":
            ch, key = args
            _, _, first = table.join(ch, wake_all[ch], key, object)
            assert first == (not model[ch])
            if key not in model[ch]:
                model[ch][key] = False
            depth[ch, key] = depth.get((ch, key), 0) + 1
        elif name == "leave":
            ch, key, pass_on = args
            if key not in model[ch]:
                assert table.leave(ch, key, pass_on) == ([], False)
                continue
            _, last = table.leave(ch, key, pass_on)
            depth[ch, key] -= 1
            if depth[ch, key] == 0:
                had = model[ch].pop(key)
                if pass_on or had:
                    give_one(ch)
            assert last == (not model[ch])
            if last:
                recheck[ch] = False
        elif name == "take":
            ch, key = args
            if key not in model[ch]:
                continue
            ticket = table.channels[ch].tickets[key]
            assert table.take(ticket) == model[ch][key]
            model[ch][key] = False
        elif name == "message":
            ch, payload = args
            table.received("message", ch, payload)
            if payload in wake_all[ch]:
                model[ch] = dict.fromkeys(model[ch], True)
            else:
                give_one(ch)
        elif name == "subscribe":
            (ch,) = args
            table.received("subscribe", ch, "1")
            if recheck[ch]:  # the first answer after a disconnect wakes everyone
                model[ch] = dict.fromkeys(model[ch], True)
                recheck[ch] = False
        else:
            assert table.disconnected() == []
            for ch in model:
                recheck[ch] = bool(model[ch])
        assert set(table.channels) == {c for c, w in model.items() if w}
        for ch, entry in table.channels.items():
            assert {k: t.permit for k, t in entry.tickets.items()} == model[ch]
            assert list(entry.tickets) == list(model[ch])  # join order kept
            assert entry.wake_all == wake_all[ch]


def test_only_the_last_subscribe_reply_confirms_a_rejoined_channel() -> None:
    # A waiter leaves before its SUBSCRIBE is answered and another joins at once: two
    # SUBSCRIBEs are in flight; the first reply must not confirm the newcomer.
    table = Parking()
    first, _, new = table.join(CH, frozenset(), 0, object)
    assert new
    table.subscribing([CH])
    assert table.leave(CH, 0, pass_on=False) == ([], True)  # UNSUBSCRIBE sent
    second, ticket, new = table.join(CH, frozenset(), 1, object)
    assert new
    assert second is not first
    table.subscribing([CH])
    assert table.received("subscribe", CH, "1") == []
    assert not second.confirmed
    assert table.received("unsubscribe", CH, "0") == []
    assert table.received("subscribe", CH, "1") == [ticket]
    assert second.confirmed


def test_a_reconnect_forgets_unanswered_subscribes() -> None:
    table = Parking()
    entry, ticket, _ = table.join(CH, frozenset(), 0, object)
    table.subscribing([CH])
    table.subscribing([CH])
    table.disconnected()
    table.subscribing([CH])  # the reconnect's SUBSCRIBE: its reply confirms
    assert table.received("subscribe", CH, "1") == [ticket]
    assert entry.confirmed


def test_an_answer_after_the_last_waiter_left_is_still_counted() -> None:
    # The waiter left before its SUBSCRIBE was answered; the answer then arrives; a new
    # waiter joins: its own SUBSCRIBE's answer must confirm it (no stale count).
    table = Parking()
    table.join(CH, NOBODY, 0, object)
    table.subscribing([CH])
    assert table.leave(CH, 0, pass_on=False) == ([], True)
    assert table.received("subscribe", CH, "1") == []
    assert table.received("unsubscribe", CH, "0") == []
    entry, ticket, first = table.join(CH, NOBODY, 0, object)
    assert first
    table.subscribing([CH])
    assert table.received("subscribe", CH, "1") == [ticket]
    assert entry.confirmed


def test_a_refused_subscribe_marks_unconfirmed_channels_dropped() -> None:
    table = Parking()
    _a, ta, _ = table.join("a", NOBODY, 0, object)
    b, tb, _ = table.join("b", NOBODY, 0, object)
    table.subscribing(["a", "b", "gone"])  # "gone": its waiter left meanwhile
    assert table.received("ssubscribe", "a", "1") == [ta]
    table.subscribing(["a"])
    assert set(map(id, table.refused())) == {id(ta), id(tb)}
    assert table.dropped == {"a", "b"}
    assert table.in_flight == {}
    assert b.confirmed
    assert tb.permit


# ------------------------------------------------------------------------ linger


def test_a_lingering_channel_stays_subscribed_then_goes() -> None:
    now = [0.0]
    table = Parking(linger=0.5, clock=lambda: now[0])
    entry, _, first = table.join(CH, NOBODY, 0, object)
    assert first
    assert table.expired() == ([], 0.5)  # waited on: look again within linger
    assert table.leave(CH, 0, pass_on=False) == ([], False)  # no UNSUBSCRIBE yet
    now[0] = 0.2
    waiting, due = table.expired()
    assert waiting == []
    assert due == pytest.approx(0.3)
    _, _, first = table.join(CH, NOBODY, 1, object)  # waited on again: no SUBSCRIBE
    assert not first
    assert table.channels[CH] is entry
    table.leave(CH, 1, pass_on=False)
    now[0] = 0.8
    assert table.expired() == ([CH], math.inf)
    assert table.channels == {}
    assert table.leaving == {CH: 1}


class Interrupted(Exception):
    """What a signal handler raises inside the table's own code."""


def interrupted_leave(table: Parking, when: str) -> None:
    """Waiter 0 leaves CH with ``pass_on``, and a handler raises as the call named
    ``when`` returns (inside `Parking.leave`, once the last ticket is gone)."""

    def raising(*args: object) -> None:
        raise Interrupted(when)

    original = getattr(table, when)
    setattr(table, when, raising)  # the instance's own attribute: the class is untouched
    try:
        with pytest.raises(Interrupted):
            table.leave(CH, 0, pass_on=True)
    finally:
        setattr(table, when, original)


@pytest.mark.parametrize("linger", [0.5, 0.0])
def test_an_entry_left_with_no_waiter_and_not_lingering_is_let_go(linger: float) -> None:
    # A handler raised inside leave() after the last ticket went, before the entry
    # lingered (or was let go): the waiter's next leave finds no ticket (a no-op). The
    # next expired() repairs it: it lingers from then on and is let go like any other.
    now = [0.0]
    table = Parking(linger=linger, clock=lambda: now[0])
    entry, _, _ = table.join(CH, NOBODY, 0, object, alias="mine", relay="relay")
    table.received("subscribe", CH, "1")
    interrupted_leave(table, "_relay")
    assert table.channels[CH] is entry
    assert not entry.tickets
    assert not math.isfinite(entry.idle_since)  # the stray: nobody waits, no lingering
    assert table.leave(CH, 0, pass_on=True) == ([], False)  # the clean-up's retry: no-op
    now[0] = 1.0
    if linger:
        assert table.expired() == ([], 0.5)  # lingers from now
        assert entry.idle_since == 1.0
        assert table.hears(CH)
        now[0] = 1.6
    assert table.expired() == ([CH], math.inf)  # let go: UNSUBSCRIBE counted as sent
    assert table.channels == {}
    assert table.names(CH) == [CH, "mine"]  # the UNSUBSCRIBE names its alias too
    assert table.leaving == {CH: 1, "mine": 1}


def test_a_join_interrupted_before_its_ticket_came_is_let_go() -> None:
    # A handler raised as the condition's factory returned inside join(): the entry is
    # in the table with no ticket (its SUBSCRIBE not sent); it is let go the same way.
    now = [0.0]
    table = Parking(linger=0.5, clock=lambda: now[0])

    def interrupted() -> object:
        raise Interrupted("make_cond")

    with pytest.raises(Interrupted):
        table.join(CH, NOBODY, 0, interrupted)
    assert not table.channels[CH].tickets
    assert table.expired() == ([], 0.5)
    now[0] = 0.5
    assert table.expired() == ([CH], math.inf)
    assert table.channels == {}


def test_a_waited_on_or_lingering_entry_is_no_stray() -> None:
    now = [0.0]
    table = Parking(linger=0.5, clock=lambda: now[0])
    entry, _, _ = table.join(CH, NOBODY, 0, object)
    now[0] = 10.0
    assert table.expired() == ([], 0.5)
    assert not math.isfinite(entry.idle_since)  # waited on: untouched
    table.leave(CH, 0, pass_on=False)  # lingers since 10.0
    now[0] = 10.3
    gone, due = table.expired()
    assert gone == []
    assert due == pytest.approx(0.2)
    assert entry.idle_since == 10.0  # its own lingering, not restarted


def test_hears_while_confirmed_waited_on_or_lingering_and_not_once_gone() -> None:
    """A releaser takes its own subscription away from the count of subscribers its unlock
    reached only while the server has it subscribed."""
    now = [0.0]
    table = Parking(linger=0.5, clock=lambda: now[0])
    assert not table.hears(CH)  # never subscribed
    table.join(CH, NOBODY, 0, object)
    table.subscribing([CH])
    assert not table.hears(CH)  # asked, not yet confirmed
    table.received("subscribe", CH, "1")
    assert table.hears(CH)
    table.leave(CH, 0, pass_on=False)
    assert table.hears(CH)  # lingering
    now[0] = 1.0
    table.expired()
    assert not table.hears(CH)  # UNSUBSCRIBE sent
    table.received("unsubscribe", CH, "0")  # its answer
    table.join(CH, NOBODY, 1, object)
    table.subscribing([CH])
    table.received("subscribe", CH, "1")
    table.received("unsubscribe", CH, "0")  # the server dropped it (its slot moved)
    assert not table.hears(CH)


def test_a_quiet_subscription_is_fresh_for_attempts_sent_after_it_was_confirmed() -> None:
    now = [1.0]
    table = Parking(linger=0.5, clock=lambda: now[0])
    entry, _, _ = table.join(CH, NOBODY, 0, object)
    table.subscribing([CH])
    assert not entry.fresh(5.0)  # not confirmed yet
    table.received("subscribe", CH, "1")
    assert entry.fresh(1.0)
    assert not entry.fresh(0.9)
    now[0] = 2.0
    table.received("message", CH, UNLOCK)  # an unlock after an attempt sent at 1.5
    assert not entry.fresh(1.5)
    assert entry.fresh(2.0)
    table.disconnected()
    assert not entry.fresh(9.0)


def test_a_waiter_that_took_the_lock_gives_the_others_its_lease_end() -> None:
    # The others re-check when the new holder's lease ends, not at the old holder's: found by
    # the simulator (a new holder's short lease_time ran out first, with no release).
    now = [10.0]
    table = Parking(clock=lambda: now[0])
    entry, _, _ = table.join(CH, NOBODY, 0, object)
    table.join(CH, NOBODY, 1, object)
    entry.expiry = 40.0  # the old holder's lease end, seen by the last attempt
    table.leave(CH, 0, pass_on=False, lease=2.0)
    assert entry.expiry == 12.0
    table.leave(CH, 1, pass_on=False, lease=None)  # no grant: nothing moves
