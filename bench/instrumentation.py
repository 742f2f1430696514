"""Cost of tenure's instrumentation: acquire + release of an uncontended Lock, three ways,
sampled alternately in one run on one embedded server.

    python bench/instrumentation.py [--url redis://...] [--rounds 3000]

- ``raw``: the runner driven directly, no hooks at all (the floor);
- ``off``: the public API with OpenTelemetry absent (what ``tenure`` costs without
  ``tenure[otel]``: the hooks see no instruments and DEBUG logging off);
- ``on``: the public API with the OpenTelemetry SDK recording every metric and span (an
  in-memory reader and exporter).

Prints medians in µs and the ratios on/off and off/raw. Needs ``tenure[test]`` (the SDK).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import tenure
from tenure import observe
from tenure.embedded import embedded_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--rounds", type=int, default=3000)
    args = parser.parse_args()
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(embedded_server())
        client = stack.enter_context(tenure.Client(url))
        lock = client.lock("bench:instrumentation")
        runner = lock.runner

        def raw() -> None:
            owner = runner.owner()
            runner.run(lock.core.acquire(owner, True, None, 60.0))
            runner.run(lock.core.release(owner))

        def api() -> None:
            lock.acquire(lease_time=60.0)
            lock.release()

        observe.instrument(meter_provider, tracer_provider)
        instruments = observe._otel  # switched on and off below without rebuilding them
        samples: dict[str, list[float]] = {"raw": [], "off": [], "on": []}
        modes = [("raw", raw, False), ("off", api, False), ("on", api, True)]
        for round_ in range(args.rounds + 100):
            for name, fn, otel in modes:
                observe._otel = instruments if otel else None
                start = time.perf_counter()
                fn()
                took = time.perf_counter() - start
                if round_ >= 100:  # warm-up rounds are not counted
                    samples[name].append(took)
            if round_ % 500 == 0:
                exporter.clear()
        observe.instrument()
    med = {name: statistics.median(values) * 1e6 for name, values in samples.items()}
    print(f"acquire+release, median of {args.rounds} interleaved rounds (µs):")
    for name in ("raw", "off", "on"):
        print(f"  {name:>3}: {med[name]:8.1f}")
    print(f"  off/raw: {med['off'] / med['raw']:.3f}   on/off: {med['on'] / med['off']:.3f}")


if __name__ == "__main__":
    main()
