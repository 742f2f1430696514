"""A channel's alias (this client's own channel for the same waiters, docs/wire.md) when the
entry was made by a waiter that brings none: a ReadWriteLock's readers and writers share the
lock's channel, only writers bring the client channel."""

from __future__ import annotations

from tenure.core.parking import Parking

CH = "redisson_rwlock:{rw}"
ALIAS = "redisson_rwlock:{rw}:tenure:c1"
NOBODY: frozenset[str] = frozenset()


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
