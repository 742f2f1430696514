"""A campaign interrupted after its election (asyncio cancellation, a raising signal
handler): the caller never learns it leads, so the leadership must not stay behind,
renewed by the watchdog (docs/internals.md, "Cancellation and interruption")."""

from __future__ import annotations

from tenure.core.context import Context
from tenure.core.effects import Call, Subscribe, Unsubscribe
from tenure.core.election import ElectionCore

from .scripted import drive


class Interrupt(Exception):
    """What a signal handler raised (or asyncio's CancelledError)."""


def give_up_stepping_down(effect: object) -> bool:
    """A give-up that tells the script the client does not record the leadership (ARGV[3]
    '0'): if the owner leads, it steps down."""
    return (
        isinstance(effect, Call)
        and effect.script.name == "election_give_up"
        and effect.args[2] == "0"
    )


def test_a_campaign_interrupted_after_its_election_steps_down(ctx: Context, owner: str) -> None:
    election = ElectionCore(ctx, "e")
    run = drive(
        election.campaign(owner, "me", None),
        [
            ("election_campaign", [0, 5000]),  # another leads
            (Subscribe, None),
            ("election_campaign", [1, 7]),  # elected on the retry...
            (Unsubscribe, Interrupt()),  # ...and interrupted before campaign returns
            (Unsubscribe, None),  # left again: the first may not have been performed
            (give_up_stepping_down, 1),
        ],
        raises=True,
    )
    assert isinstance(run.error, Interrupt)
    assert ctx.holds.get(election.key, owner) is None  # never renewed


def test_a_campaign_not_interrupted_keeps_its_leadership(ctx: Context, owner: str) -> None:
    election = ElectionCore(ctx, "e")
    run = drive(
        election.campaign(owner, "me", None),
        [
            ("election_campaign", [0, 5000]),
            (Subscribe, None),
            ("election_campaign", [1, 7]),
            (Unsubscribe, None),
        ],
    )
    assert run.result == 7
    assert ctx.holds.get(election.key, owner) is not None
