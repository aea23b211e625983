"""`redrive alerts ls|ack`: the dead-letter alerts (new dead letters, too many of a type, a
spike, one aggregate key failing again and again) and acknowledging a firing one."""

from __future__ import annotations

import typer
from rich.table import Table

from redrive.cli.output import print_json, say
from redrive.cli.remote import DATABASE, EXIT_CODES_HELP, JSON, TENANT, URL, Target, run, stdout

alerts = typer.Typer(
    help="Alerts on the dead-letter queue: new dead letters (info), more than N of one job type "
    "(warning), a spike against the previous day (critical), one aggregate key dead three times "
    "or more (critical); firing, acknowledged or resolved.",
    no_args_is_help=True,
    epilog=EXIT_CODES_HELP,
)


@alerts.command("ls")
def list_alerts(
    state: str | None = typer.Option(
        None, "--state", help="firing, acknowledged, resolved or open (comma-separated)"
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=500, help="alerts to show"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Alerts, the newest first."""
    page = run(
        Target(url, database, tenant), lambda client: client.alerts(state=state, limit=limit)
    )
    if as_json:
        print_json({"alerts": [item.raw for item in page.items]})
        return
    table = Table(title=f"Alerts ({len(page.items)})")
    for column in ("id", "state", "severity", "rule", "queue", "key", "count", "message", "fired"):
        table.add_column(column, overflow="fold")
    for item in page.items:
        table.add_row(
            item.id, item.state, item.severity, item.rule, item.queue, item.key, str(item.count),
            item.message, item.first_fired_at or "",
        )  # fmt: skip
    stdout().print(table)


@alerts.command("ack")
def acknowledge(
    alert_id: str = typer.Argument(..., metavar="ID", help="an alert id (alr_...)"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Acknowledge a firing alert: it stays open, unannounced, until its condition clears."""
    alert = run(Target(url, database, tenant), lambda client: client.acknowledge_alert(alert_id))
    if as_json:
        print_json(alert.raw)
        return
    say(f"{alert.id}: {alert.state}")
