"""Signal helpers of the interrupt tests (test_interrupts.py, test_fair_interrupts.py)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any


def alarm_when_leaving(armed: threading.Event) -> Callable[[Any, str, Any], None]:
    """A `sys.settrace` tracer that lands a second SIGALRM on a clean-up's Unsubscribe:
    when a pub/sub listener's ``unsubscribe`` begins while ``armed`` is set, it disarms,
    has another thread hold that listener's mutex for 0.3 s (so the Unsubscribe waits for
    it) and sets SIGALRM to fire 0.1 s later, while it waits."""

    def hold_the_mutex(mutex: Any, holding: threading.Event) -> None:
        with mutex:
            holding.set()
            time.sleep(0.3)  # the second SIGALRM comes at 0.1 s

    def tracer(frame: Any, event: str, arg: Any) -> None:
        if (
            event == "call"
            and armed.is_set()
            and frame.f_code.co_name == "unsubscribe"
            and frame.f_code.co_filename.endswith("listener.py")
            and "self" in frame.f_locals
            and hasattr(frame.f_locals["self"], "_parking")
        ):
            armed.clear()
            holding = threading.Event()
            mutex = frame.f_locals["self"]._mutex
            threading.Thread(target=hold_the_mutex, args=(mutex, holding)).start()
            holding.wait(5)
            signal.setitimer(signal.ITIMER_REAL, 0.1)

    return tracer
