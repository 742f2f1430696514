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


# Found by the simulator (mixed run, seed 165 with --rwlocks -1): a ReadWriteLock's waiters
# re-check each at its own end (no shared re-check). The lock changed hands to a writer
# with a 0.45 s lease; the releaser's back-up look told the queued clients its end
# (`-352`), but a waiter that had seen a 2.9 s end slept on to it, the lock free from the
# short lease's end.
def test_a_renewal_message_with_an_earlier_end_wakes_each_own_end_waiter() -> None:
    table, entry, (first, second) = parked(2)
    table.received("subscribe", CH, "1")
    now = table.clock()
    first_end, second_end = now + 30.0, now + 0.2
    assert entry.sleep_until(first, first_end, shared=False) == first_end
    assert entry.sleep_until(second, second_end, shared=False) == second_end
    assert table.received("message", CH, "-1000") == [first]  # the second wakes sooner
    told = entry.sleep_until(first, first_end, shared=False)
    assert now + 0.9 < told <= table.clock() + 1.0  # it sleeps to the new end, then tries
    assert entry.sleep_until(second, second_end, shared=False) == second_end
    assert not first.permit  # no wake-up: it re-checks at that end (its wait ends False)


def test_a_renewal_told_in_one_wait_does_not_cut_the_next() -> None:
    table, entry, (waiter,) = parked(1)
    table.received("subscribe", CH, "1")
    now = table.clock()
    entry.sleep_until(waiter, now + 30.0, shared=False)
    assert table.received("message", CH, "-1000") == [waiter]
    # Its attempt at that end was refused by a longer lease: the new wait ends later than
    # the end told in the last one.
    assert entry.sleep_until(waiter, now + 2.0, shared=False) == now + 2.0
    # A renewal of a later end (a watchdog's) wakes nobody.
    assert table.received("message", CH, "-3000") == []
    assert entry.sleep_until(waiter, now + 2.0, shared=False) == now + 2.0


def test_a_renewal_message_leaves_shared_waiters_to_the_head() -> None:
    table, entry, (head, later) = parked(2)
    table.received("subscribe", CH, "1")
    now = table.clock()
    entry.expires(now + 30.0, head)
    entry.sleep_until(head, now + 100.0, shared=True)
    entry.sleep_until(later, now + 100.0, shared=True)
    assert table.received("message", CH, "-1000") == [head]  # the later one sleeps on
    assert entry.sleep_until(later, now + 100.0, shared=True) == now + 100.0
