"""A Lock client's own channel lingers with the lock's (``core/parking.py``, docs/wire.md),
with no server: no UNSUBSCRIBE at a grant, none of the alias at a later SUBSCRIBE, and a
wake-up sent to this client alone is never lost, before or after the alias is let go."""

from __future__ import annotations

from tenure.core.listening import LINGER, Listening, Subscriptions

from .listening_tables import CH, NOBODY, up
from .scripted import Clock

ALIAS = CH + ":tenure:c"


def waited_and_left(clock: Clock) -> Listening:
    """A table whose one waiter subscribed ``CH`` with its alias, then left."""
    table = up(clock)
    table.parking.join(CH, NOBODY, "w", object, ALIAS, "relay")
    assert table.parking.names(CH) == [CH, ALIAS]
    table.subscribing(table.parking.names(CH))
    table.received("subscribe", CH, "1")
    table.received("subscribe", ALIAS, "2")
    table.parking.leave(CH, "w", False)
    return table


def test_the_alias_lingers_with_the_channel_and_is_idle() -> None:
    clock = Clock()
    table = waited_and_left(clock)
    assert table.take_alias_off() == []  # no UNSUBSCRIBE at the last leave
    assert table.idle_listener(CH)  # the release leaves this client out
    # Waited on again within the lingering: nothing to subscribe, alias included.
    table.parking.join(CH, NOBODY, "w2", object, ALIAS, "relay")
    assert not table.idle_listener(CH)


def test_a_lingering_channel_is_unwaited_to_its_end_idle_until_its_margin() -> None:
    """A release sends 1 while its client's subscription is idle, 2 at the end of its
    lingering (still counted, never woken alone: lock_release.lua), nothing with a waiter."""
    from tenure.core.listening import IDLE_MARGIN

    clock = Clock()
    table = waited_and_left(clock)
    client = Subscriptions()
    client.add(table)
    assert client.idle_listener(CH)
    assert client.unwaited(CH)
    clock.now += LINGER - IDLE_MARGIN / 2  # the margin: its UNSUBSCRIBE may be on its way
    assert not client.idle_listener(CH)
    assert client.unwaited(CH)
    table.parking.join(CH, NOBODY, "w2", object, ALIAS, "relay")
    assert not client.unwaited(CH)  # a waiter of this client waits there
    assert not client.unwaited("redisson_lock__channel:{other}")


def test_a_wake_up_on_the_lingering_alias_is_passed_on() -> None:
    table = waited_and_left(Clock())
    assert table.received("message", ALIAS, "0") == []
    assert table.parking.relays == ["relay"]


def test_a_wake_up_after_the_alias_was_let_go_is_passed_on_until_its_answer() -> None:
    clock = Clock()
    table = waited_and_left(clock)
    clock.now += LINGER + 0.01
    gone, _ = table.janitor_plan()
    assert gone == [CH]
    assert table.letting_go(CH) == [CH, ALIAS]  # one UNSUBSCRIBE names both
    # An unlock sent to this client alone before the server read that UNSUBSCRIBE:
    assert table.received("message", ALIAS, "0") == []
    assert table.parking.relays == ["relay"]  # passed on, not dropped
    table.parking.relays.clear()
    assert table.received("message", ALIAS, "-30000") == []  # a renewal: nothing to pass on
    assert table.parking.relays == []
    table.received("unsubscribe", CH, "1")
    table.received("unsubscribe", ALIAS, "0")
    assert table.received("message", ALIAS, "0") == []  # answered: no longer ours
    assert table.parking.relays == []
