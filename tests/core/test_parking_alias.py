"""A channel's alias (this client's own channel for the same waiters, docs/wire.md) when the
entry was made by a waiter that brings none: a ReadWriteLock's readers and writers share the
lock's channel, only writers bring the client channel."""

from __future__ import annotations

from tenure.core.parking import Parking

CH = "redisson_rwlock:{rw}"
ALIAS = "redisson_rwlock:{rw}:tenure:c1"
NOBODY: frozenset[str] = frozenset()
LOCK = "redisson_lock__channel:{lk}"
CLIENT = "redisson_lock__channel:{lk}:tenure:c1"


def test_a_waiter_with_the_alias_joining_a_readers_entry_subscribes_the_alias() -> None:
    table = Parking()
    _, _, first = table.join(CH, NOBODY, "reader", object)
    assert first
    assert table.names(CH) == [CH]
    relay = object()
    entry, _, first = table.join(CH, NOBODY, "writer", object, alias=ALIAS, relay=relay)
    assert first  # a SUBSCRIBE goes out...
    assert table.names(CH) == [CH, ALIAS]  # ...naming the alias
    assert table.aliases == {ALIAS: CH}
    assert entry.alias == ALIAS
    assert entry.relay is relay
    assert entry.alias_on


def test_a_lingering_readers_entry_takes_the_alias_of_a_writer() -> None:
    table = Parking(linger=0.5)
    table.join(CH, NOBODY, "reader", object)
    _, last = table.leave(CH, "reader", pass_on=False)
    assert not last
    assert CH in table.channels
    _, _, first = table.join(CH, NOBODY, "writer", object, alias=ALIAS, relay=object())
    assert first
    assert table.names(CH) == [CH, ALIAS]


def test_an_alias_the_server_refused_is_not_asked_again() -> None:
    table = Parking()
    table.join(CH, NOBODY, "writer", object, alias=ALIAS, relay=object())
    assert table.aliased([CH, ALIAS]) == [CH]  # refused: the channel alone
    _, _, first = table.join(CH, NOBODY, "writer2", object, alias=ALIAS, relay=object())
    assert not first
    assert table.names(CH) == [CH]


def test_a_wake_up_passed_on_leaves_the_lingering_entry_not_fresh() -> None:
    """A targeted unlock that reached this client while its entry lingered with no waiter is
    passed on (the relay takes this client out of the wake queue). A waiter whose refused
    attempt was sent before that message must try again before it sleeps: were the entry
    still fresh, it would sleep unregistered while the queue is served past it."""
    now = [10.0]
    table = Parking(linger=1.0, clock=lambda: now[0])
    relay = object()
    table.join(LOCK, NOBODY, "w1", object, alias=CLIENT, relay=relay)
    table.received("subscribe", LOCK, "1")
    table.received("subscribe", CLIENT, "2")
    table.leave(LOCK, "w1", pass_on=False)  # granted: the entry lingers
    attempt_sent = now[0] = 11.0
    now[0] = 11.5
    assert table.received("message", CLIENT, "0") == []  # nobody waits: passed on
    assert table.relays == [relay]
    entry, _, first = table.join(LOCK, NOBODY, "w2", object, alias=CLIENT, relay=relay)
    assert not first
    assert not entry.fresh(attempt_sent)


def test_a_renewal_on_the_lingering_alias_keeps_the_entry_fresh() -> None:
    now = [10.0]
    table = Parking(linger=1.0, clock=lambda: now[0])
    table.join(LOCK, NOBODY, "w1", object, alias=CLIENT, relay=object())
    table.received("subscribe", LOCK, "1")
    table.received("subscribe", CLIENT, "2")
    table.leave(LOCK, "w1", pass_on=False)
    attempt_sent = now[0] = 11.0
    now[0] = 11.5
    table.received("message", LOCK, "-30000")  # a renewal wakes nobody, passes nothing on
    assert table.relays == []
    entry, _, _ = table.join(LOCK, NOBODY, "w2", object, alias=CLIENT, relay=object())
    assert entry.fresh(attempt_sent)
