"""`redrive dlq ...`: retention policies, pruning and archives of the dead-letter queue."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from redrive.cli.remote import DEFAULT_URL, print_json, request

dlq = typer.Typer(help="Inspect and manage the dead-letter queue.", no_args_is_help=True)
policy = typer.Typer(
    help="Retention policies: the global one and per-queue overrides.", no_args_is_help=True
)
archive = typer.Typer(
    help="Archives written when pruning with pruning_policy=archive.", no_args_is_help=True
)
dlq.add_typer(policy, name="policy")
dlq.add_typer(archive, name="archive")
out = Console()

URL = typer.Option(DEFAULT_URL, "--url", envvar="REDRIVE_URL", help="server URL")
JSON = typer.Option(False, "--json", help="print JSON for scripts")
BASE = "/ojs/v1/dead-letter"


def _policy_table(rows: list[dict[str, Any]], next_prune_at: str | None) -> Table:
    table = Table(title=f"Dead-letter retention (next prune {next_prune_at or 'unknown'})")
    for column in ("scope", "queue", "max_age", "max_count", "pruning_policy"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["scope"], row["queue"] or "(all others)", row["max_age"],
                      str(row["max_count"]), row["pruning_policy"])  # fmt: skip
    return table


@policy.command("show")
def policy_show(
    queue: str | None = typer.Option(None, "--queue", help="the policy that applies to this queue"),
    url: str = URL,
    as_json: bool = JSON,
) -> None:
    """Show the retention policies (or the one that applies to --queue)."""
    if queue is not None:
        found = request(url, "GET", f"{BASE}/retention/{queue}")
        rows, next_prune = [found["policy"]], None
        payload: Any = found
    else:
        payload = request(url, "GET", f"{BASE}/retention")
        rows, next_prune = [payload["global"], *payload["queues"]], payload["next_prune_at"]
    if as_json:
        print_json(payload)
    else:
        out.print(_policy_table(rows, next_prune))


@policy.command("set")
def policy_set(
    queue: str | None = typer.Option(
        None, "--queue", help="override for one queue (default: global)"
    ),
    max_age: str | None = typer.Option(None, "--max-age", help="ISO 8601 duration, e.g. P30D"),
    max_count: int | None = typer.Option(None, "--max-count", help="most dead letters kept"),
    pruning_policy: str | None = typer.Option(None, "--pruning-policy", help="delete or archive"),
    url: str = URL,
    as_json: bool = JSON,
) -> None:
    """Change the global policy or a queue's override; options not given keep their values."""
    body = {key: value for key, value in
            {"max_age": max_age, "max_count": max_count, "pruning_policy": pruning_policy}.items()
            if value is not None}  # fmt: skip
    if not body:
        raise typer.BadParameter("give at least one of --max-age, --max-count, --pruning-policy")
    path = f"{BASE}/retention/{queue}" if queue else f"{BASE}/retention"
    payload = request(url, "PUT", path, body)
    if as_json:
        print_json(payload)
    else:
        out.print(_policy_table([payload["policy"]], None))


@policy.command("unset")
def policy_unset(
    queue: str = typer.Option(..., "--queue", help="the queue whose override to remove"),
    url: str = URL,
) -> None:
    """Remove a queue's override; the global policy applies to it again."""
    request(url, "DELETE", f"{BASE}/retention/{queue}")
    out.print(f"removed the override of {queue}; the global policy applies")


@dlq.command("prune")
def prune(
    yes: bool = typer.Option(False, "--yes", help="do not ask for confirmation"),
    url: str = URL,
    as_json: bool = JSON,
) -> None:
    """Prune now by the retention policies (the server also does this on its own schedule)."""
    if not yes:
        typer.confirm("Prune dead letters beyond their retention now?", abort=True)
    payload = request(url, "POST", f"{BASE}/prune", {"confirm": True})
    if as_json:
        print_json(payload)
    else:
        out.print(f"deleted {payload['deleted']}, archived {payload['archived']}")


@archive.command("ls")
def archive_ls(url: str = URL, as_json: bool = JSON) -> None:
    """List archive files."""
    payload = request(url, "GET", f"{BASE}/archives")
    if as_json:
        print_json(payload)
        return
    table = Table(title="Dead-letter archives")
    for column in ("name", "entries", "created_at", "restored_at"):
        table.add_column(column)
    for item in payload["archives"]:
        table.add_row(
            item["name"], str(item["entries"]), item["created_at"], item["restored_at"] or ""
        )
    out.print(table)


@archive.command("restore")
def archive_restore(name: str, url: str = URL, as_json: bool = JSON) -> None:
    """Put an archive's entries back in the dead-letter queue."""
    payload = request(url, "POST", f"{BASE}/archives/{name}/restore")
    if as_json:
        print_json(payload)
    else:
        out.print(f"restored {payload['restored']} of {payload['entries']} "
                  f"({payload['skipped']} already dead again)")  # fmt: skip
