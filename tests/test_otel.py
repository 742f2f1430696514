"""OpenTelemetry metrics and spans (tenure[otel]), read back with the SDK's in-memory reader
and exporter, on a real server."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tenure
from tenure import observe
from tenure._concurrency import Event


class Telemetry:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found += list(metric.data.data_points)
        return found

    def total(self, name: str, **attributes: str) -> float:
        """Sum of a counter's points (a histogram's counts) whose attributes include these."""
        total = 0.0
        for point in self.points(name):
            if all(point.attributes.get(k) == v for k, v in attributes.items()):
                total += point.count if hasattr(point, "bucket_counts") else point.value
        return total

    def spans(self, name: str) -> list[Any]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = Telemetry()
    assert observe.instrument(t.meter_provider, t.tracer_provider)
    yield t
    observe.instrument()  # back to the global providers


def test_acquire_release_and_timeout_are_measured(make_client, telemetry):
    holder = make_client().lock("measured")
    assert holder.acquire()
    assert not make_client().lock("measured").acquire(timeout=0.1)
    holder.release()

    kind = {"tenure.lock.kind": "Lock"}
    assert telemetry.total("tenure.lock.acquisitions", **kind) == 1
    assert telemetry.total("tenure.lock.acquisition_failures", reason="timeout", **kind) == 1
    assert telemetry.total("tenure.lock.wait_time", **kind) == 2
    assert telemetry.total("tenure.lock.hold_time", **kind) == 1
    assert telemetry.total("tenure.lock.holds", **kind) == 0

    acquires = telemetry.spans("tenure.acquire")
    assert [s.attributes["tenure.lock.acquired"] for s in acquires] == [True, False]
    assert all(s.attributes["tenure.lock.name"] == "measured" for s in acquires)
    assert all(s.attributes["tenure.lock.kind"] == "Lock" for s in acquires)
    assert acquires[1].attributes["tenure.lock.wait_time"] >= 0.1
    (release,) = telemetry.spans("tenure.release")
    assert release.attributes["tenure.lock.name"] == "measured"


def test_kinds_of_other_locks(make_client, telemetry):
    client = make_client()
    with client.fair_lock("f"), client.read_write_lock("rw").read_lock():
        assert client.fenced_lock("t").acquire_token() is not None
        assert telemetry.total("tenure.lock.holds") == 3
    client.fenced_lock("t").release()
    for kind in ("FairLock", "ReadLock", "FencedLock"):
        assert telemetry.total("tenure.lock.acquisitions", **{"tenure.lock.kind": kind}) == 1
    assert telemetry.total("tenure.lock.holds") == 0


def test_semaphores_are_measured_as_holds(make_client, r, telemetry):
    client = make_client()
    sem = client.semaphore("pool")
    assert sem.try_set_permits(2)
    assert sem.acquire(2)
    assert not sem.acquire(timeout=0.05)
    sem.release(2)
    permits = client.permit_expirable_semaphore("leases")
    assert permits.try_set_permits(1)
    permit = permits.acquire()
    assert permit is not None
    assert (
        telemetry.total("tenure.lock.holds", **{"tenure.lock.kind": "PermitExpirableSemaphore"})
        == 1
    )
    permits.release(permit)

    kind = {"tenure.lock.kind": "Semaphore"}
    assert telemetry.total("tenure.lock.acquisitions", **kind) == 1
    assert telemetry.total("tenure.lock.acquisition_failures", reason="timeout", **kind) == 1
    assert telemetry.total("tenure.lock.hold_time", **kind) == 1
    kind = {"tenure.lock.kind": "PermitExpirableSemaphore"}
    assert telemetry.total("tenure.lock.acquisitions", **kind) == 1
    assert telemetry.total("tenure.lock.hold_time", **kind) == 1
    assert telemetry.total("tenure.lock.holds") == 0
    names = {s.attributes["tenure.lock.name"] for s in telemetry.spans("tenure.release")}
    assert names == {"pool", "leases"}


def test_a_lost_permit_is_counted_as_a_loss(make_client, r, telemetry):
    reported = Event()
    client = make_client(watchdog_timeout=0.3)
    permits = client.permit_expirable_semaphore("gone", on_lost=lambda *_: reported.set())
    assert permits.try_set_permits(1)
    permit = permits.acquire()
    assert permit is not None
    assert r.delete("{gone}:timeout") == 1  # the permit's entry: taken away
    assert reported.wait(5)
    kind = {"tenure.lock.kind": "PermitExpirableSemaphore"}
    assert telemetry.total("tenure.lock.losses", **kind) == 1
    assert telemetry.total("tenure.lock.holds", **kind) == 0
    with pytest.raises(tenure.LockLostError):
        permits.release(permit)
    assert telemetry.total("tenure.lock.losses", **kind) == 1


def test_renewals_and_a_loss_are_counted(make_client, r, telemetry):
    reported = Event()
    client = make_client(watchdog_timeout=0.3)
    lock = client.lock("renewed", on_lost=lambda _: reported.set())
    lock.acquire()
    deadline = time.monotonic() + 10
    while telemetry.total("tenure.lock.renewals") < 2:  # no event for a renewal: poll
        assert time.monotonic() < deadline, "the watchdog renewed nothing"
        time.sleep(0.05)
    assert r.delete("renewed") == 1
    assert reported.wait(5)
    assert telemetry.total("tenure.lock.losses", **{"tenure.lock.kind": "Lock"}) == 1
    assert telemetry.total("tenure.lock.holds") == 0
    with pytest.raises(tenure.LockLostError):
        lock.release()
    assert telemetry.total("tenure.lock.losses") == 1  # the release reports the same loss
    (release,) = telemetry.spans("tenure.release")
    assert release.status.status_code.name == "ERROR"


def test_renewal_failures_are_counted(make_client, r, telemetry):
    lock = make_client(watchdog_timeout=0.6, socket_timeout=0.2).lock("stalled")
    lock.acquire()
    r.client_pause(1200, all=True)
    deadline = time.monotonic() + 10
    while telemetry.total("tenure.lock.renewal_failures") < 1:
        assert time.monotonic() < deadline, "no renewal failure counted"
        time.sleep(0.05)


def test_nothing_is_recorded_when_uninstrumented(make_client, telemetry):
    observe.uninstrument()
    assert not observe.enabled()
    with make_client().lock("quiet"):
        pass
    assert telemetry.points("tenure.lock.acquisitions") == []
    assert telemetry.spans("tenure.acquire") == []


# ------------------------------------------------------------------ logging of a loss
def _loss_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tenure" and r.levelno == logging.WARNING and "lost" in r.getMessage()
    ]


@pytest.mark.parametrize("instrumented", [False, True], ids=["plain", "otel"])
def test_one_loss_is_one_warning(make_client, r, request, caplog, instrumented):
    """The watchdog finds the hold gone and logs it; the release that then raises
    LockLostError does not log the same loss again (DEBUG only), with or without
    OpenTelemetry (the release takes another path when nothing records)."""
    if instrumented:
        request.getfixturevalue("telemetry")
    caplog.set_level(logging.DEBUG, logger="tenure")
    client = make_client(watchdog_timeout=0.6)
    lost = Event()
    lock = client.lock("once", on_lost=lambda _: lost.set())
    assert lock.acquire()
    r.delete("once")
    assert lost.wait(10)
    with pytest.raises(tenure.LockLostError):
        lock.release()
    warnings = _loss_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "found at release" not in warnings[0]
    assert any("found at release" in r.getMessage() for r in caplog.records)  # at DEBUG


def test_a_loss_only_a_release_finds_is_one_warning(make_client, r, caplog):
    """A hold with its own lease is not renewed: its release is the first to see the loss."""
    caplog.set_level(logging.WARNING, logger="tenure")
    lock = make_client().lock("by-release")
    assert lock.acquire(lease_time=60)
    r.delete("by-release")
    with pytest.raises(tenure.LockLostError):
        lock.release()
    warnings = _loss_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "found at release" in warnings[0], warnings
