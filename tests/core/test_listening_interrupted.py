"""An interrupt (a signal handler's exception, a cancellation) in the middle of a subscribe,
with no server (``core/parking.py``, ``core/listening.py``): whatever the place, the table's
count of SUBSCRIBEs in flight stays true, so a later waiter on the channel is confirmed by
an answer that comes (before: it waited 5 s for one never asked, "no confirmation")."""

from __future__ import annotations

from tenure.core.listening import FIRST_RETRY

from .listening_tables import CH, NOBODY, up
from .scripted import Clock


def test_a_waiter_interrupted_before_its_subscribe_was_counted_leaves_no_entry() -> None:
    # join() made the entry and said SUBSCRIBE is due; the handler raised before the
    # driver counted it (subscribing()): the waiter's clean-up leaves.
    clock = Clock()
    table = up(clock)
    entry, _, first = table.parking.join(CH, NOBODY, "a", object)
    assert first
    assert not entry.confirmed
    assert table.parking.leave(CH, "a", pass_on=False) == ([], False)
    assert table.parking.drop_unasked(CH)  # the driver's clean-up after the interrupt
    assert CH not in table.parking.channels  # no unsubscribed entry lingers
    # The next waiter makes the subscription itself, and its answer confirms it.
    entry, _, first = table.parking.join(CH, NOBODY, "b", object)
    assert first
    assert table.subscribing([CH])
    assert table.received("subscribe", CH, "1") != []
    assert entry.confirmed


def test_a_counted_subscribe_cut_short_gives_the_connection_up_at_once() -> None:
    # Counted as sent, then the handler raised before or while it was written: whether the
    # server got it is unknown. Given up as interrupted: no back-off, the counts start over.
    clock = Clock()
    table = up(clock)
    table.parking.join(CH, NOBODY, "a", object)
    assert table.subscribing([CH])
    table.lost(interrupted=True)
    assert not table.connected
    assert table.retry_at == clock.now
    assert table.delay == FIRST_RETRY
    table.parking.leave(CH, "a", pass_on=False)  # the interrupted waiter's clean-up
    assert table.parking.drop_unasked(CH)  # not subscribed on any connection now
    assert table.janitor_step() is None  # nobody waits: nothing to connect for
    entry, _, first = table.parking.join(CH, NOBODY, "b", object)
    assert first
    assert not table.subscribing([CH])
    assert table.janitor_step() == "connect"
    assert table.connected_now() == [[CH]]
    assert list(table.asked) == [[CH]]  # one question, one answer to come
    assert table.received("subscribe", CH, "1") != []
    assert entry.confirmed
    assert not table.asked


def test_an_entry_asked_for_or_subscribed_is_never_dropped_as_unasked() -> None:
    clock = Clock()
    table = up(clock)
    table.parking.join(CH, NOBODY, "a", object)
    assert table.subscribing([CH])
    table.parking.leave(CH, "a", pass_on=False)
    assert not table.parking.drop_unasked(CH)  # its answer is on its way: it lingers
    table.received("subscribe", CH, "1")
    assert not table.parking.drop_unasked(CH)  # subscribed: lingers, the janitor lets go
    table.parking.join(CH, NOBODY, "b", object)
    assert not table.parking.drop_unasked(CH)  # waited on


def test_a_real_loss_still_backs_off() -> None:
    clock = Clock()
    table = up(clock)
    table.lost()
    assert table.retry_at == clock.now + FIRST_RETRY
    assert table.delay == 2 * FIRST_RETRY
