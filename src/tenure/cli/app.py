"""The ``tenure`` command group and ``tenure demo``; the operator commands live in the
sibling modules and are added to the group at the end of this file."""

from __future__ import annotations

import sys
from contextlib import nullcontext

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from tenure import demo as demo_module
from tenure.cli.common import Group
from tenure.embedded import embedded_servers


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
def demo(
    urls: tuple[str, ...],
    kind: str,
    processes: int,
    threads: int,
    rounds: int,
    use_asyncio: bool,
    cluster: bool,
) -> None:
    """P processes x T threads each run K critical sections on one lock.

    Every section does a non-atomic GET, +1, SET of a counter. The report shows lost updates
    and overlapping sections (both must be 0; exit status 1 otherwise), throughput, handoff
    latency and how the acquisitions spread over the workers.

    \b
    Example:
      tenure demo --kind fair -p 4 -t 2 -k 200
    """
    if cluster:
        if kind != "lock" or use_asyncio or len(urls) > 1:
            raise click.UsageError("--cluster runs --kind lock with threads on one --url")
        if not demo_module.cluster_main(urls[0] if urls else None, processes, threads, rounds):
            sys.exit(1)
        return
    if kind != "red" and len(urls) > 1:
        raise click.UsageError(f"--kind {kind} runs on one server: give --url at most once")
    console = Console()
    servers = embedded_servers(demo_module.servers_needed(kind)) if not urls else nullcontext(urls)
    with servers as targets:
        where = ", ".join(targets)
        if not urls:
            where = f"embedded Valkey at {where}"
        console.print(
            f"[bold]tenure demo[/]: {kind}, {processes} processes x {threads} "
            f"{'tasks' if use_asyncio else 'threads'} x {rounds} rounds on {where}"
        )
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as bar:
            task = bar.add_task("critical sections", total=processes * threads * rounds)
            report = demo_module.run(
                targets,
                kind=kind,
                processes=processes,
                threads=threads,
                rounds=rounds,
                use_asyncio=use_asyncio,
                progress=lambda done, total: bar.update(task, completed=done),
            )
    console.print(render(report))
    if not report.ok:
        console.print("[bold red]FAILED[/]: mutual exclusion was violated")
        sys.exit(1)
    console.print("[bold green]OK[/]: no lost update, no overlap")


def render(report: demo_module.Report) -> Table:
    """The report as a table."""
    table = Table(title="tenure demo", show_header=True)
    table.add_column("measure")
    table.add_column("value", justify="right")
    p50 = demo_module.percentile(report.handoff_ms, 50)
    p99 = demo_module.percentile(report.handoff_ms, 99)
    counts = sorted(report.per_worker.values())
    rows = [
        ("acquisitions", f"{report.sections} / {report.expected}"),
        ("throughput", f"{report.sections / report.seconds:,.0f} /s" if report.seconds else "-"),
        ("lost updates", _flag(report.lost_updates)),
        ("overlapping critical sections", _flag(report.overlaps)),
        *(
            [("stale writes refused", _flag(report.stale_writes))]
            if report.stale_writes is not None
            else []
        ),
        ("handoff latency p50", f"{p50:.3f} ms"),
        ("handoff latency p99", f"{p99:.3f} ms"),
        (
            "acquisitions per worker",
            f"min {counts[0]}, max {counts[-1]} over {len(counts)} workers" if counts else "-",
        ),
    ]
    if report.reader_overlaps is not None:  # rw: readers share, writers exclude
        rows[3] = ("sections overlapping a write", _flag(report.overlaps))
        rows.insert(4, ("read sections sharing the lock", f"{report.reader_overlaps}"))
    for measure, value in demo_module.relabel(report, rows):
        table.add_row(measure, value)
    return table


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
