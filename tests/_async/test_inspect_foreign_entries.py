# Foreign entries (asyncio source of tests/_sync/test_inspect_foreign_entries.py).
"""``inspect()`` names a holder only from a well-formed registration (DESIGN §2.2: None for
what it cannot tell): a registration key holding something else (not JSON, not an object,
a pid that is not a number) leaves those fields None and the hold as it is; a holder field
that is not tenure's or Redisson's ``<uuid>:<n>`` is shown as it is, with no client."""

from __future__ import annotations

import json

from support.twins import async_wait_until
from tenure.core.watchdog import registration_key


async def test_a_malformed_registration_leaves_the_holder_unnamed(async_make_client, r):
    # The registration rides on the renewal pass (every watchdog_timeout / 3).
    holder_client = async_make_client(name="alpha", watchdog_timeout=0.6)
    assert await holder_client.lock("foreign-reg").acquire(lease_time=30)
    key = registration_key(holder_client.client_id)
    assert await async_wait_until(lambda: r.exists(key), timeout=5)
    looking = async_make_client()
    (holder,) = (await looking.inspect("foreign-reg")).holders
    assert holder.client_name == "alpha"
    # Closed: its renewal pass writes the registration no more (the hold stays: 30 s).
    await holder_client.close()
    for written in ("not json {", json.dumps(["alpha", 1])):
        r.set(key, written)
        (holder,) = (await looking.inspect("foreign-reg")).holders
        assert (holder.client_name, holder.host, holder.pid) == (None, None, None), written
        assert holder.hold_count == 1
        assert holder.client_id == holder_client.client_id
    r.set(key, json.dumps({"name": "alpha", "host": "h1", "pid": "12"}))
    (holder,) = (await looking.inspect("foreign-reg")).holders
    assert (holder.client_name, holder.host, holder.pid) == ("alpha", "h1", None)
    r.set(key, json.dumps({"name": "alpha", "host": "h1", "pid": True}))
    (holder,) = (await looking.inspect("foreign-reg")).holders
    assert holder.pid is None  # a bool is not a pid


async def test_a_holder_field_of_another_form_is_shown_as_it_is(async_client, r):
    r.hset("foreign-field", "somebody-else", 2)
    r.pexpire("foreign-field", 30_000)
    info = await async_client.inspect("foreign-field")
    assert info.kind == "lock"
    (holder,) = info.holders
    assert holder.owner == "somebody-else"
    assert holder.client_id is None
    assert holder.hold_count == 2
    assert (holder.client_name, holder.host, holder.pid) == (None, None, None)
    assert 29 < info.remaining_lease <= 30
