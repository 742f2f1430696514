"""The shared pub/sub connection's rules (``core/listening.py``), with no server: who reads the
socket and who takes it over, SUBSCRIBE answers and refusals, health pings, reconnect
back-off and what a reconnect wakes."""

from __future__ import annotations

import pytest

from tenure.core.listening import (
    FIRST_RETRY,
    HEALTH_INTERVAL,
    JANITOR,
    LINGER,
    MAX_RETRY,
    Listening,
)

from .listening_tables import ALIAS, CH, NOBODY, relayed, up
from .scripted import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock(100.0)


# ------------------------------------------------------------------ the reader's role


def test_the_first_waiter_reads_the_others_sleep(clock: Clock) -> None:
    table = up(clock)
    assert table.role("a") == "read"
    assert table.reader == "a"
    assert table.role("b") == "sleep"
    table.sleeping("b", "cond-b")
    assert table.role("a") == "read"  # still the reader on its next step


def test_nobody_reads_while_the_connection_is_down(clock: Clock) -> None:
    table = Listening(clock=clock)
    assert table.role("a") == "sleep"
    assert table.reader is None
    table.connected_now()
    table.role("a")
    table.lost()
    assert table.role("a") == "sleep"
    assert table.reader is None  # lost under its read


def test_a_reader_that_stops_hands_the_socket_to_the_longest_sleeper(clock: Clock) -> None:
    table = up(clock)
    table.role("a")
    for key in ("b", "c"):
        table.role(key)
        table.sleeping(key, f"cond-{key}")
    assert table.hand_on("a") == "cond-b"
    assert table.reader is None
    table.awake("b")
    assert table.role("b") == "read"
    # A sleeper that stops while another reads hands nothing on.
    assert table.hand_on("c") is None


def test_a_sleeper_chosen_before_that_left_passes_the_socket_on(clock: Clock) -> None:
    # The reader left and named "b"; "b" stops waiting before taking the socket: its own
    # hand-on names the next sleeper, so the socket is never left unread.
    table = up(clock)
    table.role("a")
    table.sleeping("b", "cond-b")
    table.sleeping("c", "cond-c")
    assert table.hand_on("a") == "cond-b"
    table.awake("b")
    assert table.hand_on("b") == "cond-c"


def test_a_notify_for_the_blocked_reader_is_sent_as_one_ping(clock: Clock) -> None:
    from tenure.core.parking import Ticket

    table = up(clock)
    table.role("a")
    table.reader_cond = "cond-a"
    other = Ticket("cond-b")
    assert table.poke([other]) is False  # a sleeper is woken by its condition alone
    assert table.poke([Ticket("cond-a")]) is True  # with or without a permit
    assert table.poke([Ticket("cond-a", permit=True)]) is False  # one PING in flight
    table.other_reply()  # its reply came
    assert table.poke([Ticket("cond-a")]) is True


# ---------------------------------------------------------------------- reading


def test_lingering_channels_are_let_go_by_the_janitor_never_by_a_reader(
    clock: Clock,
) -> None:
    # A reader is a waiter (in the sync driver maybe the main thread, where a signal
    # handler may raise between the table letting a channel go and the UNSUBSCRIBE's
    # send): it reads on, the janitor lets the channel go.
    table = up(clock)
    table.parking.join(CH, NOBODY, "a", object)
    plan = table.plan_read(60.0)
    assert plan.unsubscribe == []
    assert plan.timeout == HEALTH_INTERVAL  # not cut short for a channel's lingering
    assert table.janitor_plan() == ([], LINGER)  # a channel may start lingering
    table.parking.leave(CH, "a", False)
    clock.now += LINGER
    assert table.plan_read(60.0).unsubscribe == []
    assert CH in table.parking.channels
    assert table.janitor_plan()[0] == [CH]
    assert CH not in table.parking.channels


def test_silence_pings_then_gives_the_connection_up(clock: Clock) -> None:
    table = up(clock, timeout=5.0)
    clock.now += HEALTH_INTERVAL - 1
    assert table.silent() is None
    clock.now += 1
    assert table.silent() == "ping"
    assert table.pinged
    assert table.plan_read(60.0).timeout == 5.0  # the PING's answer is awaited 5 s
    clock.now += 5.0
    assert table.silent() == "lost"


def test_any_reply_answers_the_health_ping(clock: Clock) -> None:
    table = up(clock, timeout=5.0)
    clock.now += HEALTH_INTERVAL
    assert table.silent() == "ping"
    clock.now += 1
    table.received("pong", "", "")
    assert not table.pinged
    assert table.heard == clock.now
    clock.now += 5.0
    assert table.silent() is None


# ------------------------------------------------------------- questions and answers


def test_subscribe_answers_are_matched_to_questions_in_order(clock: Clock) -> None:
    table = up(clock)
    for ch in ("a", "b"):
        table.parking.join(ch, NOBODY, "w", object)
        assert table.subscribing([ch])
    table.received("subscribe", "a", "1")
    assert list(table.asked) == [["b"]]
    # An error answers the oldest question still open: "b"'s.
    _, trouble, reason, again = table.refused("NOPERM no channel b", True)
    assert again == []
    assert trouble is False
    assert "SUBSCRIBE b" in reason
    assert table.parking.channels["b"].refusal == reason
    assert table.parking.channels["a"].refusal is None


def test_another_refusal_marks_every_unconfirmed_channel_dropped(clock: Clock) -> None:
    table = up(clock, sharded=True)
    table.parking.join("a", NOBODY, "w", object)
    table.subscribing(["a"])
    table.parking.join("b", NOBODY, "w", object)
    table.subscribing(["b"])
    table.received("ssubscribe", "a", "1")
    notify, trouble, _, _ = table.refused("MOVED 3999 127.0.0.1:7001", False)
    assert trouble is True  # the topology is refreshed
    assert table.parking.dropped == {"b"}
    assert not table.asked
    assert [t.permit for t in notify] == [True]  # its waiter re-checks and moves it


def test_a_refused_alias_is_dropped_and_its_channel_asked_again_alone(clock: Clock) -> None:
    # An ACL may allow "redisson_lock__channel:{l}" and not this client's own channel
    # beside it: the waiters then wait on the lock's channel alone, as Redisson's do.
    table = up(clock)
    entry, ticket, _ = table.parking.join(CH, NOBODY, "w", object, ALIAS, "relay")
    assert table.subscribing(table.parking.names(CH))
    notify, trouble, _, again = table.refused("NOPERM no channel", True)
    assert (notify, trouble, again) == ([], False, [[CH]])
    assert entry.alias is None
    assert table.parking.aliases == {}
    assert entry.refusal is None
    assert table.received("subscribe", CH, "1") == [ticket]
    assert entry.confirmed


def test_nothing_is_sent_while_down(clock: Clock) -> None:
    table = Listening(clock=clock)
    assert table.subscribing([CH]) is False
    assert not table.asked


# ------------------------------------------------------------------ reconnecting


def test_reconnect_back_off_grows_then_resets(clock: Clock) -> None:
    table = up(clock)
    table.parking.join(CH, NOBODY, "w", object)
    pauses = []
    for _ in range(7):
        table.connect_failed()
        pauses.append(round(table.retry_at - clock.now, 3))
    assert pauses == [FIRST_RETRY, 0.1, 0.2, 0.4, 0.8, MAX_RETRY, MAX_RETRY]
    assert table.down
    table.connected_now()
    assert not table.down
    assert table.delay == FIRST_RETRY


def test_the_janitor_connects_after_the_pause_holding_the_readers_role(clock: Clock) -> None:
    table = up(clock)
    table.parking.join(CH, NOBODY, "w", object)
    table.lost()
    assert table.janitor_step() is None  # the pause is not over
    _, due = table.janitor_plan()
    assert due == pytest.approx(FIRST_RETRY)
    clock.now += FIRST_RETRY
    assert table.janitor_step() == "connect"
    assert table.reader == JANITOR
    assert table.role("w") == "sleep"  # nobody reads meanwhile


def test_a_reconnect_subscribes_every_channel_and_wakes_after_the_answer(clock: Clock) -> None:
    table = up(clock)
    _, ticket, _ = table.parking.join("a", NOBODY, "w", object)
    table.subscribing(["a"])
    table.received("subscribe", "a", "1")
    assert table.lost() == []
    assert not ticket.permit  # nobody re-checks before...
    assert table.connected_now() == [["a"]]
    assert not ticket.permit
    assert table.received("subscribe", "a", "1") == [ticket]
    assert ticket.permit  # ...the answer


def test_a_failed_reconnect_wakes_every_waiter_to_re_check(clock: Clock) -> None:
    # The server may be gone (a single server: the attempt raises; a cluster: the channel
    # moves to the promoted replica): nobody is subscribed, so no message can be missed.
    table = up(clock)
    _, ticket, _ = table.parking.join("a", NOBODY, "w", object)
    table.subscribing(["a"])
    table.received("subscribe", "a", "1")
    assert table.lost() == []
    assert table.connect_failed() == [ticket]
    assert ticket.permit
    assert table.down


def test_a_sharded_reconnect_sends_one_channel_per_command(clock: Clock) -> None:
    table = up(clock, sharded=True)
    for ch in ("a", "b"):
        table.parking.join(ch, NOBODY, "w", object)
    table.lost()
    assert table.connected_now() == [["a"], ["b"]]
    assert table.subscribe_command == "SSUBSCRIBE"


def test_a_refused_channel_is_not_asked_again_on_reconnect(clock: Clock) -> None:
    table = up(clock)
    for ch in ("a", "b"):
        table.parking.join(ch, NOBODY, "w", object)
        table.subscribing([ch])
    table.refused("NOPERM", True)
    table.lost()
    assert table.connected_now() == [["b"]]


# --------------------------------------------------------------------- the janitor


def test_the_janitor_drains_only_while_nobody_reads(clock: Clock) -> None:
    table = up(clock)
    assert table.janitor_step() == "drain"
    table.role("a")
    assert table.janitor_step() is None
    table.hand_on("a")
    table.reader = JANITOR
    assert table.draining(JANITOR)
    table.sleeping("b", "cond-b")  # a waiter wants the socket: the janitor stops
    assert not table.draining(JANITOR)


def test_the_janitor_pings_an_idle_connection(clock: Clock) -> None:
    table = up(clock)
    _, due = table.janitor_plan()
    assert due == pytest.approx(HEALTH_INTERVAL)


def test_close_wakes_every_waiter(clock: Clock) -> None:
    table = up(clock)
    _, a, _ = table.parking.join("a", NOBODY, "w", object)
    _, b, _ = table.parking.join("b", NOBODY, "v", object)
    assert table.close() == [a, b]
    assert table.closed
    assert table.role("w") == "sleep"
    assert table.janitor_step() is None


def test_an_idle_lingering_subscription_is_reported_until_it_nearly_ends(clock: Clock) -> None:
    # The releaser's own subscription, lingering with nobody waiting, is no one to wake: a
    # release tells its script so, except when its UNSUBSCRIBE may already be on its way.
    from tenure.core.listening import IDLE_MARGIN

    table = relayed(clock)
    assert not table.idle_listener(CH)  # a waiter waits
    table.parking.leave(CH, "w", False)
    assert table.take_alias_off() == []  # the alias lingers with the channel (19cbd96)
    assert table.idle_listener(CH)
    clock.now += LINGER - IDLE_MARGIN
    assert not table.idle_listener(CH)


def test_the_janitor_reads_often_while_a_given_up_waiters_channel_lingers(
    clock: Clock,
) -> None:
    # A waiter that gave up leaves its client in the wake queue: an unlock for that client
    # alone must be passed on within RELAY_POLL, not at the janitor's next sweep.
    from tenure.core.listening import RELAY_POLL

    table = relayed(clock)
    assert table.janitor_plan() == ([], LINGER)  # waited on: the usual sweep
    table.parking.leave(CH, "w", False)
    assert table.left(CH, granted=False)  # its next look is LINGER away: wake it
    assert not table.left(CH, granted=False)  # counted as looking now: once
    assert table.janitor_plan()[1] == RELAY_POLL
    clock.now += RELAY_POLL / 2
    assert not table.left(CH, granted=False)  # it looks within RELAY_POLL anyway
    table.parking.join(CH, NOBODY, "w", object, ALIAS, "relay")  # waited on again
    assert table.janitor_plan()[1] > RELAY_POLL
    assert table.unheard == set()


def test_a_waiter_giving_up_while_the_connection_is_down_is_read_for_once_back(
    clock: Clock,
) -> None:
    # Its entry (waited on at the loss, so kept) lingers once it leaves, and the new
    # connection subscribes it again with its alias: its client is still in the wake queue,
    # so the janitor must read every RELAY_POLL from then on (else an unlock sent to it
    # waited for the releaser's back-up look, 0.1 s: reviewer R2's probe).
    from tenure.core.listening import RELAY_POLL

    table = relayed(clock)
    table.lost()
    table.parking.leave(CH, "w", False)
    assert not table.left(CH, granted=False)  # down: nothing to read yet
    table.connected_now()
    assert table.janitor_plan()[1] == RELAY_POLL


def test_a_waiter_leaving_with_the_lock_wakes_no_janitor(clock: Clock) -> None:
    # Its client holds the lock: the next unlock is its own (a client taking a lock in a
    # loop costs no janitor wake-up per acquisition).
    from tenure.core.listening import RELAY_POLL

    table = relayed(clock)
    table.janitor_plan()
    table.parking.leave(CH, "w", False, lease=30.0)
    assert not table.left(CH, granted=True)
    assert table.janitor_plan()[1] > RELAY_POLL
    # And a channel with no alias (no wake queue: nobody sends it a wake-up alone) neither.
    table.parking.join("other", NOBODY, "v", object)
    table.subscribing(["other"])
    table.received("subscribe", "other", "1")
    table.parking.leave("other", "v", False)
    assert not table.left("other", granted=False)


def test_a_release_telling_its_script_no_waiter_is_here_ends_the_freshness(
    clock: Clock,
) -> None:
    # Such a release may put this client back in the wake queue with a half score (not
    # seen waiting: docs/wire.md), undoing the registration of an attempt refused before
    # it: a waiter joining after that release must try (and register) again. An attempt
    # sent after the release needs no second try.
    from tenure.core.listening import Subscriptions

    table = relayed(clock)
    table.parking.leave(CH, "w", False)
    entry = table.parking.channels[CH]
    refused_at = clock.now + 0.01  # another owner's attempt, refused
    clock.now += 0.02
    assert table.idle_listener(CH)  # the release about to be sent says "no waiter here"
    clock.now += 0.01
    table.parking.join(CH, NOBODY, "v", object, ALIAS, "relay")
    assert not entry.fresh(refused_at)
    assert entry.fresh(clock.now)  # an attempt sent after the release
    table.parking.leave(CH, "v", False)
    # The same for a release at the end of the lingering (Subscriptions.unwaited()).
    clients = Subscriptions()
    clients.add(table)
    refused_at = clock.now + 0.01
    clock.now += 0.02
    assert clients.unwaited(CH)
    assert not entry.fresh(refused_at)
    assert entry.fresh(clock.now + 0.01)


def test_a_release_reply_stamps_its_put_back_again(clock: Clock) -> None:
    # The release's put-back runs on the server somewhere between its ask and its reply:
    # an attempt sent in between (on another connection) may have run before it and had
    # its registration undone, so its waiter must try again too.
    from tenure.core.listening import Subscriptions

    table = relayed(clock)
    table.parking.leave(CH, "w", False)
    entry = table.parking.channels[CH]
    clients = Subscriptions()
    clients.add(table)
    asked = clock.now
    assert clients.idle_listener(CH)  # the release about to be sent
    clock.now += 0.01
    sent_meanwhile = clock.now  # another owner's attempt, run before the release
    clock.now += 0.01
    clients.put_back_ran(CH, asked)  # the release's reply
    table.parking.join(CH, NOBODY, "v", object, ALIAS, "relay")
    assert not entry.fresh(sent_meanwhile)
    assert entry.fresh(clock.now + 0.01)  # an attempt sent after the reply
    # A release that asked nothing of this entry (stamped before it) stamps nothing.
    stamped = entry.put_back_at
    clock.now += 0.01
    clients.put_back_ran(CH, clock.now)
    assert entry.put_back_at == stamped
