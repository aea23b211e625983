"""`redrive redrives ls|show|pause|resume|cancel` and `redrive dlq redrive`: paced redrive tasks,
started by filter or incident and followed with a live progress bar."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from redrive.cli.output import fields_table, print_json, say
from redrive.cli.remote import (
    DATABASE,
    EXIT_CODES_HELP,
    JSON,
    TENANT,
    URL,
    Target,
    run,
    stderr,
    stdout,
)
from redrive.client import Client, DeadLetterFilter, RedriveItem, RedriveTask

redrives = typer.Typer(
    help="Paced redrive tasks: a pinned set of dead letters moved back at a rate (100 a minute "
    "by default), followed to the end of the jobs they redrove.",
    no_args_is_help=True,
    epilog=EXIT_CODES_HELP,
)
TASK_ID = typer.Argument(..., metavar="ID", help="a redrive task id (rdt_...)")
POLL_SECONDS = 2.0


def task_rows(task: RedriveTask) -> list[tuple[str, object]]:
    rate = "" if task.success_rate is None else f"{task.success_rate:.0%}"
    failure = task.failure
    stopped = (
        None if failure is None else f"{failure.code} at job {failure.job_id}: {failure.message}"
    )
    return [
        ("id", task.id), ("state", task.state), ("incident", task.incident_id),
        ("rate", f"{task.rate_per_minute}/minute" + (" (critical)" if task.critical else "")),
        ("reason", task.reason), ("queues", ", ".join(task.queues)),
        ("moved", f"{task.moved} of {task.to_move} ({task.skipped} skipped)"),
        ("failed", f"{task.failed} (an upcaster refused them: still dead)"),
        ("succeeded", str(task.succeeded)), ("dead again", str(task.dead_again)),
        ("success rate", rate), ("started", f"{task.created_at} by {task.created_by}"),
        ("finished", task.finished_at), ("stopped by", stopped),
    ]  # fmt: skip


def follow(client: Client, task: RedriveTask) -> Awaitable[RedriveTask]:
    """Poll the task until it ends, with a live progress bar on stderr."""

    async def watch() -> RedriveTask:
        current = task
        columns = (
            TextColumn("redriving"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=stderr(), transient=True) as progress:
            bar = progress.add_task(task.id, total=current.to_move, completed=current.moved)
            while not current.finished:
                await asyncio.sleep(POLL_SECONDS)
                current = await client.get_redrive(task.id)
                progress.update(bar, completed=current.moved + current.skipped)
        return current

    return watch()


def report(task: RedriveTask, as_json: bool) -> None:
    if as_json:
        print_json(task.raw)
        return
    stdout().print(fields_table(f"redrive task {task.id}", task_rows(task)))


def start(
    target: Target,
    filters: DeadLetterFilter,
    options: tuple[int | None, bool, str | None, int | None],
    detach: bool,
    as_json: bool,
) -> None:
    """Start a task and, unless detached (or on --database, where no server advances it),
    follow it to its end."""
    rate, critical, reason, limit = options

    async def operate(client: Client) -> RedriveTask:
        task = await client.start_redrive(
            filters, rate_per_minute=rate, critical=critical, reason=reason, limit=limit
        )
        if detach or target.database is not None:
            return task
        return await follow(client, task)

    task = run(target, operate)
    if target.database is not None and not detach and not as_json:
        say(f"started {task.id}: the server's maintenance loop moves it; follow it with "
            f"`redrive redrives show {task.id}`")  # fmt: skip
    report(task, as_json)


@redrives.command("ls")
def list_redrives(
    state: str | None = typer.Option(
        None, "--state", help="running, paused, completed, cancelled or failed"
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=200, help="tasks to list"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Redrive tasks, the newest first."""
    found = run(
        Target(url, database, tenant), lambda client: client.redrives(state=state, limit=limit)
    )
    if as_json:
        print_json({"tasks": [task.raw for task in found]})
        return
    table = Table(title=f"Redrive tasks ({len(found)})")
    columns = ("id", "state", "moved", "of", "failed", "succeeded", "dead again", "rate", "queues")
    for column in columns:
        table.add_column(column, overflow="fold")
    for task in found:
        table.add_row(
            task.id, task.state, str(task.moved), str(task.to_move), str(task.failed),
            str(task.succeeded),
            str(task.dead_again), str(task.rate_per_minute), ", ".join(task.queues),
        )  # fmt: skip
    stdout().print(table)


@redrives.command("show")
def show(
    task_id: str = TASK_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """One redrive task: its progress, how its redriven jobs ended, why it failed (if it did),
    and the dead letters an upcaster refused, with the errors."""

    async def read(client: Client) -> tuple[RedriveTask, list[RedriveItem]]:
        task = await client.get_redrive(task_id)
        failed = await client.redrive_items(task_id, state="failed") if task.failed else []
        return task, failed

    task, failed = run(Target(url, database, tenant), read)
    if as_json:
        print_json({**task.raw, "failed_items": [item.raw for item in failed]})
        return
    report(task, as_json)
    if failed:
        table = Table(title=f"Failed ({task.failed}): still dead, each with its upcaster's error")
        for column in ("job", "queue", "code", "message"):
            table.add_column(column, overflow="fold")
        for item in failed:
            error = item.error
            code, message = ("", "") if error is None else (error.code, error.message)
            table.add_row(item.job_id, item.queue, code, message)
        stdout().print(table)


def _changed(
    target: Target, change: Callable[[Client], Awaitable[RedriveTask]], json: bool
) -> None:
    task = run(target, change)
    if json:
        print_json(task.raw)
        return
    say(f"{task.id}: {task.state} ({task.moved} of {task.to_move} moved)")


@redrives.command("pause")
def pause(
    task_id: str = TASK_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Pause a running task: nothing more moves until it resumes."""
    _changed(Target(url, database, tenant), lambda c: c.pause_redrive(task_id), as_json)


@redrives.command("resume")
def resume(
    task_id: str = TASK_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Resume a paused task at its rate (no catching up for the pause)."""
    _changed(Target(url, database, tenant), lambda c: c.resume_redrive(task_id), as_json)


@redrives.command("cancel")
def cancel(
    task_id: str = TASK_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Cancel a task: what it moved stays moved; the rest stays dead and unpinned."""
    _changed(Target(url, database, tenant), lambda c: c.cancel_redrive(task_id), as_json)
