"""`redrive webhooks ls|create|update|rm|deliveries`: signed webhook subscriptions and their
delivery log."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import typer
from rich.table import Table

from redrive.cli.output import print_json, say
from redrive.cli.remote import DATABASE, EXIT_USAGE, JSON, TENANT, URL, Target, fail, run, stdout
from redrive.client import WebhookDeliveryPage, WebhookSubscription

webhooks = typer.Typer(
    help="Webhooks: POST events (dead letters, jobs, queues, crons) to your URLs, signed in the "
    "Standard Webhooks form; failed deliveries retry, then land in the dead-letter queue.",
    no_args_is_help=True,
)
EVENTS_HELP = "event type to send: exact (dead_letter.added), a prefix (dead_letter.*) or *"
NEW_EVENTS = typer.Option(..., "--event", help=EVENTS_HELP + " (repeat it)")
CHANGED_EVENTS = typer.Option(None, "--event", help=EVENTS_HELP + " (replaces them)")


def _record(subscription: WebhookSubscription, with_secret: bool = False) -> dict[str, Any]:
    record = asdict(subscription)
    if not with_secret:
        del record["secret"]
    return record


def _made(subscription: WebhookSubscription, verb: str, as_json: bool) -> None:
    if as_json:
        print_json(_record(subscription, with_secret=True))
        return
    say(f"{verb} subscription {subscription.id} ({', '.join(subscription.events)})")
    say("its signing secret, shown this once (store it now: receivers verify with it):")
    stdout().print(subscription.secret or "", highlight=False, soft_wrap=True, markup=False)


@webhooks.command("ls")
def list_subscriptions(
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """The tenant's subscriptions (never their secrets)."""
    found = run(Target(url, database, tenant), lambda client: client.webhooks())
    if as_json:
        print_json([_record(item) for item in found])
        return
    table = Table(title="Webhook subscriptions")
    for column in ("id", "url", "events", "active", "description", "rotating until"):
        table.add_column(column, overflow="fold")
    for item in found:
        table.add_row(
            item.id, item.url, ", ".join(item.events), "yes" if item.active else "no",
            item.description or "", item.previous_secret_until or "",
        )  # fmt: skip
    stdout().print(table)


@webhooks.command("create")
def create(
    target_url: str = typer.Argument(..., metavar="URL", help="where to POST the events"),
    events: list[str] = NEW_EVENTS,
    secret: str | None = typer.Option(
        None, "--secret", help="your own signing secret (made by the server if absent)"
    ),
    description: str | None = typer.Option(None, "--description", help="what it is for"),
    inactive: bool = typer.Option(False, "--inactive", help="create it switched off"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Subscribe a URL to event types; prints the signing secret once."""
    made = run(
        Target(url, database, tenant),
        lambda client: client.create_webhook(
            target_url, events, secret=secret, description=description, active=not inactive
        ),
    )
    _made(made, "created", as_json)


@webhooks.command("update")
def update(
    subscription_id: str = typer.Argument(..., metavar="ID"),
    target_url: str | None = typer.Option(None, "--target", help="a new URL to POST to"),
    events: list[str] | None = CHANGED_EVENTS,
    active: bool | None = typer.Option(None, "--active/--inactive", help="switch it on or off"),
    description: str | None = typer.Option(None, "--description", help='"" clears it'),
    rotate_secret: bool = typer.Option(
        False, "--rotate-secret", help="a new signing secret (the old one signs too for a day)"
    ),
    secret: str | None = typer.Option(None, "--secret", help="with --rotate-secret: your own"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Change a subscription, or rotate its signing secret (printed once)."""
    target = Target(url, database, tenant)
    changes = {"url": target_url, "events": events, "active": active, "description": description}
    if secret is not None and not rotate_secret:
        fail("--secret goes with --rotate-secret", EXIT_USAGE)
    if rotate_secret:
        if any(value is not None for value in changes.values()):
            fail("rotate the secret on its own, without other changes", EXIT_USAGE)
        rotated = run(
            target, lambda client: client.rotate_webhook_secret(subscription_id, secret=secret)
        )
        _made(rotated, "rotated the secret of", as_json)
        return
    if all(value is None for value in changes.values()):
        fail("nothing to change: give --target, --event, --active/--inactive or --description",
             EXIT_USAGE)  # fmt: skip
    changed = run(
        target,
        lambda client: client.update_webhook(
            subscription_id, url=target_url, events=events, active=active, description=description
        ),
    )
    if as_json:
        print_json(_record(changed))
    else:
        say(f"updated subscription {changed.id}")


@webhooks.command("rm")
def remove(
    subscription_id: str = typer.Argument(..., metavar="ID"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """Delete a subscription and its delivery log (queued deliveries are not sent)."""
    gone = run(Target(url, database, tenant), lambda client: client.delete_webhook(subscription_id))
    if as_json:
        print_json(_record(gone))
    else:
        say(f"deleted subscription {gone.id}")


@webhooks.command("deliveries")
def deliveries(
    subscription_id: str | None = typer.Argument(None, metavar="[ID]", help="one subscription"),
    status: str | None = typer.Option(None, "--status", help="delivered, failed, dead or skipped"),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="records per page"),
    cursor: str | None = typer.Option(None, "--cursor", help="next_cursor of a page before"),
    url: str = URL,
    database: str | None = DATABASE,
    tenant: str | None = TENANT,
    as_json: bool = JSON,
) -> None:
    """The delivery log, newest first: one record per attempt. A dead delivery is in the
    dead-letter queue (queue redrive.webhooks): `redrive dlq retry DELIVERY_ID` sends it again."""
    page: WebhookDeliveryPage = run(
        Target(url, database, tenant),
        lambda client: client.webhook_deliveries(
            subscription_id=subscription_id, status=status, limit=limit, cursor=cursor
        ),
    )
    if as_json:
        print_json(
            {"deliveries": [asdict(item) for item in page.deliveries],
             "next_cursor": page.next_cursor}
        )  # fmt: skip
        return
    table = Table(title="Webhook deliveries")
    for column in ("time", "subscription", "delivery", "event", "try", "status", "http", "ms",
                   "error"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for item in page.deliveries:
        table.add_row(
            item.time, item.subscription_id, item.delivery_id, item.event_type,
            str(item.attempt), item.status, str(item.response_status or ""),
            str(item.duration_ms), item.error or "",
        )  # fmt: skip
    stdout().print(table)
    if page.next_cursor:
        say(f"more: --cursor {page.next_cursor}")
