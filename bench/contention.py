"""One lock, P processes (each its own client) taking it in a loop; each hold does real work.

Every contender, tenure's and every peer's alike, runs the same critical section while it
holds the lock: a GET and a SET of a counter on its own redis-py connection (not an empty
section, which would reward a lock that lets one process re-take it at once). The counter's
final value is checked against the acquisitions: a lost update means two holders at once.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from typing import Any

import redis

from bench import peers
from bench.common import Results, calls_delta, command_calls, jain, p

MESSAGE_KINDS = {b"message", b"pmessage", b"smessage", "message", "pmessage", "smessage"}


def _count_messages() -> list[int]:
    """Count the pub/sub messages this process reads: [count], updated in place. Counted where
    redis-py's own parsers (RESP2, RESP3) parse a whole reply, which every library here goes
    through: the peers by ``Connection.read_response``, tenure's pub/sub reader by the
    parser itself (tenure._redis.read_push: it keeps the reply before the parser's buffer
    lets the bytes go). Only the outermost reply of a parse counts (the parse recurses into
    an array's elements); per thread."""
    import threading

    from redis._parsers import _RESP2Parser, _RESP3Parser

    count = [0]
    depth = threading.local()

    def counting(original: Any) -> Any:
        def _read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
            level = getattr(depth, "level", 0)
            depth.level = level + 1
            try:
                reply = original(self, *args, **kwargs)
            finally:
                depth.level = level
            # (an EXEC reply's first element may be a list: not hashable, never a message)
            if level == 0 and isinstance(reply, list) and reply:
                count[0] += isinstance(reply[0], (bytes, str)) and reply[0] in MESSAGE_KINDS
            return reply

        return _read_response

    for parser in (_RESP2Parser, _RESP3Parser):
        parser._read_response = counting(parser._read_response)  # type: ignore[method-assign]
    return count


def _worker(
    subject: str, url: str, name: str, seconds: float, ready: Any, go: Any, start: Any, out: Any
) -> None:
    messages = _count_messages()
    try:
        acquire, release, close = peers.FACTORIES[subject](url, name)
    except Exception as error:  # the parent skips the subject, it does not wait forever
        ready.put(repr(error))
        return
    work = redis.Redis.from_url(url)
    counter = f"{name}:counter"
    try:
        acquire()  # scripts loaded, connections made: not part of the measured run
        release()
        work.get(counter)
        ready.put(True)
        go.wait()
        end = start.value + seconds
        waits: list[float] = []
        cpu, heard = time.process_time(), messages[0]
        while (called := time.time()) < end:
            acquire()
            waits.append(time.time() - called)
            value = work.get(counter)  # the critical section: GET + SET of a counter
            work.set(counter, int(value or 0) + 1)
            release()
        out.put((len(waits), waits, time.process_time() - cpu, messages[0] - heard))
    finally:
        work.close()
        close()


def contend(url: str, subject: str, procs: int, seconds: float) -> dict[str, Any] | None:
    """Run ``procs`` processes of ``subject`` for ``seconds``: acquisitions/s, Jain's index
    over the per-process counts, wait (acquire call to return) median, p99 and worst, server
    commands per acquisition (INFO commandstats, script-inner calls included; the critical
    section's GET and SET counted out), client CPU per acquisition, pub/sub messages the
    processes read per acquisition (each follows one unlock: messages delivered per unlock)
    and lost updates. None when the subject cannot run here (its factory failed: a library
    version without what it needs)."""
    ctx = multiprocessing.get_context("spawn")
    ready, out, go, start = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
    name = f"bench:c:{subject}:{procs}:{time.time_ns()}"
    ps = [
        ctx.Process(
            target=_worker, args=(subject, url, name, seconds, ready, go, start, out), daemon=True
        )
        for _ in range(procs)
    ]
    for proc in ps:
        proc.start()
    answers: list[Any] = []
    deadline = time.monotonic() + 120
    while len(answers) < len(ps):
        try:
            answers.append(ready.get(timeout=1))
        except queue.Empty:
            if time.monotonic() > deadline or any(p.exitcode is not None for p in ps):
                answers.append("a worker died or hung before it was ready")
                break
    if any(a is not True for a in answers):
        for proc in ps:
            proc.kill()
            proc.join(10)
        print(f"  skipped {subject}: {next(a for a in answers if a is not True)}")
        return None
    raw = redis.Redis.from_url(url)
    before = command_calls(raw)
    start.value = time.time()
    go.set()
    time.sleep(seconds)
    reports = [out.get(timeout=300) for _ in ps]
    after = command_calls(raw)
    counter = int(raw.get(f"{name}:counter") or 0)
    for proc in ps:
        proc.join(30)
    raw.close()
    delta = calls_delta(before, after)
    counts = [r[0] for r in reports]
    waits = [w for r in reports for w in r[1]]
    total = sum(counts)
    work = 2 * total  # the critical section's own GET + SET
    return {
        "acq_per_s": total / seconds,
        "jain": jain(counts),
        "wait_median_ms": p(waits, 0.5) * 1e3 if waits else float("nan"),
        "wait_p99_ms": p(waits, 0.99) * 1e3 if waits else float("nan"),
        "wait_max_ms": max(waits) * 1e3 if waits else float("nan"),
        "cmds_per_acq": (sum(delta.values()) - work) / total if total else float("inf"),
        "cpu_us_per_acq": sum(r[2] for r in reports) / total * 1e6 if total else float("inf"),
        "lost_updates": total - counter,
        "messages_per_acq": sum(r[3] for r in reports) / total if total else float("inf"),
        "counts": counts,
        "commands": delta,
    }


METRICS = (
    "acq_per_s",
    "jain",
    "wait_median_ms",
    "wait_p99_ms",
    "wait_max_ms",
    "cmds_per_acq",
    "cpu_us_per_acq",
    "lost_updates",
    "messages_per_acq",
)

PEERS = ("python-redis-lock", "redis-py Lock", "sherlock")


def contention(
    results: Results,
    url: str,
    seconds: float,
    procs: tuple[int, ...],
    path: str = "contended",
    server: str = "",
) -> None:
    """Every subject at every P on ``url``, recorded under ``path`` (``server`` names it)."""
    names = list(peers.TENURE) + peers.available(*PEERS) + list(peers.FLOORS)
    for n in procs:
        for name in names:
            r = contend(url, name, n, seconds)
            if r is None:
                continue
            extra = {"procs": n, "counts": r["counts"], "commands": r["commands"]}
            if server:
                extra["server"] = server
            for metric in METRICS:
                results.add(path, name, peers.role(name), metric, r[metric], **extra)
