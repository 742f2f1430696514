"""The listener's wake-up table (``core/parking.py``): who is subscribed, whom a message wakes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.core.parking import Parked, Parking

CH = "redisson_lock__channel:{l}"
WRITE = "1"  # a payload in wake_all (as the RW write unlock)
UNLOCK = "0"
NOBODY: frozenset[str] = frozenset()


class Conds:
    """``make_cond`` that counts how many conditions the table made."""

    def __init__(self) -> None:
        self.made: list[object] = []

    def __call__(self) -> object:
        cond = object()
        self.made.append(cond)
        return cond


def parked(n: int, wake_all: frozenset[str] = NOBODY) -> tuple[Parking, Parked]:
    table = Parking()
    for _ in range(n):
        entry, _first = table.join(CH, wake_all, object)
    return table, entry


# --------------------------------------------------------------------------- join


def test_first_join_subscribes_later_joins_share_the_entry() -> None:
    table, conds = Parking(), Conds()
    entry, first = table.join(CH, frozenset({WRITE}), conds)
    assert first is True
    assert entry.refs == 1 and entry.permits == 0 and not entry.confirmed
    assert entry.wake_all == frozenset({WRITE})
    assert entry.cond is conds.made[0]
    again, first = table.join(CH, frozenset({WRITE}), conds)
    assert again is entry and first is False
    assert entry.refs == 2
    assert len(conds.made) == 1  # one condition per channel
    assert table.channels == {CH: entry}


def test_channels_are_separate() -> None:
    table = Parking()
    a, first_a = table.join("a", NOBODY, object)
    b, first_b = table.join("b", NOBODY, object)
    assert first_a and first_b and a is not b
    assert table.received("message", "a", UNLOCK) is a
    assert (a.permits, b.permits) == (1, 0)


# -------------------------------------------------------------------------- leave


def test_last_leaver_unsubscribes_and_the_channel_is_forgotten() -> None:
    table, _entry = parked(1)
    assert table.leave(CH, pass_on=False) == (None, True)
    assert table.channels == {}
    # joining again starts afresh: a new SUBSCRIBE, unconfirmed, no old wake-ups
    entry, first = table.join(CH, NOBODY, object)
    assert first and entry.refs == 1 and entry.permits == 0 and not entry.confirmed


def test_last_leaver_with_pass_on_unsubscribes_and_notifies_nobody() -> None:
    table, _entry = parked(1)
    assert table.leave(CH, pass_on=True) == (None, True)
    assert table.channels == {}


def test_leave_without_pass_on_keeps_the_channel_and_notifies_nobody() -> None:
    table, entry = parked(3)
    assert table.leave(CH, pass_on=False) == (None, False)
    assert entry.refs == 2 and entry.permits == 0
    assert table.channels == {CH: entry}


def test_leave_with_pass_on_hands_a_wake_up_to_another_waiter() -> None:
    table, entry = parked(3)
    assert table.leave(CH, pass_on=True) == (entry, False)
    assert entry.refs == 2 and entry.permits == 1
    assert table.take(entry) is True


def test_leave_with_pass_on_never_makes_more_wake_ups_than_waiters() -> None:
    table, entry = parked(2)
    table.received("message", CH, UNLOCK)
    assert entry.permits == 1
    table.leave(CH, pass_on=True)  # one waiter left, already woken
    assert entry.refs == 1 and entry.permits == 1


def test_normal_leave_takes_unused_wake_ups_down_to_the_waiters_left() -> None:
    table, entry = parked(3)
    table.received("message", CH, WRITE)  # not in wake_all: one
    table.received("message", CH, UNLOCK)
    table.received("message", CH, UNLOCK)
    assert entry.permits == 3
    table.leave(CH, pass_on=False)
    assert entry.permits == 2
    table.leave(CH, pass_on=False)
    assert entry.permits == 1


def test_leave_of_a_channel_nobody_waits_on_is_a_no_op() -> None:
    table = Parking()
    assert table.leave(CH, pass_on=True) == (None, False)
    assert table.leave(CH, pass_on=False) == (None, False)
    assert table.channels == {}


# --------------------------------------------------------------------------- take


def test_take_uses_one_wake_up_at_a_time() -> None:
    table, entry = parked(2)
    assert table.take(entry) is False
    table.received("message", CH, UNLOCK)
    assert table.take(entry) is True
    assert table.take(entry) is False
    assert entry.permits == 0


# ----------------------------------------------------------------------- received


@pytest.mark.parametrize("kind", ["message", "smessage"])
def test_an_unlock_wakes_one_waiter(kind: str) -> None:
    table, entry = parked(3)
    assert table.received(kind, CH, UNLOCK) is entry
    assert entry.permits == 1
    assert [table.take(entry) for _ in range(3)] == [True, False, False]


@pytest.mark.parametrize("kind", ["message", "smessage"])
def test_a_wake_all_payload_wakes_every_waiter(kind: str) -> None:
    table, entry = parked(3, frozenset({WRITE}))
    assert table.received(kind, CH, WRITE) is entry
    assert entry.permits == 3
    assert [table.take(entry) for _ in range(4)] == [True, True, True, False]


def test_an_ordinary_payload_on_a_wake_all_channel_wakes_one() -> None:
    table, entry = parked(3, frozenset({WRITE}))
    table.received("message", CH, UNLOCK)
    assert entry.permits == 1


def test_messages_never_make_more_wake_ups_than_waiters() -> None:
    table, entry = parked(2, frozenset({WRITE}))
    for _ in range(5):
        table.received("message", CH, UNLOCK)
    assert entry.permits == 2
    table.received("message", CH, WRITE)
    assert entry.permits == 2


def test_wake_all_after_some_were_taken_wakes_every_waiter_again() -> None:
    table, entry = parked(3, frozenset({WRITE}))
    table.received("message", CH, UNLOCK)
    assert table.take(entry)
    table.received("message", CH, WRITE)
    assert entry.permits == 3


def test_a_message_on_a_channel_nobody_waits_on_is_ignored() -> None:
    table, entry = parked(1)
    assert table.received("message", "other", UNLOCK) is None
    assert entry.permits == 0
    assert "other" not in table.channels


@pytest.mark.parametrize("kind", ["subscribe", "ssubscribe"])
def test_subscribe_reply_confirms_once(kind: str) -> None:
    table, entry = parked(2)
    assert table.received(kind, CH, "1") is entry
    assert entry.confirmed and entry.permits == 0  # a confirmation wakes nobody's wait
    assert table.received(kind, CH, "1") is None  # e.g. the re-subscribe after a reconnect
    assert entry.confirmed


def test_confirmation_of_a_channel_nobody_waits_on_is_ignored() -> None:
    table = Parking()
    assert table.received("subscribe", CH, "1") is None
    assert table.channels == {}


@pytest.mark.parametrize(("kind", "payload"), [("pong", ""), ("psubscribe", "1")])
def test_other_replies_change_nothing(kind: str, payload: str) -> None:
    table, entry = parked(2)
    assert table.received(kind, CH, payload) is None
    assert (entry.refs, entry.permits, entry.confirmed) == (2, 0, False)


@pytest.mark.parametrize("kind", ["unsubscribe", "sunsubscribe"])
def test_the_answer_to_our_own_unsubscribe_changes_nothing(kind: str) -> None:
    table, entry = parked(2)
    table.unsubscribing(CH)  # e.g. left (UNSUBSCRIBE sent) and joined again
    assert table.received(kind, CH, "0") is None
    assert (entry.refs, entry.permits) == (2, 0) and CH not in table.dropped
    assert table.leaving == {}


@pytest.mark.parametrize("kind", ["unsubscribe", "sunsubscribe"])
def test_an_unsubscribe_we_did_not_ask_for_wakes_all_and_marks_the_channel_dropped(
    kind: str,
) -> None:
    # A cluster drops the sharded subscriptions of a slot that moved to another shard.
    table, entry = parked(3)
    assert table.received(kind, CH, "0") is entry
    assert entry.permits == 3 and CH in table.dropped
    table.resubscribing(CH)
    assert CH not in table.dropped and table.in_flight == {CH: 1}


def test_evicted_channel_wakes_its_waiters_and_is_adopted_elsewhere() -> None:
    table, entry = parked(2)
    assert table.evict(CH) is entry and CH not in table.channels
    assert entry.permits == 2 and entry.confirmed  # a waiter awaiting its SUBSCRIBE goes on
    other = Parking()
    moved = other.adopt(CH, NOBODY, entry.refs, object)
    assert moved.refs == 2 and moved.permits == 0
    assert other.leave(CH, pass_on=False) == (None, False)
    assert other.leave(CH, pass_on=False) == (None, True)


# ------------------------------------------------------------------- disconnected


def test_disconnect_wakes_every_waiter_of_every_channel() -> None:
    table = Parking()
    a, _ = table.join("a", NOBODY, object)
    table.join("a", NOBODY, object)
    b, _ = table.join("b", NOBODY, object)
    table.received("subscribe", "a", "1")
    woken = table.disconnected()
    assert list(woken) == [a, b]
    assert (a.permits, b.permits) == (2, 1)
    assert a.confirmed  # still counted as subscribed: the reader re-subscribes every channel
    assert table.channels == {"a": a, "b": b}


def test_disconnect_with_nobody_waiting() -> None:
    assert list(Parking().disconnected()) == []


def test_disconnect_returns_a_snapshot() -> None:
    """The driver notifies the entries after the table may have changed."""
    table, entry = parked(1)
    woken = table.disconnected()
    table.leave(CH, pass_on=False)
    table.join("new", NOBODY, object)
    assert list(woken) == [entry]


# ----------------------------------------------------------------------- property

op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from("ab")),
    st.tuples(st.just("leave"), st.sampled_from("ab"), st.booleans()),
    st.tuples(st.just("take"), st.sampled_from("ab")),
    st.tuples(st.just("message"), st.sampled_from("ab"), st.sampled_from([UNLOCK, WRITE])),
    st.tuples(st.just("subscribe"), st.sampled_from("ab")),
    st.tuples(st.just("disconnected")),
)


@given(st.lists(op, max_size=60))
@settings(max_examples=300, deadline=None)
def test_the_table_follows_its_rules(ops: list[tuple[object, ...]]) -> None:
    """Against a model of waiter counts: SUBSCRIBE on 0 -> 1, UNSUBSCRIBE on 1 -> 0, and
    wake-ups never negative, never more than the waiters."""
    table = Parking()
    waiters = {"a": 0, "b": 0}
    wake_all = {"a": frozenset({WRITE}), "b": NOBODY}
    for name, *args in ops:
        if name == "join":
            (ch,) = args
            entry, first = table.join(ch, wake_all[ch], object)
            assert first == (waiters[ch] == 0)
            waiters[ch] += 1
        elif name == "leave":
            ch, pass_on = args
            if waiters[ch] == 0:
                continue  # only a waiter leaves
            before = table.channels[ch].permits
            notify, last = table.leave(ch, pass_on)
            waiters[ch] -= 1
            assert last == (waiters[ch] == 0)
            if last:
                assert notify is None
            elif pass_on:
                assert notify is table.channels[ch]
                assert notify.permits == min(before + 1, waiters[ch])
            else:
                assert notify is None
                assert table.channels[ch].permits == min(before, waiters[ch])
        elif name == "take":
            (ch,) = args
            if waiters[ch] == 0:
                continue
            entry = table.channels[ch]
            before = entry.permits
            assert table.take(entry) == (before > 0)
            assert entry.permits == max(0, before - 1)
        elif name == "message":
            ch, payload = args
            before = table.channels[ch].permits if waiters[ch] else 0
            entry = table.received("message", ch, payload)
            if waiters[ch] == 0:
                assert entry is None
            elif payload in wake_all[ch]:
                assert entry is not None and entry.permits == waiters[ch]
            else:
                assert entry is not None and entry.permits == min(before + 1, waiters[ch])
        elif name == "subscribe":
            (ch,) = args
            table.received("subscribe", ch, "1")
        else:
            woken = list(table.disconnected())
            assert {id(e) for e in woken} == {id(table.channels[c]) for c in table.channels}
        assert set(table.channels) == {c for c, n in waiters.items() if n > 0}
        for ch, entry in table.channels.items():
            assert entry.refs == waiters[ch]
            assert 0 <= entry.permits <= entry.refs
            assert entry.wake_all == wake_all[ch]


def test_only_the_last_subscribe_reply_confirms_a_rejoined_channel() -> None:
    # A waiter leaves before its SUBSCRIBE is answered and another joins at once: two
    # SUBSCRIBEs are in flight; the first reply must not confirm the newcomer.
    table = Parking()
    first, new = table.join(CH, frozenset(), object)
    assert new
    table.subscribing([CH])
    assert table.leave(CH, pass_on=False) == (None, True)  # UNSUBSCRIBE sent
    second, new = table.join(CH, frozenset(), object)
    assert new and second is not first
    table.subscribing([CH])
    assert table.received("subscribe", CH, "1") is None and not second.confirmed
    assert table.received("unsubscribe", CH, "0") is None
    assert table.received("subscribe", CH, "1") is second and second.confirmed


def test_a_reconnect_forgets_unanswered_subscribes() -> None:
    table = Parking()
    entry, _ = table.join(CH, frozenset(), object)
    table.subscribing([CH])
    table.subscribing([CH])
    table.disconnected()
    table.subscribing([CH])  # the reconnect's SUBSCRIBE: its reply confirms
    assert table.received("subscribe", CH, "1") is entry and entry.confirmed


def test_an_answer_after_the_last_waiter_left_is_still_counted() -> None:
    # The waiter left before its SUBSCRIBE was answered; the answer then arrives; a new
    # waiter joins: its own SUBSCRIBE's answer must confirm it (no stale count).
    table = Parking()
    table.join(CH, NOBODY, object)
    table.subscribing([CH])
    assert table.leave(CH, pass_on=False) == (None, True)
    assert table.received("subscribe", CH, "1") is None
    assert table.received("unsubscribe", CH, "0") is None
    entry, first = table.join(CH, NOBODY, object)
    assert first
    table.subscribing([CH])
    assert table.received("subscribe", CH, "1") is entry and entry.confirmed


def test_a_refused_subscribe_marks_unconfirmed_channels_dropped() -> None:
    table = Parking()
    a, _ = table.join("a", NOBODY, object)
    b, _ = table.join("b", NOBODY, object)
    table.subscribing(["a", "b", "gone"])  # "gone": its waiter left meanwhile
    assert table.received("ssubscribe", "a", "1") is a
    table.subscribing(["a"])
    assert set(map(id, table.refused())) == {id(a), id(b)}
    assert table.dropped == {"a", "b"} and table.in_flight == {}
    assert b.confirmed and b.permits == 1
