"""`redrive dlq rules ls|add|rm|enable|disable`: automatic replay rules."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from redrive.cli.output import print_json, say
from redrive.cli.remote import DATABASE, EXIT_USAGE, JSON, TENANT, URL, Target, fail, run, stdout
from redrive.client import Client, DeadLetterFilter, ReplayRule

rules = typer.Typer(
    help="Automatic replay rules: retry matching dead letters after a delay.",
    no_args_is_help=True,
)


def _table(found: list[ReplayRule]) -> Table:
    table = Table(title="Replay rules")
    for column in ("name", "enabled", "filter", "delay", "max_replays", "replayed", "id"):
        table.add_column(column, overflow="fold")
    for rule in found:
        enabled = "yes" if rule.enabled else "no"
        table.add_row(rule.name, enabled, json.dumps(rule.filter), rule.delay,
                      str(rule.max_replays), str(rule.replayed_total), rule.id)  # fmt: skip
    return table


def _print(rule: ReplayRule, verb: str, as_json: bool) -> None:
    if as_json:
        print_json({"rule": rule.raw})
    else:
        say(f"{verb} rule {rule.name} ({rule.id})")


@rules.command("ls")
def list_rules(
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """List the replay rules."""
    found = run(Target(url, database, tenant), lambda client: client.replay_rules())
    if as_json:
        print_json({"rules": [rule.raw for rule in found]})
    else:
        stdout().print(_table(found))


@rules.command("add")
def add(
    name: str = typer.Argument(..., help="a unique name: letters, digits, . _ : -"),
    queue: str | None = typer.Option(None, "--queue", help="match this queue"),
    job_type: str | None = typer.Option(None, "--type", help="match this type (* for a prefix)"),
    error_type: str | None = typer.Option(None, "--error-type", help="match this error type"),
    args_contains: str | None = typer.Option(None, "--args-contains", help="args contain text"),
    args_match: str | None = typer.Option(None, "--args-match", help='$.key == "value"'),
    delay: str | None = typer.Option(None, "--delay", help="wait this long first (e.g. PT5M)"),
    max_replays: int | None = typer.Option(None, "--max-replays", help="per job (default 3)"),
    disabled: bool = typer.Option(False, "--disabled", help="create it switched off"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Create a rule that replays matching dead letters automatically."""
    filters = DeadLetterFilter(queue=queue, type=job_type, error_type=error_type,
                               args_contains=args_contains, args_match=args_match)  # fmt: skip
    if filters.is_empty:
        fail("a rule needs a filter: give --queue, --type, --error-type or --args-*", EXIT_USAGE)

    async def call(client: Client) -> ReplayRule:
        return await client.add_replay_rule(
            name, filters, delay=delay, max_replays=max_replays, enabled=not disabled
        )

    _print(run(Target(url, database, tenant), call), "created", as_json)


@rules.command("rm")
def remove(
    rule: str = typer.Argument(..., metavar="RULE", help="rule id or name"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Delete a rule."""
    found = run(Target(url, database, tenant), lambda client: client.delete_replay_rule(rule))
    _print(found, "deleted", as_json)


@rules.command("enable")
def enable(
    rule: str = typer.Argument(..., metavar="RULE", help="rule id or name"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Switch a rule on."""
    found = run(Target(url, database, tenant), lambda client: client.enable_replay_rule(rule))
    _print(found, "enabled", as_json)


@rules.command("disable")
def disable(
    rule: str = typer.Argument(..., metavar="RULE", help="rule id or name"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Switch a rule off (it is kept)."""
    found = run(Target(url, database, tenant), lambda client: client.disable_replay_rule(rule))
    _print(found, "disabled", as_json)
