"""`redrive enqueue` and `redrive jobs show|cancel`: producing jobs and looking them up."""

from __future__ import annotations

import typer

from redrive.cli.output import parse_json, parse_pairs, print_json, say, show_job
from redrive.cli.remote import DATABASE, JSON, TENANT, URL, Target, run
from redrive.client import Client, Job, RetryPolicy

META = typer.Option(None, "--meta", metavar="KEY=VALUE", help="merged into meta, repeatable")
TAGS = typer.Option(None, "--tag", metavar="TAG", help="repeatable")
jobs = typer.Typer(help="Look up and cancel jobs.", no_args_is_help=True)


def enqueue(
    job_type: str = typer.Argument(..., metavar="TYPE", help="job type, e.g. email.send"),
    args_json: str | None = typer.Argument(
        None, metavar="[ARGS_JSON]", help="arguments as a JSON array, e.g. '[\"a@b.c\", 3]'"
    ),
    queue: str | None = typer.Option(None, "--queue", help="queue (default: default)"),
    priority: int | None = typer.Option(None, "--priority", help="-100 to 100, higher first"),
    meta: list[str] | None = META,
    max_attempts: int | None = typer.Option(None, "--max-attempts", help="total runs allowed"),
    on_exhaustion: str | None = typer.Option(
        None, "--on-exhaustion", help="discard or dead_letter when attempts run out"
    ),
    delay: str | None = typer.Option(
        None, "--delay", help="run after this long: seconds or ISO 8601 (PT5M)"
    ),
    at: str | None = typer.Option(None, "--at", help="run at this RFC 3339 time"),
    timeout: float | None = typer.Option(None, "--timeout", help="execution timeout in seconds"),
    tags: list[str] | None = TAGS,
    job_id: str | None = typer.Option(None, "--id", help="your own UUIDv7 id"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Enqueue a job; prints its id (or the whole job with --json)."""
    args = parse_json(args_json, "ARGS_JSON", list)
    retry = None
    if max_attempts is not None or on_exhaustion is not None:
        retry = RetryPolicy(max_attempts=max_attempts, on_exhaustion=on_exhaustion)
    delay_value: str | float | None = delay
    if delay is not None and not delay.upper().startswith(("P", "+P")):
        try:
            delay_value = float(delay)
        except ValueError:
            delay_value = delay

    async def call(client: Client) -> Job:
        return await client.enqueue(
            job_type, args, queue=queue, priority=priority, meta=parse_pairs(meta, "--meta"),
            retry=retry, delay=delay_value, scheduled_at=at, tags=tags, id=job_id,
            timeout_ms=None if timeout is None else round(timeout * 1000),
        )  # fmt: skip

    job = run(Target(url, database, tenant), call)
    if as_json:
        print_json(job.raw)
    else:
        typer.echo(job.id)


@jobs.command("show")
def show(
    job_id: str = typer.Argument(..., metavar="ID"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """A job's state, attempts and errors."""
    job = run(Target(url, database, tenant), lambda client: client.get_job(job_id))
    if as_json:
        print_json(job.raw)
    else:
        show_job(job)


@jobs.command("cancel")
def cancel(
    job_id: str = typer.Argument(..., metavar="ID"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Cancel a job that has not finished (exit 5 when it already has)."""
    job = run(Target(url, database, tenant), lambda client: client.cancel(job_id))
    if as_json:
        print_json(job.raw)
    else:
        say(f"cancelled {job.id} (was {job.raw.get('previous_state', 'unknown')})")
