"""``tenure elect NAME [--value V] [-- CMD ...]`` and ``tenure elect --observe NAME``.

As ``etcdctl elect`` and ``elect -l``: campaign for the leadership of NAME and hold it (until
SIGINT/SIGTERM, then resign) or run CMD while leading — CMD is terminated when the
leadership is lost, as ``tenure run`` does for a lock — or print every leader change.
Options may come before or after NAME; COMMAND only after a ``--`` (it is optional).

Exit statuses: CMD's own; 0 after stepping down on SIGINT/SIGTERM (no CMD); 75 when
``--timeout`` ran out; 1 for a server error or a lost leadership; 2 for a usage error.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
from types import FrameType
from typing import Any

import click

import tenure
from tenure.cli.common import (
    client,
    grace_option,
    json_option,
    one_line,
    seconds,
    timeout_option,
    url_option,
    watchdog_option,
)
from tenure.cli.run import EXIT_ERROR, EXIT_TIMEOUT, CommandAfterName, Runner
from tenure.core.election import default_client_name


class CommandAfterDashes(CommandAfterName):
    """``tenure elect [OPTIONS] NAME [OPTIONS] [-- COMMAND...]``: the command only after --."""

    dashes_only = True

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return ["[OPTIONS]", "NAME", "[-- COMMAND...]"]


@click.command(cls=CommandAfterDashes)
@click.argument("name")
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
@click.option(
    "--value",
    default=None,
    metavar="V",
    help="What the leader announces (default: <hostname>:<pid>).",
)
@click.option(
    "-l",
    "--observe",
    is_flag=True,
    help="Do not campaign: print the leader, then every change (None: vacant), until interrupted.",
)
@timeout_option("to be elected")
@watchdog_option(
    "Leadership lease in seconds; renewed every third of it. A crashed leader is "
    "replaced when it runs out."
)
@grace_option("the leadership")
@json_option
@url_option
def elect(**options: Any) -> None:
    """Campaign for the leadership of NAME: hold it until interrupted, or run COMMAND while
    leading; with --observe, print each leader change instead.

    Candidates are elected in the order they started. Elected, tenure prints the term (a
    fencing token that strictly increases per NAME); COMMAND gets TENURE_ELECTION_NAME,
    TENURE_ELECTION_TERM and TENURE_ELECTION_VALUE in its environment, and is terminated
    with its children (SIGTERM, then SIGKILL after --grace seconds) if the leadership is
    lost. Exit status:
    COMMAND's, 0 after stepping down on SIGINT/SIGTERM without COMMAND, 75 when --timeout
    ran out, 1 for a server error or a lost leadership, 2 for a usage error.

    \b
    Examples:
      tenure elect scheduler --value host-a:8080
      tenure elect --timeout 60 scheduler -- ./run-scheduler.sh
      tenure elect --observe scheduler --json
    """
    if options["grace"] < 0:
        raise click.BadParameter("must be 0 or more seconds", param_hint="--grace")
    if options["observe"]:
        if options["command"]:
            raise click.UsageError("--observe takes no COMMAND")
        if options["value"] is not None:
            raise click.UsageError("--observe takes no --value (an observer does not campaign)")
        sys.exit(observe(options["name"], options["url"], options["as_json"]))
    value = options["value"] if options["value"] is not None else default_client_name()
    sys.exit(
        ElectRunner(
            name=options["name"],
            command=tuple(options["command"]),
            value=value,
            timeout=options["timeout"],
            watchdog_timeout=options["watchdog_timeout"],
            grace=options["grace"],
            url=options["url"],
            as_json=options["as_json"],
        ).main()
    )


def leader_data(name: str, leader: tenure.Leader | None) -> dict[str, Any]:
    """A leader as JSON-ready data (``leader`` None: vacant)."""
    if leader is None:
        return {"name": name, "leader": None}
    lease = leader.remaining_lease
    return {
        "name": name,
        "leader": {
            "value": leader.value,
            "term": leader.term,
            "client_name": leader.client_name,
            "owner": leader.owner,
            "remaining_lease": None if lease is None or math.isinf(lease) else lease,
        },
    }


def leader_line(name: str, leader: tenure.Leader | None) -> str:
    """A leader as one line for people."""
    if leader is None:
        return f"{name}: vacant"
    who = f", client {leader.client_name}" if leader.client_name else ""
    return (
        f"{name}: {leader.value} (term {leader.term}{who}, lease {seconds(leader.remaining_lease)})"
    )


def observe(name: str, url: str, as_json: bool) -> int:
    """Print the leader of ``name``, then every change, until interrupted."""
    with client(url) as c:
        try:
            for leader in c.election(name).observe():
                if as_json:
                    click.echo(_compact(leader_data(name, leader)))
                else:
                    click.echo(leader_line(name, leader))
        except tenure.LockError as error:
            click.echo(f"tenure: error: {one_line(error)}", err=True)
            return EXIT_ERROR
    return 0


def _compact(data: Any) -> str:
    """One JSON object on one line (JSON lines: one per leader change)."""
    return json.dumps(data, allow_nan=False)


class ElectRunner(Runner):
    """One ``tenure elect``: campaign, then hold the leadership or supervise COMMAND."""

    def __init__(self, *, value: str, as_json: bool, **options: Any) -> None:
        super().__init__(lease=None, **options)
        self.value, self.as_json = value, as_json

    def _make(self) -> Any:
        return self.client.election(self.name, on_lost=self._on_lost)

    def _take(self, election: Any) -> Any:
        return election.campaign(self.value, timeout=self.timeout)

    def _env(self, token: Any) -> dict[str, str]:
        return {
            "TENURE_ELECTION_NAME": self.name,
            "TENURE_ELECTION_TERM": str(token),
            "TENURE_ELECTION_VALUE": self.value,
        }

    def _give(self, election: Any, token: Any) -> None:
        election.resign()

    def _on_lost(self, lock: Any, *permit: str) -> None:
        self._lost("the leadership was lost (it is gone from the server)")

    def _holder(self) -> str:
        try:
            leader = self.client.election(self.name).leader()
        except tenure.LockError:
            return ""
        return "" if leader is None else f" (led by {leader.value!r}, term {leader.term})"

    def _main(self) -> int:
        if self.command:
            return super()._main()
        election = self._make()
        try:
            term = self._wait_for(election)
        except tenure.BackendError as error:
            self.say(f"error: {one_line(error)}")
            return EXIT_ERROR
        if term is None:
            self.say(f"not elected within {self.timeout} s{self._holder()}")
            return EXIT_TIMEOUT
        self._announce(election, term)
        stepped_down = threading.Event()

        def step_down(signum: int, frame: FrameType | None) -> None:
            stepped_down.set()
            self.stop.set()

        handlers = {sig: signal.signal(sig, step_down) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not self.stop.wait(1.0):  # interruptible: the handlers run meanwhile
                pass
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        if self.lost_reason is not None:
            self.say(f"{self.name!r}: {self.lost_reason}")
            return EXIT_ERROR
        try:
            election.resign()
        except tenure.LockLostError:
            self.say(f"{self.name!r}: the leadership was lost (found when stepping down)")
            return EXIT_ERROR
        except tenure.LockError as error:
            self.say(f"{self.name!r}: resign failed: {one_line(error)} (it expires with its lease)")
        return 0

    def _announce(self, election: Any, term: int) -> None:
        leader = election.leader()
        if self.as_json:
            click.echo(_compact(leader_data(self.name, leader)))
        else:
            click.echo(leader_line(self.name, leader) if leader else f"{self.name}: term {term}")
        sys.stdout.flush()
