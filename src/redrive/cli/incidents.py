"""`redrive incidents ls|show|ack|resolve|ignore|reopen|classify|rca`: dead letters grouped by
the fingerprint of their error, the state and class operators keep on each group, and its
root-cause record (written, read, or printed as the RCA Markdown template)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import typer
from rich.table import Table

from redrive.cli.output import dead_letter_table, fields_table, print_json, say, sparkline
from redrive.cli.remote import DATABASE, EXIT_CODES_HELP, JSON, TENANT, URL, Target, run, stdout
from redrive.client import Client, Incident, IncidentDetail, IncidentTrend

incidents = typer.Typer(
    help="Incidents: dead letters grouped by (job type, error fingerprint), with how many are "
    "dead now and ever, and their state: open, acknowledged, resolved (with a fix reference), "
    "regressed (a dead letter arrived after the fix) or ignored.",
    no_args_is_help=True,
    epilog=EXIT_CODES_HELP,
)
INCIDENT_ID = typer.Argument(..., metavar="ID", help="an incident id (inc_...)")
TREND = typer.Option(
    "24h", "--trend", help="the arrivals to show: 24h (hourly buckets) or 7d (daily buckets)"
)


def trend_text(trend: IncidentTrend | None) -> str:
    """The arrivals as unicode blocks, oldest first, then how many in all."""
    return "" if trend is None else f"{sparkline(trend.counts)} {trend.total}"


def incident_rows(incident: Incident) -> list[tuple[str, object]]:
    return [
        ("id", incident.id), ("state", incident.state), ("class", incident.classification),
        ("type", incident.type),
        ("error type", incident.error_type), ("message", incident.message),
        ("dead now", str(incident.dead_count)), ("ever", str(incident.total_count)),
        ("queues", ", ".join(incident.queues)), ("first seen", incident.first_seen_at),
        ("last seen", incident.last_seen_at), ("fix", incident.fix_reference),
        ("state changed", f"{incident.state_changed_at} by {incident.state_changed_by}"),
        ("fingerprint", f"{incident.fingerprint} (v{incident.fingerprint_version})"),
        ("sample", incident.sample_dead_letter_id),
        *(
            [] if incident.trend is None else [
                (f"trend ({incident.trend.window})", trend_text(incident.trend)),
                ("direction", incident.trend.summary),
            ]
        ),
    ]  # fmt: skip


@incidents.command("ls")
def list_incidents(
    state: str | None = typer.Option(
        None, "--state", help="open, acknowledged, resolved, regressed, ignored (comma-separated)"
    ),
    job_type: str | None = typer.Option(None, "--type", help="job type (ending in * a prefix)"),
    queue: str | None = typer.Option(None, "--queue", help="a queue among those affected"),
    error_type: str | None = typer.Option(None, "--error-type", help="error type (exact)"),
    sort: str | None = typer.Option(
        None, "--sort", help="recent (newest dead letter first, default) or count (most dead)"
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=500, help="incidents per page"),
    cursor: str | None = typer.Option(None, "--cursor", help="next_cursor of a page before"),
    trend: str = TREND,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Incidents, the most recent first (or --sort count), each with its arrivals over the last
    24 hours (or --trend 7d) as a sparkline and a count."""
    page = run(
        Target(url, database, tenant),
        lambda client: client.incidents(
            state=state, type=job_type, queue=queue, error_type=error_type, sort=sort,
            limit=limit, cursor=cursor, trend=trend,
        ),
    )  # fmt: skip
    if as_json:
        print_json(
            {"incidents": [item.raw for item in page.items], "next_cursor": page.next_cursor}
        )
        return
    table = Table(title=f"Incidents ({len(page.items)})")
    columns = ("id", "state", "dead", "ever", trend, "type", "error type", "message", "last seen")
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column == trend)
    for item in page.items:
        table.add_row(
            item.id, item.state, str(item.dead_count), str(item.total_count),
            trend_text(item.trend), item.type, item.error_type or "",
            item.message.splitlines()[0] if item.message else "", item.last_seen_at or "",
        )  # fmt: skip
    stdout().print(table)
    if page.has_more and page.next_cursor:
        say(f"more: --cursor {page.next_cursor}")


@incidents.command("show")
def show(
    incident_id: str = INCIDENT_ID,
    trend: str = TREND,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """An incident, its arrivals over the last 24 hours (or --trend 7d) and its newest dead
    letters."""
    found: IncidentDetail = run(
        Target(url, database, tenant), lambda client: client.get_incident(incident_id, trend)
    )
    if as_json:
        print_json(
            {
                "incident": found.incident.raw,
                "dead_letters": [dead.raw for dead in found.dead_letters],
            }
        )
        return
    stdout().print(fields_table(f"incident {found.incident.id}", incident_rows(found.incident)))
    stdout().print(dead_letter_table(found.dead_letters, "Newest dead letters"))


def _changed(
    target: Target, change: Callable[[Client], Awaitable[Incident]], as_json: bool
) -> None:
    incident = run(target, change)
    if as_json:
        print_json(incident.raw)
        return
    fix = f" (fix: {incident.fix_reference})" if incident.fix_reference else ""
    say(f"{incident.id}: {incident.state}{fix}")


@incidents.command("ack")
def acknowledge(
    incident_id: str = INCIDENT_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Acknowledge an open or regressed incident: someone is on it."""
    target = Target(url, database, tenant)
    _changed(target, lambda client: client.acknowledge_incident(incident_id), as_json)


@incidents.command("resolve")
def resolve(
    incident_id: str = INCIDENT_ID,
    fix: str = typer.Option(..., "--fix", metavar="REF", help="the fix: a PR, commit, deploy"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Resolve an incident with its fix; a dead letter arriving afterwards regresses it."""
    target = Target(url, database, tenant)
    _changed(target, lambda client: client.resolve_incident(incident_id, fix), as_json)


@incidents.command("ignore")
def ignore(
    incident_id: str = INCIDENT_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Ignore an incident (its dead letters are still counted)."""
    target = Target(url, database, tenant)
    _changed(target, lambda client: client.ignore_incident(incident_id), as_json)


@incidents.command("reopen")
def reopen(
    incident_id: str = INCIDENT_ID,
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Reopen an acknowledged, resolved or ignored incident."""
    target = Target(url, database, tenant)
    _changed(target, lambda client: client.reopen_incident(incident_id), as_json)


@incidents.command("classify")
def classify(
    incident_id: str = INCIDENT_ID,
    classification: str = typer.Argument(
        ..., metavar="CLASS", help="infrastructure, contract, business, poison_pill, unclassified"
    ),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Set an incident's class (its default action follows: see `incidents show`)."""
    target = Target(url, database, tenant)
    incident = run(target, lambda client: client.classify_incident(incident_id, classification))
    if as_json:
        print_json(incident.raw)
        return
    say(f"{incident.id}: {incident.classification}")


@incidents.command("rca")
def root_cause(
    incident_id: str = INCIDENT_ID,
    category: str | None = typer.Option(
        None, "--category", help="write: infrastructure, contract, business or poison_pill"
    ),
    cause: str | None = typer.Option(None, "--root-cause", help="write: what went wrong"),
    fix: str | None = typer.Option(
        None, "--fix", metavar="REF", help="write: the fix applied (a PR, deployment, ticket)"
    ),
    markdown: bool = typer.Option(False, "--markdown", help="print the RCA Markdown template"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Show an incident's root-cause record, or write it (--category and --root-cause, with
    --fix once the fix is out: a redrive of more than one dead letter needs it)."""
    target = Target(url, database, tenant)
    if category is not None or cause is not None or fix is not None:
        if category is None or cause is None:
            raise typer.BadParameter("writing a root cause needs --category and --root-cause")
        found = run(
            target,
            lambda client: client.record_root_cause(incident_id, category, cause, fix),
        )
    else:
        found = run(target, lambda client: client.root_cause(incident_id))
    if markdown:
        stdout().print(found.markdown, markup=False, highlight=False, end="")
        return
    if as_json:
        print_json({"incident": found.incident.raw, "root_cause": found.root_cause})
        return
    record = found.root_cause
    if record is None:
        say(f"{found.incident.id}: no root cause recorded yet")
        return
    rows: list[tuple[str, object]] = [
        ("incident", found.incident.id), ("category", record.get("category")),
        ("root cause", record.get("root_cause")), ("fix", record.get("fix_reference")),
        ("written", f"{record.get('created_at')} by {record.get('created_by')}"),
        ("last edit", f"{record.get('updated_at')} by {record.get('updated_by')} "
                      f"(revision {record.get('revision')})"),
    ]  # fmt: skip
    stdout().print(fields_table(f"root cause of {found.incident.id}", rows))
