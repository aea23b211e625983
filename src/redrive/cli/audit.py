"""`redrive audit ls|verify`: read the audit log and check its hash chains."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer
from rich.table import Table

from redrive.cli.output import print_json, say
from redrive.cli.remote import DATABASE, EXIT_FAILED, JSON, TENANT, URL, Target, run, stdout
from redrive.client import AuditPage, AuditVerification

audit = typer.Typer(
    help="The audit log: every operator action (who, what, when, how many) in a hash chain "
    "per tenant that shows any record altered or removed behind redrive's back.",
    no_args_is_help=True,
)
# What `verify` exits with when a chain is broken (an operation that found a failure).
EXIT_BROKEN = EXIT_FAILED


@audit.command("ls")
def list_records(
    action: str | None = typer.Option(None, "--action", help="one action, e.g. dead_letter.retry"),
    actor: str | None = typer.Option(None, "--actor", help="who acted (a key's name, system)"),
    key_id: str | None = typer.Option(None, "--key-id", help="the API key that acted"),
    outcome: str | None = typer.Option(None, "--outcome", help="succeeded, failed or denied"),
    since: str | None = typer.Option(None, "--since", help="at or after (RFC 3339)"),
    until: str | None = typer.Option(None, "--until", help="at or before (RFC 3339)"),
    target: str | None = typer.Option(None, "--target", help="text the target holds (an id)"),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="records per page"),
    cursor: str | None = typer.Option(None, "--cursor", help="next_cursor of a page before"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Audit records, newest first."""
    page: AuditPage = run(
        Target(url, database, tenant),
        lambda client: client.audit_records(
            action=action, actor=actor, key_id=key_id, outcome=outcome, since=since,
            until=until, target=target, limit=limit, cursor=cursor,
        ),
    )  # fmt: skip
    if as_json:
        print_json(
            {
                "records": [asdict(record) for record in page.records],
                "next_cursor": page.next_cursor,
            }
        )
        return
    table = Table(title="Audit log")
    for column in ("time", "tenant", "seq", "actor", "role", "action", "target", "n", "outcome"):
        table.add_column(column)
    for record in page.records:
        table.add_row(
            record.time, record.tenant_id, str(record.seq), record.actor, record.role,
            record.action, json.dumps(record.target, separators=(",", ":")),
            str(record.affected), record.outcome,
        )  # fmt: skip
    stdout().print(table)
    if page.next_cursor:
        say(f"more: --cursor {page.next_cursor}")


@audit.command("verify")
def verify(
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Check every hash chain you can see; exits 1 when one is broken, naming the first
    altered, missing or out-of-order record."""
    result: AuditVerification = run(
        Target(url, database, tenant), lambda client: client.verify_audit()
    )
    if as_json:
        print_json({"intact": result.intact, "chains": [asdict(chain) for chain in result.chains]})
    else:
        for chain in result.chains:
            if chain.intact:
                say(
                    f"tenant {chain.tenant_id}: intact, {chain.records} records, "
                    f"head {chain.head_seq} {chain.head_hash}"
                )
            else:
                say(
                    f"tenant {chain.tenant_id}: BROKEN at record {chain.broken_seq} "
                    f"({chain.problem}): {chain.detail}"
                )
        if not result.chains:
            say("the audit log is empty")
    if not result.intact:
        raise typer.Exit(EXIT_BROKEN)
