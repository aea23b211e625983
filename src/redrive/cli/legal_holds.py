"""`redrive holds ls|show|place|release`: legal holds, which keep dead letters from being pruned,
purged or deleted until released (placing and releasing need an admin key)."""

from __future__ import annotations

import typer
from rich.table import Table

from redrive.cli.output import fields_table, print_json, say
from redrive.cli.remote import (
    DATABASE,
    EXIT_CODES_HELP,
    EXIT_USAGE,
    JSON,
    TENANT,
    URL,
    Target,
    fail,
    run,
    stdout,
)
from redrive.client import LegalHold

holds = typer.Typer(
    help="Legal holds: on one job's dead letters, an incident's, or every dead letter matching a "
    "filter of exact queue, type and error type (those to come too). Held dead letters are never "
    "pruned, purged or deleted, by anyone, until the hold is released.",
    no_args_is_help=True,
    epilog=EXIT_CODES_HELP,
)
HOLD_ID = typer.Argument(..., metavar="ID", help="a legal hold id (hold_...)")
FILTER_KEYS = ("queue", "type", "error_type")
FILTER = typer.Option(
    None, "--filter", metavar="KEY=VALUE", help="queue, type or error_type (repeatable)"
)


def hold_rows(hold: LegalHold) -> list[tuple[str, object]]:
    released = f"{hold.released_at} by {hold.released_by}" if hold.released_at else "no"
    return [
        ("id", hold.id), ("scope", hold.scope), ("holds", hold.target), ("reason", hold.reason),
        ("placed", f"{hold.created_at} by {hold.created_by}"), ("released", released),
        ("tenant", hold.tenant_id),
    ]  # fmt: skip


def _filter(pairs: list[str]) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for pair in pairs:
        key, sign, value = pair.partition("=")
        if not sign or key not in FILTER_KEYS or not value:
            fail(f"--filter takes KEY=VALUE with KEY one of {', '.join(FILTER_KEYS)}", EXIT_USAGE)
        chosen[key] = value
    return chosen


@holds.command("ls")
def list_holds(
    every: bool = typer.Option(False, "--all", help="released holds too"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """The active legal holds, newest first (--all: released ones too)."""
    found = run(
        Target(url, database, tenant), lambda client: client.legal_holds(include_released=every)
    )
    if as_json:
        print_json({"legal_holds": [hold.raw for hold in found]})
        return
    table = Table(title=f"Legal holds ({len(found)})")
    for column in ("id", "scope", "holds", "reason", "placed", "by", "active"):
        table.add_column(column, overflow="fold")
    for hold in found:
        table.add_row(hold.id, hold.scope, hold.target, hold.reason, hold.created_at or "",
                      hold.created_by or "", "yes" if hold.active else "released")  # fmt: skip
    stdout().print(table)


@holds.command("show")
def show(
    hold_id: str = HOLD_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """One legal hold."""
    hold = run(Target(url, database, tenant), lambda client: client.get_legal_hold(hold_id))
    if as_json:
        print_json(hold.raw)
    else:
        stdout().print(fields_table(f"legal hold {hold.id}", hold_rows(hold)))


@holds.command("place")
def place(
    reason: str = typer.Option(..., "--reason", help="why: a case or matter reference"),
    job_id: str | None = typer.Option(None, "--job", metavar="ID", help="a job's dead letters"),
    incident_id: str | None = typer.Option(
        None, "--incident", metavar="ID", help="an incident's dead letters (inc_...)"
    ),
    pairs: list[str] | None = FILTER,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Place a legal hold on exactly one of --job, --incident or --filter."""
    if sum(item is not None and item != [] for item in (job_id, incident_id, pairs)) != 1:
        fail("give exactly one of --job, --incident and --filter", EXIT_USAGE)
    chosen = _filter(pairs) if pairs else None
    hold = run(
        Target(url, database, tenant),
        lambda client: client.place_legal_hold(
            reason, job_id=job_id, incident_id=incident_id, filter=chosen
        ),
    )
    if as_json:
        print_json(hold.raw)
    else:
        say(f"{hold.id}: holding {hold.scope} {hold.target}")


@holds.command("release")
def release(
    hold_id: str = HOLD_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Release a legal hold: what it kept is pruned, purged or deleted normally again."""
    hold = run(Target(url, database, tenant), lambda client: client.release_legal_hold(hold_id))
    if as_json:
        print_json(hold.raw)
    else:
        say(f"{hold.id}: released by {hold.released_by}")
