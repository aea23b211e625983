"""`redrive keys create|ls|revoke`: API keys (the first one is made with --database)."""

from __future__ import annotations

from dataclasses import asdict

import typer
from rich.table import Table

from redrive.cli.output import print_json, say
from redrive.cli.remote import DATABASE, JSON, URL, Target, run, stdout
from redrive.client import ApiKey

keys = typer.Typer(
    help="Make, list and revoke API keys. With auth on, every request needs one "
    "('Authorization: Bearer KEY'); make the first with --database, on the server's database.",
    no_args_is_help=True,
)
ROLES = "worker, viewer, operator or admin"


def _record(key: ApiKey) -> dict[str, object]:
    return {name: value for name, value in asdict(key).items() if name != "secret"}


@keys.command("create")
def create(
    tenant: str = typer.Option(..., "--tenant", help="the tenant the key acts for"),
    role: str = typer.Option(..., "--role", help=ROLES),
    name: str = typer.Option(..., "--name", help="who or what holds the key (the audit actor)"),
    expires_in: str | None = typer.Option(
        None, "--expires-in", help="ISO 8601 duration, e.g. P90D; never expires if absent"
    ),
    all_tenants: bool = typer.Option(
        False, "--all-tenants", help="a key for every tenant; it may pick one with X-OJS-Tenant"
    ),
    url: str = URL,
    database: str | None = DATABASE,
    as_json: bool = JSON,
) -> None:
    """Make a key and print it once: it is stored only as a hash and cannot be shown again."""
    made = run(
        Target(url, database),
        lambda client: client.create_key(
            name, role, tenant=tenant, all_tenants=all_tenants, expires_in=expires_in
        ),
    )
    if as_json:
        print_json({"id": made.id, "key": made.secret, **_record(made)})
        return
    scope = "every tenant" if made.all_tenants else f"tenant {made.tenant}"
    say(f"made key {made.id} ({made.name}, {made.role}, {scope})")
    if made.expires_at:
        say(f"it expires at {made.expires_at}")
    say("the key, shown this once (store it now; send it as 'Authorization: Bearer KEY'):")
    stdout().print(made.secret or "", highlight=False, soft_wrap=True)


@keys.command("ls")
def list_keys(
    include_revoked: bool = typer.Option(False, "--all", help="list revoked keys too"),
    url: str = URL,
    database: str | None = DATABASE,
    as_json: bool = JSON,
) -> None:
    """The keys of your tenant (of every tenant with a key made for all, or --database)."""
    found = run(
        Target(url, database), lambda client: client.list_keys(include_revoked=include_revoked)
    )
    if as_json:
        print_json([_record(key) for key in found])
        return
    table = Table(title="API keys")
    for column in ("id", "tenant", "name", "role", "created", "expires", "revoked"):
        table.add_column(column)
    for key in found:
        tenant = "*" if key.all_tenants else key.tenant
        table.add_row(
            key.id, tenant, key.name, key.role, key.created_at,
            key.expires_at or "never", key.revoked_at or "",
        )  # fmt: skip
    stdout().print(table)


@keys.command("revoke")
def revoke(
    key_id: str = typer.Argument(..., metavar="ID"),
    url: str = URL,
    database: str | None = DATABASE,
    as_json: bool = JSON,
) -> None:
    """Revoke a key: requests carrying it are refused from now on."""
    revoked = run(Target(url, database), lambda client: client.revoke_key(key_id))
    if as_json:
        print_json(_record(revoked))
    else:
        say(f"revoked key {revoked.id} ({revoked.name}) at {revoked.revoked_at}")
