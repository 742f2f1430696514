"""What tenure tells the outside: the ``tenure`` logger and optional OpenTelemetry.

The drivers call the hooks here (plain functions, no I/O) around acquire, release and each
watchdog pass; nothing else in tenure logs lock events or touches OpenTelemetry.

Logging, on the ``tenure`` logger (no handler is installed: Python's defaults apply):

- WARNING: a hold found lost (its lock name, kind and owner field), a failed renewal (the
  lock names and owners of the batch, the error);
- DEBUG: each acquisition (granted or wait ran out, seconds waited) and each release.

OpenTelemetry (``pip install 'tenure[otel]'``): when ``opentelemetry-api`` is importable, tenure
records the instruments below on the global meter and tracer providers (or the ones given to
[`instrument()`][tenure.observe.instrument]). Without it, and while neither global provider is set
(the API's proxies
would drop every measurement), every hook is a few attribute reads: no span, no bookkeeping.

========================================  =============  =========================================
instrument                                kind           meaning
========================================  =============  =========================================
``tenure.lock.acquisitions``              counter        acquisitions granted
``tenure.lock.acquisition_failures``      counter        acquisitions not granted (``reason``:
                                                         ``timeout`` or ``error``)
``tenure.lock.wait_time``                 histogram (s)  time an acquire call took
``tenure.lock.hold_time``                 histogram (s)  time from a grant to its release (or
                                                         its loss)
``tenure.lock.renewals``                  counter        holds renewed by the watchdog
``tenure.lock.renewal_failures``          counter        holds whose renewal call failed
``tenure.lock.losses``                    counter        holds found lost
``tenure.lock.holds``                     up-down        holds currently held by this process
========================================  =============  =========================================

Metric attributes: ``tenure.lock.kind`` only (``Lock``, ``FairLock``, ``ReadLock``,
``WriteLock``, ``FencedLock``, ``MultiLock``, ``RedLock``, ``Semaphore``,
``PermitExpirableSemaphore``: a permit counts as a hold, and for a ``Semaphore``, whose
permits have no owner, a release ends the latest acquisition of that semaphore in this
process; a CountDownLatch is not observed); lock names are unbounded, so they
appear on spans and log records, not on metrics. Spans: ``tenure.acquire`` and
``tenure.release`` with ``tenure.lock.name`` and ``tenure.lock.kind``; an acquire span also
has ``tenure.lock.acquired`` (bool) and ``tenure.lock.wait_time`` (seconds).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

from tenure.core.effects import Call, continued
from tenure.errors import BackendError, LockLostError

log = logging.getLogger("tenure")

__all__ = ["enabled", "instrument", "log"]


class _Instruments:
    """The OpenTelemetry instruments (one set per [`instrument()`][tenure.observe.instrument]
    call)."""

    def __init__(self, meter_provider: Any = None, tracer_provider: Any = None) -> None:
        from opentelemetry import metrics, trace

        self.live = meter_provider is not None or tracer_provider is not None or any(
            variable in os.environ
            for variable in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
        )
        """True once there is somewhere to record to: providers given, a global one set, or
        named by the environment (OpenTelemetry never unsets a global provider)."""
        # Where the API keeps its global providers (None until set). Reading them costs
        # nothing, where get_tracer_provider() looks at os.environ on every call; should a
        # later opentelemetry-api move them, the fallback counts them as set (records).
        self._globals = (trace, importlib.import_module("opentelemetry.metrics._internal"))

        try:
            version = importlib.metadata.version("tenure")
        except importlib.metadata.PackageNotFoundError:
            version = "0+unknown"
        meter = metrics.get_meter("tenure", version, meter_provider=meter_provider)
        self.tracer = trace.get_tracer("tenure", version, tracer_provider=tracer_provider)
        self.acquisitions = meter.create_counter(
            "tenure.lock.acquisitions", unit="{acquisition}", description="acquisitions granted"
        )
        self.acquisition_failures = meter.create_counter(
            "tenure.lock.acquisition_failures",
            unit="{acquisition}",
            description="acquisitions not granted (wait ran out, or an error)",
        )
        self.wait_time = meter.create_histogram(
            "tenure.lock.wait_time", unit="s", description="time an acquire call took"
        )
        self.hold_time = meter.create_histogram(
            "tenure.lock.hold_time", unit="s", description="time from a grant to its end"
        )
        self.renewals = meter.create_counter(
            "tenure.lock.renewals", unit="{hold}", description="holds renewed by the watchdog"
        )
        self.renewal_failures = meter.create_counter(
            "tenure.lock.renewal_failures", unit="{hold}", description="failed hold renewals"
        )
        self.losses = meter.create_counter(
            "tenure.lock.losses", unit="{hold}", description="holds found lost"
        )
        self.holds = meter.create_up_down_counter(
            "tenure.lock.holds", unit="{hold}", description="holds currently held"
        )
        self.since: dict[tuple[str, str], list[float]] = {}
        """(lock key or name, owner) -> monotonic grant time of each hold, for hold_time."""
        self.mutex = threading.Lock()

    def recording(self) -> bool:
        """True if a measurement would go anywhere: providers were given to
        [`instrument()`][tenure.observe.instrument], or a global tracer or meter provider is set by
        now."""
        if not self.live:
            tracing, metering = self._globals
            unset = getattr(tracing, "_TRACER_PROVIDER", True) is None and (
                getattr(metering, "_METER_PROVIDER", True) is None
            )
            self.live = not unset
        return self.live


_otel: _Instruments | None = None


def _recording() -> _Instruments | None:
    """The instruments, or None when nothing would be recorded (see `recording()`)."""
    otel = _otel
    return otel if otel is not None and otel.recording() else None


def instrument(meter_provider: Any = None, tracer_provider: Any = None) -> bool:
    """(Re)create tenure's OpenTelemetry instruments, on the given providers or, when None,
    the global ones (which may be set later: the API forwards to them once set).

    Called once at import. Returns False (and records nothing) when ``opentelemetry-api``
    is not installed.
    """
    global _otel
    try:
        _otel = _Instruments(meter_provider, tracer_provider)
    except ImportError:
        _otel = None
    return _otel is not None


def uninstrument() -> None:
    """Stop recording OpenTelemetry data (logging stays)."""
    global _otel
    _otel = None


def enabled() -> bool:
    """True while tenure records OpenTelemetry data."""
    return _otel is not None


def quiet() -> bool:
    """True when the acquire/release hooks would record nothing: no OpenTelemetry provider
    to record to and the ``tenure`` logger below DEBUG. The drivers then skip
    [`acquiring()`][tenure.observe.acquiring] and [`releasing()`][tenure.observe.releasing] (a
    release that finds its hold lost still
    reports it through [`lost_at_release()`][tenure.observe.lost_at_release])."""
    return _recording() is None and not _debug()


def _debug() -> bool:
    """``log.isEnabledFor(logging.DEBUG)`` without the logger's level cache: a miss (after any
    ``setLevel`` in the process) takes the logging module's lock in a call made before its
    ``try`` (CPython before 3.13), and a signal handler raising as that call returns, in the
    main thread, leaves the lock held for good: every other thread's next use of it (a
    connection's handshake, a logger's cache miss) waits for ever. The same answer, read from
    the loggers' levels with no lock."""
    return (
        not log.disabled
        and log.manager.disable < logging.DEBUG
        and log.getEffectiveLevel() <= logging.DEBUG
    )


def lost_at_release(lock: Any, owner: str | tuple[str, ...]) -> None:
    """A release of ``lock`` by ``owner`` found its hold lost (``LockLostError``)."""
    lost(lock.name, kind_of(lock), owner, at_release=True)


def kind_of(lock: object) -> str:
    """A lock object's (or lock core's) kind: ``Lock``, ``FairLock``, ``RedLock``, ..."""
    kind = getattr(lock, "KIND", None)
    if isinstance(kind, str):
        return kind
    name = type(lock).__name__
    name = name.removeprefix("Async")
    return name.removesuffix("Core") or name


def _owner(owner: str | tuple[str, ...]) -> str:
    return owner if isinstance(owner, str) else ",".join(owner)


def _granted(result: object) -> bool:
    """An acquire flow's result means granted: True, or a fencing token."""
    return result is not None and result is not False


@contextmanager
def acquiring(lock: Any, owner: str | tuple[str, ...]) -> Iterator[list[Any]]:
    """Around one acquire call of ``lock`` (a lock object) by ``owner``. The body appends
    the flow's result to the yielded list."""
    otel = _recording()
    debug = _debug()
    if otel is None and not debug:
        yield []
        return
    kind, name = kind_of(lock), lock.name
    started = time.monotonic()
    outcome: list[Any] = []
    span_cm = (
        otel.tracer.start_as_current_span(
            "tenure.acquire", attributes={"tenure.lock.name": name, "tenure.lock.kind": kind}
        )
        if otel is not None
        else None
    )
    span = span_cm.__enter__() if span_cm is not None else None
    error: BaseException | None = None
    try:
        yield outcome
    except BaseException as failure:
        error = failure
        raise
    finally:
        waited = time.monotonic() - started
        granted = error is None and bool(outcome) and _granted(outcome[0])
        if debug:
            if error is not None:
                log.debug(
                    "acquire %s %r by %s failed after %.3f s: %r",
                    kind,
                    name,
                    _owner(owner),
                    waited,
                    error,
                )
            else:
                log.debug(
                    "acquire %s %r by %s: %s after %.3f s",
                    kind,
                    name,
                    _owner(owner),
                    "granted" if granted else "wait ran out",
                    waited,
                )
        if otel is not None and span is not None and span_cm is not None:
            attrs = {"tenure.lock.kind": kind}
            otel.wait_time.record(waited, attrs)
            if granted:
                otel.acquisitions.add(1, attrs)
                otel.holds.add(1, attrs)
                # A PermitExpirableSemaphore's grant is a permit id: its release names it.
                holder = outcome[0] if isinstance(outcome[0], str) else _owner(owner)
                with otel.mutex:
                    otel.since.setdefault((name, holder), []).append(time.monotonic())
            else:
                reason = "timeout" if error is None else "error"
                otel.acquisition_failures.add(1, {**attrs, "reason": reason})
            span.set_attribute("tenure.lock.acquired", granted)
            span.set_attribute("tenure.lock.wait_time", waited)
            if error is not None:
                span_cm.__exit__(type(error), error, error.__traceback__)
            else:
                span_cm.__exit__(None, None, None)


def _end_hold(otel: _Instruments, name: str, owner: str, kind: str, every: bool) -> int:
    """Record the end of one hold (every hold of (name, owner) when ``every``); returns how
    many holds ended (0 when none was recorded: already ended)."""
    with otel.mutex:
        starts = otel.since.get((name, owner))
        if not starts:
            return 0
        ended = list(starts) if every else [starts.pop()]
        if every:
            starts.clear()
        if not starts:
            del otel.since[name, owner]
    now = time.monotonic()
    attrs = {"tenure.lock.kind": kind}
    for start in ended:
        otel.hold_time.record(now - start, attrs)
        otel.holds.add(-1, attrs)
    return len(ended)


@contextmanager
def releasing(lock: Any, owner: str | tuple[str, ...]) -> Iterator[None]:
    """Around one release call of ``lock`` by ``owner``. A release that finds the hold
    lost ([`tenure.LockLostError`][tenure.errors.LockLostError]) is logged as a loss."""
    otel = _recording()
    debug = _debug()
    if otel is None and not debug:
        try:
            yield
        except LockLostError:
            lost_at_release(lock, owner)
            raise
        return
    kind, name = kind_of(lock), lock.name
    span_cm = (
        otel.tracer.start_as_current_span(
            "tenure.release", attributes={"tenure.lock.name": name, "tenure.lock.kind": kind}
        )
        if otel is not None
        else None
    )
    if span_cm is not None:
        span_cm.__enter__()
    error: BaseException | None = None
    try:
        yield
    except BaseException as failure:
        error = failure
        if isinstance(failure, LockLostError):
            lost(name, kind, owner, at_release=True)
        raise
    finally:
        if debug and error is None:
            log.debug("release %s %r by %s", kind, name, _owner(owner))
        elif debug:
            log.debug("release %s %r by %s failed: %r", kind, name, _owner(owner), error)
        if otel is not None:
            if error is None or not isinstance(error, LockLostError):
                # A failed release gave the hold up here too (it expires on the server).
                _end_hold(otel, name, _owner(owner), kind, every=False)
            if span_cm is not None:
                if error is not None:
                    span_cm.__exit__(type(error), error, error.__traceback__)
                else:
                    span_cm.__exit__(None, None, None)


_REPORTED_CAP = 4096
_reported: dict[tuple[str, str], None] = {}
"""(lock name, owner) of each loss the watchdog logged whose release has not yet come, oldest
first (at most `_REPORTED_CAP`): the release that then finds the hold lost logs nothing
new at WARNING."""
_reported_mutex = threading.Lock()


def _first_report(name: str, owner: str, at_release: bool) -> bool:
    """True unless this is the release of a hold whose loss the watchdog already logged."""
    with _reported_mutex:
        if at_release:
            return _reported.pop((name, owner), False) is False
        _reported[name, owner] = None
        while len(_reported) > _REPORTED_CAP:
            del _reported[next(iter(_reported))]
        return True


def lost(name: str, kind: str, owner: str | tuple[str, ...], at_release: bool = False) -> None:
    """A hold of lock ``name`` by ``owner`` was found lost (expired or taken): by the
    watchdog, or ``at_release`` by the owner's release (which may report a loss the watchdog
    found before: logged at WARNING and counted once)."""
    who = _owner(owner)
    log.log(
        logging.WARNING if _first_report(name, who, at_release) else logging.DEBUG,
        "%s %r: hold of owner %s lost (expired or taken)%s",
        kind,
        name,
        who,
        ", found at release" if at_release else "",
    )
    otel = _otel
    if otel is not None:
        ended = _end_hold(otel, name, _owner(owner), kind, every=True)
        if ended or not at_release:
            otel.losses.add(1, {"tenure.lock.kind": kind})


_never_set: set[tuple[str, str]] = set()
_never_set_mutex = threading.Lock()


def permits_never_set(kind: str, name: str) -> None:
    """An acquire of semaphore ``name`` (``kind``: ``Semaphore`` or
    ``PermitExpirableSemaphore``) found its permit count never set, and waits: said once per
    name and process at WARNING (such a wait ends only when someone sets, adds or releases
    permits), then at DEBUG."""
    with _never_set_mutex:
        first = (kind, name) not in _never_set
        if len(_never_set) >= _REPORTED_CAP:  # bounded: a name may be said again
            _never_set.clear()
        _never_set.add((kind, name))
    log.log(
        logging.WARNING if first else logging.DEBUG,
        "%s %r: its permits were never set, so acquire waits until someone calls "
        "set_permits(), try_set_permits(), add_permits() or release()",
        kind,
        name,
    )


def hold_lost(hold: Any) -> None:
    """The watchdog found ``hold`` (a `tenure.core.holds.Hold`) lost."""
    core = hold.sink
    lost(getattr(core, "name", hold.key), kind_of(core), hold.owner)


def _batch(call: Call) -> list[tuple[str, str]]:
    """(lock key, owner field) of each hold in a renewal batch (layout in
    `tenure.core.watchdog`: ARGV lease, then field and key count per hold)."""
    holds = []
    args, index = list(call.args[1:]), 0
    for at in range(0, len(args) - 1, 2):
        holds.append((call.keys[index], str(args[at])))
        index += int(args[at + 1])
    return holds


def renewal(flow: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """The watchdog pass ``flow``, observed: each renewal call's renewed holds are counted,
    and a failed call is logged at WARNING with the holds it was renewing."""
    return continued(flow, seen=_renewal_outcome)


def _renewal_outcome(effect: Any, value: Any, error: BaseException | None) -> None:
    if not isinstance(effect, Call):
        return
    otel = _otel
    if isinstance(error, BackendError):
        holds = _batch(effect)
        log.warning(
            "renewal of %d hold(s) failed (retried next pass; lost once the lease ran "
            "out): %s; holds: %s",
            len(holds),
            error,
            ", ".join(f"{key!r} by {owner}" for key, owner in holds),
        )
        if otel is not None:
            otel.renewal_failures.add(len(holds))
    elif error is None and otel is not None and isinstance(value, list):
        otel.renewals.add(sum(1 for r in value if int(r) == 1))


instrument()
