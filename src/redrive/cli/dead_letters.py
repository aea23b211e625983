"""`redrive dlq ...`: list, inspect, retry, delete, purge and count dead letters; the retention
and replay-rule groups are attached from their own modules."""

from __future__ import annotations

import dataclasses
from typing import Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from redrive.cli import redrives, retention, rules
from redrive.cli.output import (
    counts_table,
    dead_letter_table,
    parse_json,
    parse_pairs,
    print_json,
    say,
    show_dead_letter,
    upcast_lines,
)
from redrive.cli.remote import (
    DATABASE,
    EXIT_CODES_HELP,
    EXIT_USAGE,
    JSON,
    TENANT,
    URL,
    Target,
    confirm,
    fail,
    run,
    stderr,
    stdout,
)
from redrive.client import (
    BulkResult,
    Client,
    DeadLetter,
    DeadLetterFilter,
    Job,
    Page,
    UpcastPreview,
)
from redrive.client.requests import timestamp

dead_letter_commands = typer.Typer(
    help="Inspect and manage the dead-letter queue.", no_args_is_help=True, epilog=EXIT_CODES_HELP
)
dead_letter_commands.add_typer(retention.policy, name="policy")
dead_letter_commands.add_typer(retention.archive, name="archive")
dead_letter_commands.add_typer(rules.rules, name="rules")

QUEUE = typer.Option(None, "--queue", help="only this queue")
TYPE = typer.Option(None, "--type", help="only this job type (ending in * for a prefix)")
ERROR_TYPE = typer.Option(None, "--error-type", help="only this error type")
SINCE = typer.Option(None, "--since", help="died at or after (RFC 3339, or -PT1H for an hour ago)")
UNTIL = typer.Option(None, "--until", help="died before (RFC 3339, or -P1D)")
ARGS_CONTAINS = typer.Option(None, "--args-contains", help="args contain this text")
ARGS_MATCH = typer.Option(None, "--args-match", help="e.g. '$.customer_id == \"c_1\"'")
INCIDENT = typer.Option(None, "--incident", help="only this incident's (inc_...)")
FINGERPRINT = typer.Option(None, "--fingerprint", help="only this error fingerprint")
YES = typer.Option(False, "--yes", "-y", help="do not ask for confirmation")
DRY_RUN = typer.Option(False, "--dry-run", help="only count and show a sample; change nothing")
META = typer.Option(
    None, "--meta", metavar="KEY=VALUE", help="with ID: merged into meta, repeatable"
)
FILTER = typer.Option(
    None,
    "--filter",
    metavar="KEY=VALUE",
    help="repeatable, the same keys as the flags: queue, type, error_type, since, until, "
    "args_contains, args_match, incident, fingerprint (e.g. --filter error_type=SmtpError)",
)
FILTER_KEYS = (
    "queue", "type", "error_type", "since", "until", "args_contains", "args_match", "incident",
    "fingerprint",
)  # fmt: skip
SAMPLE_SHOWN = 10
BULK_REQUEST = 10_000  # dead letters per bulk request: a step of the progress bar


def _filter(
    queue: str | None, job_type: str | None, error_type: str | None, since: str | None,
    until: str | None, args_contains: str | None, args_match: str | None,
    incident: str | None, fingerprint: str | None, status: str | None = None,
) -> DeadLetterFilter:  # fmt: skip
    return DeadLetterFilter(
        queue=queue, type=job_type, error_type=error_type, since=since, until=until,
        args_contains=args_contains, args_match=args_match, incident=incident,
        fingerprint=fingerprint, status=status,
    )  # fmt: skip


def _with_pairs(filters: DeadLetterFilter, pairs: list[str] | None) -> DeadLetterFilter:
    """The filter flags plus `--filter KEY=VALUE` pairs (a key given both ways must agree)."""
    values: dict[str, str] = {}
    for key, value in (parse_pairs(pairs, "--filter") or {}).items():
        name = key.strip().replace("-", "_")
        if name not in FILTER_KEYS:
            fail(
                f"--filter {key}=...: unknown key; use one of {', '.join(FILTER_KEYS)}", EXIT_USAGE
            )
        flag = getattr(filters, name)
        if flag is not None and flag != value:
            fail(
                f"--filter {key}={value} disagrees with --{name.replace('_', '-')} {flag}",
                EXIT_USAGE,
            )
        values[name] = value
    return dataclasses.replace(filters, **values)


def _describe(filters: DeadLetterFilter) -> str:
    params = filters.to_params()
    return " ".join(f"{k}={v}" for k, v in params.items()) if params else "(no filter: all)"


async def _every_page(client: Client, filters: DeadLetterFilter, limit: int) -> list[DeadLetter]:
    first = await client.dead_letters(filters, limit=limit)
    found = list(first.items)
    columns = (TextColumn("fetching dead letters"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=stderr(), transient=True) as progress:
        task = progress.add_task("pages", total=first.total, completed=len(found))
        cursor = first.next_cursor if first.has_more else None
        while cursor:
            page = await client.dead_letters(filters, limit=limit, cursor=cursor)
            found.extend(page.items)
            progress.update(task, completed=len(found))
            cursor = page.next_cursor if page.has_more else None
    return found


@dead_letter_commands.command("ls")
def list_dead_letters(
    queue: str | None = QUEUE,
    job_type: str | None = TYPE,
    error_type: str | None = ERROR_TYPE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    args_contains: str | None = ARGS_CONTAINS,
    args_match: str | None = ARGS_MATCH,
    incident: str | None = INCIDENT,
    fingerprint: str | None = FINGERPRINT,
    status: str | None = typer.Option(
        None, "--status", help="dead (default), retried, replayed, deleted, pruned, archived"
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="page size"),
    cursor: str | None = typer.Option(None, "--cursor", help="continue from a previous page"),
    every: bool = typer.Option(False, "--all", help="follow cursors and list every match"),
    pairs: list[str] | None = FILTER,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """List dead letters, newest first (--json prints a JSON array)."""
    filters = _filter(
        queue, job_type, error_type, since, until, args_contains, args_match, incident,
        fingerprint, status,
    )  # fmt: skip
    filters = _with_pairs(filters, pairs)
    target = Target(url, database, tenant)
    if every:
        items = run(target, lambda client: _every_page(client, filters, limit))
        page: Page[DeadLetter] | None = None
    else:
        page = run(target, lambda client: client.dead_letters(filters, limit=limit, cursor=cursor))
        items = page.items
    if as_json:
        print_json([item.raw for item in items])
    else:
        total = len(items) if page is None else page.total
        stdout().print(dead_letter_table(items, f"Dead letters ({len(items)} of {total})"))
    if page is not None and page.has_more and page.next_cursor:
        stderr().print(f"more: add --cursor {page.next_cursor} (or --all)", highlight=False)


@dead_letter_commands.command("show")
def show(
    job_id: str = typer.Argument(..., metavar="ID"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """A dead letter: its envelope, every failed attempt with backtraces, and its episodes."""
    dead = run(Target(url, database, tenant), lambda client: client.get_dead_letter(job_id))
    if as_json:
        print_json(dead.raw)
    else:
        show_dead_letter(dead)


def _print_bulk(result: BulkResult, verb: str, as_json: bool, confirmed: int) -> None:
    if as_json:
        print_json(result.raw)
        return
    if result.dry_run:
        say(f"would {verb} {result.matched} dead letter(s)")
        for job_id in result.sample[:SAMPLE_SHOWN]:
            say(f"  {job_id}")
        if result.matched > len(result.sample[:SAMPLE_SHOWN]):
            say(f"  … and {result.matched - len(result.sample[:SAMPLE_SHOWN])} more")
        for upcast in result.upcasts:
            for line in upcast_lines(upcast):
                say(line)
        for error in result.errors:
            say(f"would not move: {error.get('job_id')}: {error.get('message')}")
        return
    say(f"{verb}: {result.succeeded} of {confirmed}")
    if result.succeeded < confirmed:
        say(f"  {confirmed - result.succeeded} left the dead-letter queue otherwise meanwhile")


async def pin(client: Client, filters: DeadLetterFilter) -> DeadLetterFilter:
    """The same filter frozen at this moment: a relative --since becomes absolute and --until
    becomes the newest match, so what is counted and confirmed is exactly what is acted on
    (dead letters arriving after the count are left alone)."""
    since = None if filters.since is None else timestamp(filters.since, "since")
    newest = await client.dead_letters(filters, limit=1)
    until = newest.items[0].discarded_at if newest.items else filters.until
    return dataclasses.replace(filters, since=since, until=until)


def bulk(
    target: Target, filters: DeadLetterFilter, action: str, flags: tuple[bool, bool, bool]
) -> None:
    """Count first (dry run), then ask with the exact count unless --yes, then do it to that
    set only (the filter is pinned at the count)."""
    dry_run, yes, as_json = flags
    verb = "retry" if action == "retry" else "purge"

    async def preview(client: Client) -> tuple[DeadLetterFilter, BulkResult]:
        pinned = await pin(client, filters)
        if action == "retry":
            return pinned, await client.retry_dead_letters(pinned, dry_run=True)
        return pinned, await client.purge_dead_letters(pinned, dry_run=True)

    pinned, counted = run(target, preview)
    if dry_run:
        _print_bulk(counted, verb, as_json, counted.matched)
        return
    if counted.matched == 0:
        if as_json:
            print_json({**counted.raw, "dry_run": False})
        else:
            say(f"no dead letters match {_describe(filters)}; nothing to {verb}")
        return
    if not yes:
        confirm(
            f"{verb.capitalize()} {counted.matched} dead letter(s) matching {_describe(filters)}?"
        )

    done = "retried" if action == "retry" else "purged"

    async def execute(client: Client) -> BulkResult:
        """In requests of BULK_REQUEST each, so the bar moves and an interrupted run has done
        whole requests (each job either back in its queue or still dead)."""
        call = client.retry_dead_letters if action == "retry" else client.purge_dead_letters
        moved, queues = 0, set()
        columns = (TextColumn(done), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=stderr(), transient=True) as progress:
            task = progress.add_task(verb, total=counted.matched)
            while moved < counted.matched:
                step = await call(pinned, limit=min(BULK_REQUEST, counted.matched - moved))
                if step.task_id is not None:
                    return step  # larger than a burst: the server paces it as a task
                if step.succeeded == 0:
                    break
                moved += step.succeeded
                queues.update(step.queues)
                progress.update(task, completed=moved)
        document = {
            "action": action, "matched": moved, "succeeded": moved, "failed": 0, "errors": [],
            "queues": sorted(queues), "dry_run": False, done: moved,
        }  # fmt: skip
        return BulkResult.from_document(document)

    result = run(target, execute)
    if result.task_id is not None and not as_json:
        task_id = result.task_id
        say(f"more than a minute's worth: the server redrives them as paced task {task_id}; "
            f"follow it with `redrive redrives show {task_id}`")  # fmt: skip
        return
    _print_bulk(result, done, as_json, counted.matched)


@dead_letter_commands.command("redrive")
def redrive(
    queue: str | None = QUEUE,
    job_type: str | None = TYPE,
    error_type: str | None = ERROR_TYPE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    args_contains: str | None = ARGS_CONTAINS,
    args_match: str | None = ARGS_MATCH,
    incident: str | None = INCIDENT,
    fingerprint: str | None = FINGERPRINT,
    pairs: list[str] | None = FILTER,
    rate: int | None = typer.Option(
        None, "--rate", min=1, help="dead letters a minute (100 by default; above it --critical)"
    ),
    critical: bool = typer.Option(False, "--critical", help="a rate above 100 (admins only)"),
    reason: str | None = typer.Option(None, "--reason", help="why (needed with --critical)"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="at most this many, newest"),
    detach: bool = typer.Option(False, "--detach", help="start it and return; do not follow"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Redrive the dead letters matching the filter as a paced task, with a live progress bar."""
    filters = _with_pairs(
        _filter(queue, job_type, error_type, since, until, args_contains, args_match, incident,
                fingerprint),
        pairs,
    )  # fmt: skip
    target = Target(url, database, tenant)
    redrives.start(target, filters, (rate, critical, reason, limit), detach, as_json)


@dead_letter_commands.command("retry")
def retry(
    job_id: str | None = typer.Argument(None, metavar="[ID]", help="one dead letter; else bulk"),
    queue: str | None = typer.Option(
        None, "--queue", help="with ID: move it to this queue; without: filter by queue"
    ),
    priority: int | None = typer.Option(None, "--priority", help="with ID: new priority"),
    meta: list[str] | None = META,
    args_json: str | None = typer.Option(None, "--args", help="with ID: replacement args (JSON)"),
    reason: str | None = typer.Option(None, "--reason", help="with ID: why (in the audit log)"),
    force: bool = typer.Option(
        False, "--force", help="with ID and --reason: an admin overrides a poison pill's refusal"
    ),
    job_type: str | None = TYPE,
    error_type: str | None = ERROR_TYPE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    args_contains: str | None = ARGS_CONTAINS,
    args_match: str | None = ARGS_MATCH,
    incident: str | None = INCIDENT,
    fingerprint: str | None = FINGERPRINT,
    pairs: list[str] | None = FILTER,
    dry_run: bool = DRY_RUN,
    yes: bool = YES,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Retry one dead letter (optionally changed), or every one matching the filter flags."""
    target = Target(url, database, tenant)
    filter_flags = (
        job_type, error_type, since, until, args_contains, args_match, incident, fingerprint,
    )  # fmt: skip
    if job_id is None:
        if priority is not None or meta or args_json is not None or reason or force:
            fail("--priority, --meta, --args, --reason and --force are for one dead letter: "
                 "give its ID", EXIT_USAGE)  # fmt: skip
        filters = _with_pairs(_filter(queue, *filter_flags), pairs)
        bulk(target, filters, "retry", (dry_run, yes, as_json))
        return
    if any(value is not None for value in filter_flags) or pairs:
        fail("filter flags are for bulk retry: leave out the ID", EXIT_USAGE)
    args = parse_json(args_json, "--args", list)
    changes = parse_pairs(meta, "--meta")
    if dry_run:

        async def preview(client: Client) -> tuple[Job, UpcastPreview]:
            return await client.preview_dead_letter_retry(
                job_id, queue=queue, priority=priority, meta=changes, args=args
            )

        job, upcast = run(target, preview)
        if as_json:
            print_json({"dry_run": True, "job": job.raw, "upcast": dataclasses.asdict(upcast)})
        else:
            say(f"would retry {job.id} on queue {job.queue}")
            for line in upcast_lines(upcast):
                say(line)
        return

    async def call(client: Client) -> Job:
        return await client.retry_dead_letter(
            job_id, queue=queue, priority=priority, meta=changes, args=args, reason=reason,
            force=force,
        )  # fmt: skip

    job = run(target, call)
    if as_json:
        print_json(job.raw)
    else:
        say(f"retried {job.id}: {job.state} on queue {job.queue}")


@dead_letter_commands.command("purge")
def purge(
    queue: str | None = QUEUE,
    job_type: str | None = TYPE,
    error_type: str | None = ERROR_TYPE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    args_contains: str | None = ARGS_CONTAINS,
    args_match: str | None = ARGS_MATCH,
    incident: str | None = INCIDENT,
    fingerprint: str | None = FINGERPRINT,
    pairs: list[str] | None = FILTER,
    dry_run: bool = DRY_RUN,
    yes: bool = YES,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Delete every dead letter matching the filter flags (all of them without any)."""
    filters = _filter(
        queue, job_type, error_type, since, until, args_contains, args_match, incident,
        fingerprint,
    )  # fmt: skip
    filters = _with_pairs(filters, pairs)
    bulk(Target(url, database, tenant), filters, "purge", (dry_run, yes, as_json))


@dead_letter_commands.command("rm")
def remove(
    job_id: str = typer.Argument(..., metavar="ID"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Delete one dead letter (its history stays, with status deleted)."""
    run(Target(url, database, tenant), lambda client: client.delete_dead_letter(job_id))
    if as_json:
        print_json({"deleted": True, "job_id": job_id})
    else:
        say(f"deleted {job_id}")


@dead_letter_commands.command("stats")
def stats(
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """How many dead letters there are, by queue, type and error type."""
    found = run(Target(url, database, tenant), lambda client: client.dead_letter_stats())
    if as_json:
        print_json(found.raw)
        return
    span = f"oldest {found.oldest_at or '-'}, newest {found.newest_at or '-'}"
    say(f"{found.total} dead letter(s); {span}")
    breakdown: dict[str, Any] = {
        "by queue": found.by_queue, "by type": found.by_type, "by error type": found.by_error_type,
    }  # fmt: skip
    for title, counts in breakdown.items():
        if counts:
            stdout().print(counts_table(title, counts))


dead_letter_commands.command("prune")(retention.prune)
