"""The frame every waiter's loop runs in, sans I/O (docs/internals.md, "Waiting").

A waiter subscribes to its channel, runs its loop (attempts and sleeps), and leaves the
channel however the loop ends. One that ends with an error or a cancellation may have
taken a wake-up it will not use, so it passes one on to another waiter of its client.
"""

from __future__ import annotations

from typing import TypeVar

from tenure.core.effects import Flow, Subscribe, Unsubscribe

T = TypeVar("T")


def subscribed(subscribe: Subscribe, loop: Flow[T]) -> Flow[T]:
    """Run ``loop`` as a waiter on ``subscribe.channel``: after ``subscribe`` is confirmed,
    and leaving the channel when it returns (its result) or raises (re-raised, a wake-up
    passed on). ``GeneratorExit`` (the flow closed) is re-raised as is: a closed generator
    may yield nothing more."""
    # Built before any subscription exists: the leave after the loop makes no call before
    # its yield, so no signal handler can raise between the loop's end and that yield.
    leave = Unsubscribe(subscribe.channel)
    again = Unsubscribe(subscribe.channel, pass_on=True)
    try:
        yield subscribe
    except GeneratorExit:
        raise
    except BaseException:
        # Raised once the subscription was made, as well as before: a signal handler's
        # exception (or a cancellation) between the listener's answer and this yield
        # comes here. Leave, or the ticket and the channel's subscription stay for good
        # (the listener's unsubscribe is a no-op if the subscribe failed).
        yield from leaving(again)
        raise
    try:
        result = yield from loop
    except GeneratorExit:
        raise
    except BaseException:
        yield from leaving(again)
        raise
    try:  # `leaving(leave)`, inline: a generator's start is where a handler can raise
        yield leave
    except GeneratorExit:
        raise
    except BaseException:
        yield again  # thrown at the yield, perhaps before the driver left (see leaving())
        raise
    return result


def leaving(unsubscribe: Unsubscribe) -> Flow[None]:
    """Yield ``unsubscribe``; if an exception is thrown there, which may have come before
    the driver performed it (a signal handler run between the runner's steps), yield it
    again (with ``pass_on``) before re-raising: a no-op if the first one left (the
    listener's unsubscribe does nothing for a caller with no ticket), else the ticket and
    the channel's subscription would stay for good."""
    try:
        yield unsubscribe
    except GeneratorExit:
        raise
    except BaseException:
        yield Unsubscribe(unsubscribe.channel, pass_on=True)
        raise
