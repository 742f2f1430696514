"""CountDownLatch (Redisson's RCountDownLatch), sans I/O.

The count is a STRING; ``count_down`` deletes it at zero and publishes ``0`` on
``redisson_countdownlatch__channel__{name}`` (always braced, so for a hash-tagged name it is
not in the key's slot: scripts get it as an argument, not a key — docs/wire.md). ``delete``
publishes ``1`` (count set), as Redisson's ``deleteAsync``.
``wait`` reads the count, and while it is above zero subscribes, reads it again (closing the
race with a count-down published before the subscription) and sleeps until a message: ``0``
(reached zero) and ``1`` (count set, or deleted) wake every waiter of this client. A ``0``
that came after the waiter's fence (`tenure.core.parking.FENCE`: the answer to a
SUBSCRIBE of the channel sent after its call began, its own or one sent again for it when
it joined a subscription already there) was published during its wait: it returns at once,
with no read, and the client's waiters all leave in one hop. A ``0`` that came before may
be older than its call (the latch set again since; a message is not ordered with the GET
on another connection, and may still be on its way): the table gives it no word, and the
waiter reads the count again, as after ``1`` or a wake-up no message gave (a reconnect).
"""

from __future__ import annotations

import time

from tenure import keys, scripts
from tenure.core.args import check_name, check_wait
from tenure.core.context import Context
from tenure.core.effects import (
    Call,
    Command,
    Deadline,
    Flow,
    Subscribe,
    Wait,
)
from tenure.core.parking import FENCE
from tenure.core.semaphore import check_count
from tenure.core.waiting import subscribed

WAKE = frozenset({keys.LATCH_ZERO_MESSAGE, keys.LATCH_SET_MESSAGE, FENCE})


class LatchCore:
    """One named CountDownLatch of one client."""

    def __init__(self, ctx: Context, name: str) -> None:
        self.ctx = ctx
        self.name = check_name(name)
        self.key = ctx.wire_name(name)
        self.channel = keys.latch_channel(self.key)

    def try_set_count(self, count: object) -> Flow[bool]:
        n = check_count(count, "count", 1)
        call = Call(
            scripts.get("latch_try_set"),
            [self.key],
            [n, self.channel, keys.LATCH_SET_MESSAGE],
            changes=True,
        )
        return self._bool(call)

    def count_down(self) -> Flow[None]:
        yield Call(
            scripts.get("latch_count_down"),
            [self.key],
            [self.channel, keys.LATCH_ZERO_MESSAGE],
            changes=True,
        )

    def delete(self) -> Flow[bool]:
        call = Call(
            scripts.get("latch_delete"),
            [self.key],
            [self.channel, keys.LATCH_SET_MESSAGE],
            changes=True,
        )
        return self._bool(call)

    @staticmethod
    def _bool(call: Call) -> Flow[bool]:
        return int((yield call)) == 1

    def count(self) -> Flow[int]:
        reply = yield Command(("GET", self.key))
        return max(0, int(reply)) if reply is not None else 0

    def wait(self, timeout: object) -> Flow[bool]:
        """True once the count is 0 (or the latch is gone); False when ``timeout`` ran out."""
        wait = check_wait(True, timeout)
        return self._wait(Deadline(wait))

    def _wait(self, deadline: Deadline) -> Flow[bool]:
        began = time.monotonic()  # the fence must be sent after it (module docstring)
        if (yield from self.count()) == 0:
            return True
        if deadline.remaining() <= 0:
            return False
        subscribe = Subscribe(self.channel, WAKE, since=began)
        return (yield from subscribed(subscribe, self._sleep(deadline)))

    def _sleep(self, deadline: Deadline) -> Flow[bool]:
        while True:
            if (yield from self.count()) == 0:
                return True
            if deadline.remaining() <= 0:
                return False
            woken = yield Wait(self.channel, deadline.remaining())
            if woken == keys.LATCH_ZERO_MESSAGE:  # after its fence: newer than the call
                return True
