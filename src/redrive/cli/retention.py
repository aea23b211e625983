"""`redrive dlq policy|prune|archive`: retention policies, pruning now, and prune archives."""

from __future__ import annotations

import typer
from rich.table import Table

from redrive.cli.output import print_json, say
from redrive.cli.remote import (
    DATABASE,
    EXIT_USAGE,
    JSON,
    TENANT,
    URL,
    Target,
    confirm,
    fail,
    run,
    stdout,
)
from redrive.client import Client, RetentionPolicy

policy = typer.Typer(
    help="Retention policies: the global one and per-queue overrides.", no_args_is_help=True
)
archive = typer.Typer(
    help="Archives written when pruning with pruning_policy=archive.", no_args_is_help=True
)


def _policy_table(rows: list[RetentionPolicy], next_prune_at: str | None) -> Table:
    table = Table(title=f"Dead-letter retention (next prune {next_prune_at or 'unknown'})")
    for column in ("scope", "queue", "max_age", "max_count", "pruning_policy", "min_age"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.scope, row.queue or "(all others)", row.max_age or "",
                      str(row.max_count), row.pruning_policy or "", row.min_age or "")  # fmt: skip
    return table


@policy.command("show")
def policy_show(
    queue: str | None = typer.Option(None, "--queue", help="the policy that applies to this queue"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Show the retention policies (or the one that applies to --queue)."""
    target = Target(url, database, tenant)
    if queue is not None:
        found = run(target, lambda client: client.retention_policy(queue))
        if as_json:
            print_json({"policy": found.raw})
        else:
            stdout().print(_policy_table([found], None))
        return
    policies = run(target, lambda client: client.retention_policies())
    if as_json:
        print_json(policies.raw)
    else:
        rows = [policies.global_policy, *policies.queues]
        stdout().print(_policy_table(rows, policies.next_prune_at))


@policy.command("set")
def policy_set(
    queue: str | None = typer.Option(
        None, "--queue", help="override for one queue (default: global)"
    ),
    max_age: str | None = typer.Option(None, "--max-age", help="ISO 8601 duration, e.g. P30D"),
    max_count: int | None = typer.Option(None, "--max-count", help="most dead letters kept"),
    pruning_policy: str | None = typer.Option(None, "--pruning-policy", help="delete or archive"),
    min_age: str | None = typer.Option(
        None, "--min-age", help="the floor: never delete younger (ISO 8601, P0D: none)"
    ),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Change the global policy or a queue's override; options not given keep their values."""
    if max_age is None and max_count is None and pruning_policy is None and min_age is None:
        fail("give at least one of --max-age, --max-count, --pruning-policy, --min-age", EXIT_USAGE)

    async def call(client: Client) -> RetentionPolicy:
        return await client.set_retention_policy(
            queue, max_age=max_age, max_count=max_count, pruning_policy=pruning_policy,
            min_age=min_age,
        )  # fmt: skip

    changed = run(Target(url, database, tenant), call)
    if as_json:
        print_json({"policy": changed.raw})
    else:
        stdout().print(_policy_table([changed], None))


@policy.command("unset")
def policy_unset(
    queue: str = typer.Option(..., "--queue", help="the queue whose override to remove"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Remove a queue's override; the global policy applies to it again."""
    run(Target(url, database, tenant), lambda client: client.unset_retention_policy(queue))
    if as_json:
        print_json({"deleted": True, "queue": queue})
    else:
        say(f"removed the override of {queue}; the global policy applies")


def prune(
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Prune now by the retention policies (the server also does this on its own schedule)."""
    if not yes:
        confirm("Prune dead letters beyond their retention now?")
    report = run(Target(url, database, tenant), lambda client: client.prune())
    if as_json:
        print_json(report.raw)
    else:
        say(f"deleted {report.deleted}, archived {report.archived}")
        for scope, count in sorted(report.floor_holding.items()):
            where = "the global policy" if scope == "*" else f"queue {scope}"
            say(f"kept {count} over the max_count of {where}: younger than the floor or held")


@archive.command("ls")
def archive_ls(
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """List archive files."""
    found = run(Target(url, database, tenant), lambda client: client.archives())
    if as_json:
        print_json({"archives": [item.raw for item in found]})
        return
    table = Table(title="Dead-letter archives")
    for column in ("name", "entries", "created_at", "restored_at"):
        table.add_column(column)
    for item in found:
        table.add_row(item.name, str(item.entries), item.created_at or "", item.restored_at or "")
    stdout().print(table)


@archive.command("restore")
def archive_restore(
    name: str,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Put an archive's entries back in the dead-letter queue."""
    payload = run(Target(url, database, tenant), lambda client: client.restore_archive(name))
    if as_json:
        print_json(payload)
    else:
        say(f"restored {payload['restored']} of {payload['entries']} "
                  f"({payload['skipped']} already dead again)")  # fmt: skip
