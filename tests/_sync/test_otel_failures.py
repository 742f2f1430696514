# GENERATED from tests/_async/test_otel_failures.py by tools/unasync.py: edit that file, not this one.
"""What tenure records (OpenTelemetry metrics and spans, DEBUG logs) for an acquire or a
release that fails with an error, read back with the SDK's in-memory reader and exporter, on
a real server (tests/test_otel.py covers grants, timeouts and losses)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opentelemetry.trace import StatusCode
from test_otel import Telemetry

from tenure import LockKindError, observe

KIND = {"tenure.lock.kind": "Lock"}


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = Telemetry()
    assert observe.instrument(t.meter_provider, t.tracer_provider)
    try:
        yield t
    finally:
        observe.instrument()  # back to the global providers


def test_an_acquire_refused_by_the_server_is_a_failure_for_an_error(
    client, r, telemetry, caplog
):
    caplog.set_level(logging.DEBUG, logger="tenure")
    r.set("not-a-lock", "a string")  # the name is used by something else
    with pytest.raises(LockKindError, match="holds a string"):
        client.lock("not-a-lock").acquire(timeout=1)
    assert telemetry.total("tenure.lock.acquisition_failures", reason="error", **KIND) == 1
    assert telemetry.total("tenure.lock.acquisition_failures", reason="timeout", **KIND) == 0
    assert telemetry.total("tenure.lock.acquisitions", **KIND) == 0
    assert telemetry.total("tenure.lock.holds", **KIND) == 0
    assert telemetry.total("tenure.lock.wait_time", **KIND) == 1
    (span,) = telemetry.spans("tenure.acquire")
    assert span.attributes["tenure.lock.acquired"] is False
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]
    assert any(
        "acquire Lock 'not-a-lock'" in record.getMessage()
        and "failed after" in record.getMessage()
        and "LockKindError" in record.getMessage()
        for record in caplog.records
    )


def test_a_release_that_fails_ends_the_hold_it_measured(client, r, telemetry, caplog):
    # The server refuses the release (the key now holds another type): the hold ends here
    # all the same (it expires on the server), so the holds gauge goes back to 0.
    caplog.set_level(logging.DEBUG, logger="tenure")
    lock = client.lock("replaced")
    assert lock.acquire(lease_time=30)
    assert telemetry.total("tenure.lock.holds", **KIND) == 1
    r.delete("replaced")
    r.set("replaced", "a string")
    with pytest.raises(LockKindError, match="holds a string"):
        lock.release()
    assert telemetry.total("tenure.lock.holds", **KIND) == 0
    assert telemetry.total("tenure.lock.hold_time", **KIND) == 1
    (span,) = telemetry.spans("tenure.release")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["tenure.lock.name"] == "replaced"
    assert any(
        "release Lock 'replaced'" in record.getMessage() and "failed" in record.getMessage()
        for record in caplog.records
    )
    r.delete("replaced")


def test_a_release_of_a_hold_never_measured_records_no_hold_time(client, telemetry):
    # Acquired before the providers were set: its release ends no measured hold.
    observe.uninstrument()
    assert not observe.enabled()
    lock = client.lock("before")
    assert lock.acquire()
    assert observe.instrument(telemetry.meter_provider, telemetry.tracer_provider)
    assert observe.enabled()
    lock.release()
    assert telemetry.total("tenure.lock.hold_time", **KIND) == 0
    assert telemetry.total("tenure.lock.holds", **KIND) == 0
    assert len(telemetry.spans("tenure.release")) == 1
