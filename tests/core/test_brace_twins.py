"""``x`` and ``{x}`` share Redisson's derived names (issue 9 item 12): the helper that says
which wire names collide agrees with the naming rules themselves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tenure import keys

names = st.text(alphabet="ab{}:", min_size=1, max_size=6)


def derived(name: str) -> tuple[str, ...]:
    return (
        keys.lock_channel(name),
        keys.token_key(name),
        keys.fair_queue_key(name),
        keys.fair_timeout_key(name),
        keys.rw_channel(name),
        keys.rw_read_timeout_key(name, "u:1", 1),
    )


@given(names, names)
def test_collide_exactly_when_the_derived_names_are_equal(a: str, b: str) -> None:
    shared = a != b and bool(set(derived(a)) & set(derived(b)))
    assert keys.derived_names_collide(a, b) == shared
    if shared:
        assert derived(a) == derived(b)  # not one key: every derived name


def test_examples() -> None:
    assert keys.brace_twin("orders") == "{orders}"
    assert keys.brace_twin("{orders}") == "orders"
    assert keys.brace_twin("{t}:orders") is None
    assert keys.brace_twin("{}") is None
    assert keys.derived_names_collide("x", "{x}")
    assert keys.derived_names_collide("{x}", "x")
    assert not keys.derived_names_collide("x", "x")
