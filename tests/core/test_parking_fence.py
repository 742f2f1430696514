"""Fences (``core/parking.py``, `FENCE`): a waiter takes a message's payload at its word only
if the message came after the answer to a SUBSCRIBE sent after its call began."""

from __future__ import annotations

from tenure.core.parking import FENCE, UNFENCED, Parking, Ticket

CH = "redisson_countdownlatch__channel__{l}"
WAKE = frozenset({"0", "1", FENCE})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def join(table: Parking, key: int, since: float | None) -> tuple[Ticket, bool]:
    """``key`` joins CH as the listener does: (its ticket, True if a SUBSCRIBE is sent)."""
    _, ticket, first = table.join(CH, WAKE, key, object)
    send = first or table.fence(CH, ticket, since)
    if send:
        table.subscribing([CH])
    return ticket, send


def words(table: Parking, tickets: list[Ticket]) -> list[bool | str]:
    return [table.take_word(t) for t in tickets]


def test_the_first_waiters_own_subscribe_is_its_fence() -> None:
    table = Parking(clock=Clock())
    ticket, sent = join(table, 0, 99.0)
    assert sent
    assert ticket.fence == 1
    table.received("subscribe", CH, "1")
    assert ticket.fence == 0
    table.received("message", CH, "0")
    assert words(table, [ticket]) == ["0"]


def test_a_zero_before_a_joiners_fence_answer_is_not_its_word() -> None:
    clock = Clock()
    table = Parking(clock=clock)
    first, _ = join(table, 0, clock.now)
    table.received("subscribe", CH, "1")
    clock.now += 1
    joiner, sent = join(table, 1, clock.now - 0.5)  # an existing subscription: a fence
    assert sent
    assert joiner.fence == 2
    table.received("message", CH, "0")  # published before the fence: maybe older than it
    assert words(table, [first, joiner]) == ["0", True]  # woken, no word: it reads again
    table.received("subscribe", CH, "1")  # the fence's answer
    table.received("message", CH, "0")
    assert words(table, [first, joiner]) == ["0", "0"]


def test_joiners_whose_calls_began_before_a_fence_was_sent_share_it() -> None:
    clock = Clock()
    table = Parking(clock=clock)
    join(table, 0, clock.now)
    table.received("subscribe", CH, "1")
    clock.now = 110.0
    a, sent_a = join(table, 1, 109.0)
    b, sent_b = join(table, 2, 109.5)  # began before a's fence was sent (at 110.0)
    clock.now = 111.0
    c, sent_c = join(table, 3, 110.5)  # began after: it needs its own
    assert [sent_a, sent_b, sent_c] == [True, False, True]
    assert [a.fence, b.fence, c.fence] == [2, 2, 3]
    table.received("subscribe", CH, "1")
    assert [a.fence, b.fence, c.fence] == [0, 0, 3]
    table.received("message", CH, "0")
    assert words(table, [a, b, c]) == ["0", "0", True]


def test_a_joiner_with_no_start_time_never_shares() -> None:
    table = Parking(clock=Clock())
    join(table, 0, None)
    _, sent = join(table, 1, None)  # the first SUBSCRIBE is still in flight
    assert sent


def test_after_a_reconnect_the_new_subscribe_fences_every_waiter() -> None:
    clock = Clock()
    table = Parking(clock=clock)
    first, _ = join(table, 0, clock.now)
    table.received("subscribe", CH, "1")
    joiner, _ = join(table, 1, clock.now)
    table.disconnected()  # the fence's answer is lost with the connection
    assert joiner.fence == 1
    table.subscribing([CH])  # the new connection subscribes the channel
    table.received("message", CH, "0")  # (cannot come before the answer; if it did...)
    assert words(table, [first, joiner]) == ["0", True]
    table.received("subscribe", CH, "1")
    table.received("message", CH, "0")
    assert words(table, [first, joiner]) == ["0", "0"]


def test_a_lingering_subscription_joined_again_needs_a_fence() -> None:
    clock = Clock()
    table = Parking(linger=0.5, clock=clock)
    join(table, 0, clock.now)
    table.received("subscribe", CH, "1")
    table.leave(CH, 0, pass_on=False)  # lingers, still subscribed
    ticket, sent = join(table, 1, clock.now)
    assert sent  # an old "0" may still be on its way on the lingering subscription
    table.received("message", CH, "0")
    assert words(table, [ticket]) == [True]


def test_a_stale_answer_to_a_channel_let_go_does_not_fence_a_new_subscription() -> None:
    clock = Clock()
    table = Parking(clock=clock)
    join(table, 0, clock.now)
    table.leave(CH, 0, pass_on=False)  # left before the answer: UNSUBSCRIBE sent
    ticket, sent = join(table, 1, clock.now)  # a new subscription, SUBSCRIBE #2
    assert sent
    assert ticket.fence == 2
    table.received("subscribe", CH, "1")  # the answer to #1
    table.received("message", CH, "0")  # from the old subscription
    assert words(table, [ticket]) == [True]
    table.received("unsubscribe", CH, "0")
    table.received("subscribe", CH, "1")  # #2
    table.received("message", CH, "0")
    assert words(table, [ticket]) == ["0"]


def test_channels_without_fences_send_none_and_keep_every_word() -> None:
    table = Parking(clock=Clock())
    plain = frozenset({"0"})
    _, a, first = table.join(CH, plain, 0, object)
    table.subscribing([CH])
    _, b, _ = table.join(CH, plain, 1, object)
    assert first
    assert not table.fence(CH, b, None)
    table.received("message", CH, "0")  # before any answer: no fence to wait for
    assert words(table, [a, b]) == ["0", "0"]


def test_an_adopted_waiter_on_an_existing_entry_is_never_fenced() -> None:
    table = Parking(clock=Clock())
    join(table, 0, None)
    entry = table.adopt(CH, WAKE, [7], object)
    assert entry.tickets[7].fence == UNFENCED


def test_the_first_word_since_a_waiter_last_woke_is_kept() -> None:
    # The reader reads "0" (reached zero) and "1" (set again) before the woken waiter
    # runs: the waiter must still see that the count reached zero during its wait.
    table = Parking(clock=Clock())
    ticket, _ = join(table, 0, None)
    table.received("subscribe", CH, "1")
    table.received("message", CH, "0")
    table.received("message", CH, "1")
    assert words(table, [ticket]) == ["0"]
    table.received("message", CH, "1")
    assert words(table, [ticket]) == ["1"]  # taken: the next message's word is new
