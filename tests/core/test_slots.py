"""Every key and channel of one primitive lands in one cluster slot (docs/wire.md hash tags),
for plain names and names that carry their own ``{tag}``; tenure's slot function agrees with
redis-py's."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from tenure import keys
from tenure.scripts import get, names, sharded

OWNER = "6f1c2a9e-0000-4000-8000-000000000000:7"
# Lone surrogates: UTF-8 cannot encode them (a name must be valid UTF-8).
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
NAMES = ["orders:42", "a", "x" * 200, "{user1}:cart", "pre{tag}post", "{t}", "ü{ñ}"]


def wire(name: str) -> list[str]:
    """Every key and channel a script of any kind touches for lock ``name``."""
    return [
        name,
        keys.lock_channel(name),
        keys.token_key(name),
        keys.fair_queue_key(name),
        keys.fair_timeout_key(name),
        keys.fair_waiter_channel(name, OWNER),
        keys.rw_channel(name),
        *keys.rw_read_timeout_keys(name, OWNER, 3),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_every_key_of_a_name_shares_its_slot(name: str) -> None:
    slots = {key_slot(k.encode()) for k in wire(name)}
    assert slots == {key_slot(name.encode())}


def test_a_tagged_name_keeps_its_tag() -> None:
    assert keys.lock_channel("{user1}:cart") == "redisson_lock__channel:{user1}:cart"
    assert key_slot(b"{user1}:cart") == key_slot(b"user1")


@given(st.text(st.characters(exclude_characters="{}", exclude_categories=SURROGATES), min_size=1))
def test_plain_names_of_any_text(name: str) -> None:
    assert {key_slot(k.encode()) for k in wire(name)} == {key_slot(name.encode())}


@given(st.text(st.characters(exclude_categories=SURROGATES)))
def test_tenure_slot_function_is_redis_pys(key: str) -> None:
    assert keys.key_slot(key) == key_slot(key.encode())


def test_sharded_variants_publish_with_spublish_only() -> None:
    publishing = [get(n) for n in names() if "('publish'" in get(n).source]
    assert publishing  # releases publish
    assert "redis.pcall('publish'" in get("lock_renew").source  # renewals tell waiters
    for script in publishing:
        variant = sharded(script)
        assert "('publish'" not in variant.source
        assert "('spublish'" in variant.source
        assert variant.sha != script.sha
    quiet = get("lock_extend")  # publishes nothing (a lock_acquire re-entry may: 24c411c)
    assert sharded(quiet) is quiet


@pytest.mark.parametrize("name", ["a{b", "{}{x}", "x}{y", "{"])
def test_names_without_a_usable_tag_are_not_cluster_safe(name: str) -> None:
    assert not keys.cluster_safe(name)
    assert len({key_slot(k.encode()) for k in wire(name)}) > 1  # why


@pytest.mark.parametrize("name", NAMES)
def test_usual_names_are_cluster_safe(name: str) -> None:
    assert keys.cluster_safe(name)


def test_sharded_variant_keeps_an_upper_case_cluster_wide_publish() -> None:
    from tenure.scripts import Script

    source = "redis.call('publish', KEYS[2], '0')\nredis.call('PUBLISH', ARGV[1], '0')\n"
    variant = sharded(Script("latch_like", source, "x"))
    assert variant.source == (
        "redis.call('spublish', KEYS[2], '0')\nredis.call('PUBLISH', ARGV[1], '0')\n"
    )
