"""The shared lease-end re-check follows the latest lease end any waiter saw
(``Parked.expires()``, core/parking.py): a later report of an earlier end wakes the head."""

from __future__ import annotations

from tenure.core.parking import Parked, Parking, Ticket

CH = "redisson_lock__channel:{l}"


def parked(n: int) -> tuple[Parking, Parked, list[Ticket]]:
    table = Parking()
    tickets = []
    for key in range(n):
        entry, ticket, _first = table.join(CH, frozenset(), key, object)
        tickets.append(ticket)
    return table, entry, tickets


def test_a_later_waiter_seeing_an_earlier_end_wakes_the_head_to_sleep_until_it() -> None:
    _, entry, (head, later) = parked(2)
    assert entry.expires(100.0, head) == []  # the head's own report: it sleeps until 100
    assert entry.sleep_until(head, 1_000.0, shared=True) == 100.0
    # The lock changed hands, to a shorter lease: the later waiter's attempt saw it end at 10.
    assert entry.expires(10.0, later) == [head]
    assert entry.sleep_until(head, 1_000.0, shared=True) == 10.0
    assert entry.sleep_until(later, 1_000.0, shared=True) == 1_000.0  # not its duty


def test_a_later_end_moves_the_recheck_and_wakes_nobody() -> None:
    _, entry, (head, later) = parked(2)
    entry.expires(10.0, head)
    assert entry.expires(30.0, later) == []  # the head finds the new end when it wakes
    assert entry.sleep_until(head, 1_000.0, shared=True) == 30.0


def test_the_heads_own_earlier_report_wakes_nobody() -> None:
    _, entry, (head, _later) = parked(2)
    entry.expires(100.0, head)
    assert entry.expires(10.0, head) == []  # it is awake: it reads the end as it sleeps


def test_a_renewal_message_with_an_earlier_end_wakes_the_head() -> None:
    table, entry, (head, _later) = parked(2)
    table.received("subscribe", CH, "1")
    entry.expires(table.clock() + 30.0, head)
    # A holder renewing with a shorter lease than the last attempt saw (another client's
    # lease time): the head must not sleep to the old end.
    assert table.received("message", CH, "-1000") == [head]
    assert entry.expiry <= table.clock() + 1.0
    assert not head.permit  # a renewal is no wake-up: the head re-checks at the new end
