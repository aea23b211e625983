"""`redrive queues ls|stats|pause|resume`: the queues jobs wait in."""

from __future__ import annotations

import typer
from rich.table import Table

from redrive.cli.output import print_json, say
from redrive.cli.remote import DATABASE, JSON, TENANT, URL, Target, run, stdout
from redrive.client import Queue

queues = typer.Typer(help="List, inspect, pause and resume queues.", no_args_is_help=True)


@queues.command("ls")
def list_queues(
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Every queue and whether it is paused."""
    found = run(Target(url, database, tenant), lambda client: client.queues())
    if as_json:
        print_json([queue.raw for queue in found])
        return
    table = Table(title="Queues")
    table.add_column("name")
    table.add_column("status")
    for queue in found:
        table.add_row(queue.name, queue.status)
    stdout().print(table)


@queues.command("stats")
def stats(
    name: str = typer.Argument(..., metavar="QUEUE"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """A queue's job counts by state."""
    found = run(Target(url, database, tenant), lambda client: client.queue_stats(name))
    if as_json:
        print_json(found.raw)
        return
    table = Table(title=f"Queue {found.name} ({found.status})")
    table.add_column("state")
    table.add_column("jobs", justify="right")
    for state, count in found.counts.items():
        table.add_row(state, str(count))
    stdout().print(table)


def _changed(queue: Queue, as_json: bool) -> None:
    if as_json:
        print_json(queue.raw)
    else:
        say(f"{queue.name} is {'paused' if queue.paused else 'active'}")


@queues.command("pause")
def pause(
    name: str = typer.Argument(..., metavar="QUEUE"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Pause a queue: workers fetch nothing from it until it is resumed."""
    _changed(run(Target(url, database, tenant), lambda client: client.pause_queue(name)), as_json)


@queues.command("resume")
def resume(
    name: str = typer.Argument(..., metavar="QUEUE"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Resume a paused queue."""
    _changed(run(Target(url, database, tenant), lambda client: client.resume_queue(name)), as_json)
