"""When the lease ends, the work ends: how fast a lost hold stops its ``async with`` body.

For each way of losing a hold, ``--losses`` (default 200) losses are injected, ``--bodies``
(default 10) bodies at a time, each body an ``async with lock:`` block of one asyncio
client sleeping until it is cancelled. Two figures per loss:

* detection -> cancellation: from the moment the client reports the loss to the body's
  scope (``AsyncLossScope.lost``, the renewal pass or the hold keeper's clock) to the
  moment the body's ``CancelledError`` reaches it (target: p99 <= 50 ms);
* loss on the server -> cancellation: from the moment the hold stopped being valid on the
  server (see below) to that same moment (target: <= one renewal period + one round trip
  + 50 ms). Negative when the body stopped before the server let the hold go: the client
  counts a lease from just before its grant or renewal was sent, less the clock-drift
  allowance, so a lease running out stops the body early, never late.

Ways of losing, and when the hold is gone on the server:

* ``forced``: another client's ``force_release()`` (just before it was sent);
* ``deleted``: the lock key deleted with a plain ``DEL`` (just before it was sent);
* ``lease``: a ``lease_time`` hold running out (the grant's send time + lease: the earliest
  the server can expire it);
* ``paused``: the server frozen (SIGSTOP) past the watchdog lease, so no renewal lands
  (last renewal's send time + lease: the earliest its expiry can come).

This is a measurement, not a test: it prints a table (and ``--json`` a record) and never
fails. Run: ``python -m bench.loss_latency [--losses N] [--bodies K] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import tenure
from tenure import _scope
from tenure.testing import EmbeddedServer

WATCHDOG = 0.3
"""Watchdog lease (s) of the measuring client: a renewal pass every 0.1 s."""
LEASE = 0.2
"""lease_time (s) of the ``lease`` way."""

DETECTED: dict[asyncio.Task[Any], float] = {}
"""Task of a body -> monotonic time its scope was told of the loss."""


def _record_detection() -> None:
    """Wrap ``AsyncLossScope.lost`` to note when each body's loss was detected."""
    original = _scope.AsyncLossScope.lost

    def lost(self: _scope.AsyncLossScope) -> None:
        task = getattr(self, "_task", None)
        if task is not None and task not in DETECTED:
            DETECTED[task] = time.monotonic()
        original(self)

    _scope.AsyncLossScope.lost = lost  # type: ignore[method-assign]


@dataclass
class Way:
    """The figures of one way of losing (milliseconds)."""

    name: str
    detect_to_cancel: list[float] = field(default_factory=list)
    loss_to_cancel: list[float] = field(default_factory=list)
    not_cancelled: int = 0

    def summary(self) -> dict[str, Any]:
        def pct(values: list[float], q: float) -> float:
            ordered = sorted(values)
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

        d, lc = self.detect_to_cancel, self.loss_to_cancel
        return {
            "way": self.name,
            "losses": len(d),
            "not_cancelled": self.not_cancelled,
            "detect_to_cancel_ms": {
                "p50": pct(d, 0.5), "p99": pct(d, 0.99), "max": max(d, default=0.0),
            },
            "loss_to_cancel_ms": {
                "p50": pct(lc, 0.5), "p99": pct(lc, 0.99), "max": max(lc, default=0.0),
                "min": min(lc, default=0.0), "mean": statistics.fmean(lc) if lc else 0.0,
            },
        }


async def body(lock: Any, entered: asyncio.Event, out: dict[str, float], **ctx: Any) -> None:
    """One guarded body: enter, note the hold's grant time, sleep until cancelled."""
    try:
        async with lock(**ctx):
            hold = lock.runner.ctx.holds.get(lock.core.key, lock.core.field(lock.runner.owner()))
            out["confirmed"] = hold.confirmed if hold is not None else time.monotonic()
            entered.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                out["cancelled"] = time.monotonic()
                task = asyncio.current_task()
                if task is not None and task in DETECTED:
                    out["detected"] = DETECTED.pop(task)
                raise
    except tenure.LockLostError:
        out["raised"] = time.monotonic()


async def round_of(
    way: Way,
    client: tenure.AsyncClient,
    names: list[str],
    inject: Callable[[list[str], list[dict[str, float]]], Awaitable[list[float]]],
    **ctx: Any,
) -> None:
    """Start one body per name, inject the losses, wait for every body to end."""
    outs: list[dict[str, float]] = [{} for _ in names]
    events = [asyncio.Event() for _ in names]
    tasks = [
        asyncio.create_task(body(client.lock(n), e, o, **ctx))
        for n, e, o in zip(names, events, outs, strict=True)
    ]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 10)
    lost_at = await inject(names, outs)
    _, pending = await asyncio.wait(tasks, timeout=10)
    for task in pending:
        task.cancel()
    for out, at in zip(outs, lost_at, strict=True):
        if "cancelled" not in out or "detected" not in out:
            way.not_cancelled += 1
            continue
        way.detect_to_cancel.append(1000 * (out["cancelled"] - out["detected"]))
        way.loss_to_cancel.append(1000 * (out["cancelled"] - at))


async def measure(losses: int, bodies: int) -> tuple[list[dict[str, Any]], dict[str, float]]:
    _record_detection()
    logging.getLogger("tenure").setLevel(logging.ERROR)  # a loss is a WARNING: quiet here
    server = EmbeddedServer().start()
    raw = server.redis()
    client = tenure.AsyncClient(server.url, watchdog_timeout=WATCHDOG, socket_timeout=0.5)
    other = tenure.AsyncClient(server.url)
    rounds = max(1, losses // bodies)
    names = [f"loss:{i}" for i in range(bodies)]
    started = time.monotonic()
    for _ in range(50):
        raw.ping()
    rtt = (time.monotonic() - started) / 50
    results = []
    try:
        await client.lock("warm").acquire()
        await client.lock("warm").release()

        async def forced(names: list[str], outs: list[dict[str, float]]) -> list[float]:
            at = []
            for n in names:
                at.append(time.monotonic())
                await other.lock(n).force_release()
            return at

        async def deleted(names: list[str], outs: list[dict[str, float]]) -> list[float]:
            at = []
            for n in names:
                at.append(time.monotonic())
                raw.delete(n)
            return at

        async def lease_end(names: list[str], outs: list[dict[str, float]]) -> list[float]:
            return [out["confirmed"] + LEASE for out in outs]

        ways: list[tuple[str, Any, dict[str, Any]]] = [
            ("forced", forced, {}),
            ("deleted", deleted, {}),
            ("lease", lease_end, {"lease_time": LEASE}),
            ("paused", None, {}),
        ]
        for name, inject, ctx in ways:
            way = Way(name)
            for _ in range(rounds):
                if inject is None:
                    await round_paused(way, client, names, server)
                else:
                    await round_of(way, client, names, inject, **ctx)
                raw.delete(*names)
            results.append(way.summary())
    finally:
        server.resume()
        await client.close()
        await other.close()
        raw.close()
        server.stop()
    return results, {"rtt_ms": 1000 * rtt, "renewal_period_ms": 1000 * WATCHDOG / 3}


async def round_paused(
    way: Way, client: tenure.AsyncClient, names: list[str], server: EmbeddedServer
) -> None:
    """The ``paused`` way: the bodies' server frozen past the watchdog lease."""
    outs: list[dict[str, float]] = [{} for _ in names]
    events = [asyncio.Event() for _ in names]
    locks = [client.lock(n) for n in names]
    tasks = [
        asyncio.create_task(body(lock, e, o))
        for lock, e, o in zip(locks, events, outs, strict=True)
    ]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 10)
    await asyncio.sleep(WATCHDOG / 3 * 1.5)  # let a renewal pass confirm the holds once
    server.pause()
    holds = client._runner.ctx.holds
    lost_at = []
    for lock in locks:  # frozen: no renewal is confirmed from now on
        hold = None
        for h in holds.watchdog_holds():
            if h.key == lock.core.key:
                hold = h
        lost_at.append(hold.confirmed + WATCHDOG if hold is not None else float("nan"))
    try:
        _, pending = await asyncio.wait(tasks, timeout=WATCHDOG + 2)
    finally:
        server.resume()
    for task in pending:
        task.cancel()
    for out, at in zip(outs, lost_at, strict=True):
        if "cancelled" not in out or "detected" not in out or at != at:
            way.not_cancelled += 1
            continue
        way.detect_to_cancel.append(1000 * (out["cancelled"] - out["detected"]))
        way.loss_to_cancel.append(1000 * (out["cancelled"] - at))
    await asyncio.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loss_latency", description=__doc__)
    parser.add_argument("--losses", type=int, default=200, help="losses per way (default 200)")
    parser.add_argument("--bodies", type=int, default=10, help="bodies per round (default 10)")
    parser.add_argument("--json", help="write the record to this file")
    args = parser.parse_args(argv)
    results, env = asyncio.run(measure(args.losses, args.bodies))
    bound = env["renewal_period_ms"] + env["rtt_ms"] + 50
    print(
        f"watchdog {WATCHDOG} s (renewal every {env['renewal_period_ms']:.0f} ms), lease_time "
        f"{LEASE} s, round trip {env['rtt_ms']:.2f} ms; loss->cancel target {bound:.0f} ms"
    )
    print(
        "| way | losses | not cancelled | detect->cancel p50 / p99 / max ms "
        "| loss->cancel min / p50 / p99 / max ms |"
    )
    print("|---|---|---|---|---|")
    for r in results:
        d, lc = r["detect_to_cancel_ms"], r["loss_to_cancel_ms"]
        print(
            f"| {r['way']} | {r['losses']} | {r['not_cancelled']} | {d['p50']:.2f} / "
            f"{d['p99']:.2f} / {d['max']:.2f} | {lc['min']:.1f} / {lc['p50']:.1f} / "
            f"{lc['p99']:.1f} / {lc['max']:.1f} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"env": env, "results": results, "argv": vars(args)}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
