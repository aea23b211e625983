"""`redrive incidents ...` and the client's incident methods in --database mode on SQLite and
PostgreSQL: listing, showing, the state changes and their refusals (exit codes), the dead-letter
flags --incident and --fingerprint, and `redrive migrate` filing older dead letters."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
import pytest
from typer.testing import CliRunner, Result

from redrive.cli import app
from redrive.cli.output import sparkline
from redrive.cli.remote import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_USAGE, Target, open_client
from redrive.client import Client, ConflictError, DeadLetterFilter, RetryPolicy

runner = CliRunner()
Result_ = TypeVar("Result_")
TIMEOUT = "stripe API timed out after {}s (POST /v1/charges)"


def redrive(database_url: str, *arguments: str) -> Result:
    return runner.invoke(app, [*arguments, "--database", database_url], env={"COLUMNS": "200"})


def with_client(database_url: str, operate: Callable[[Client], Awaitable[Result_]]) -> Result_:
    async def main() -> Result_:
        async with open_client(Target(database=database_url)) as client:
            return await operate(client)

    return asyncio.run(main())


async def die(client: Client, message: str, error_type: str = "TimeoutError") -> str:
    job = await client.enqueue(
        "charge.card", [1], queue="billing",
        retry=RetryPolicy(max_attempts=1, on_exhaustion="dead_letter"),
    )  # fmt: skip
    [claimed] = await client.fetch(["billing"])
    await client.nack(claimed.id, error={"type": error_type, "message": message})
    return job.id


def make_incidents(database_url: str) -> tuple[str, str]:
    """Two timeouts (one incident) and a declined card (another); (timeout id, declined id)."""

    async def operate(client: Client) -> tuple[str, str]:
        first = await die(client, TIMEOUT.format(30))
        await die(client, TIMEOUT.format(31))
        declined = await die(client, "card_declined", "CardError")
        timeout = (await client.get_dead_letter(first)).incident_id
        other = (await client.get_dead_letter(declined)).incident_id
        assert timeout is not None and other is not None
        return timeout, other

    return with_client(database_url, operate)


def test_incidents_ls_and_show(database_url: str) -> None:
    timeout, declined = make_incidents(database_url)
    listed = redrive(database_url, "incidents", "ls", "--sort", "count", "--json")
    assert listed.exit_code == 0, listed.output
    incidents = json.loads(listed.stdout)["incidents"]
    assert [(item["id"], item["dead_count"]) for item in incidents] == [(timeout, 2), (declined, 1)]
    table = redrive(database_url, "incidents", "ls")
    assert table.exit_code == 0, table.output
    assert timeout in table.stdout and "stripe API timed out after <duration>" in table.stdout
    only = json.loads(redrive(database_url, "incidents", "ls", "--error-type", "CardError",
                              "--json").stdout)  # fmt: skip
    assert [item["id"] for item in only["incidents"]] == [declined]

    shown = redrive(database_url, "incidents", "show", timeout, "--json")
    assert shown.exit_code == 0, shown.output
    body = json.loads(shown.stdout)
    assert body["incident"]["total_count"] == 2
    assert len(body["dead_letters"]) == 2
    people = redrive(database_url, "incidents", "show", timeout)
    assert "Newest dead letters" in people.stdout and "TimeoutError" in people.stdout

    dead = json.loads(redrive(database_url, "dlq", "ls", "--incident", declined, "--json").stdout)
    assert [item["incident_id"] for item in dead] == [declined]
    fingerprint = body["incident"]["fingerprint"]
    by_print = redrive(database_url, "dlq", "ls", "--fingerprint", fingerprint, "--json")
    assert len(json.loads(by_print.stdout)) == 2


def test_incident_state_changes_and_their_refusals(database_url: str) -> None:
    timeout, _ = make_incidents(database_url)
    acknowledged = redrive(database_url, "incidents", "ack", timeout)
    assert acknowledged.exit_code == 0, acknowledged.output
    assert f"{timeout}: acknowledged" in acknowledged.stdout
    again = redrive(database_url, "incidents", "ack", timeout)
    assert again.exit_code == EXIT_CONFLICT, again.output
    no_fix = redrive(database_url, "incidents", "resolve", timeout)
    assert no_fix.exit_code == EXIT_USAGE
    resolved = redrive(database_url, "incidents", "resolve", timeout, "--fix", "PR #7", "--json")
    assert resolved.exit_code == 0, resolved.output
    assert json.loads(resolved.stdout)["fix_reference"] == "PR #7"
    assert redrive(database_url, "incidents", "reopen", timeout).exit_code == 0
    ignored = redrive(database_url, "incidents", "ignore", timeout, "--json")
    assert json.loads(ignored.stdout)["state"] == "ignored"
    missing = redrive(database_url, "incidents", "show", "inc_" + "0" * 24)
    assert missing.exit_code == EXIT_NOT_FOUND
    assert redrive(database_url, "incidents", "ls", "--state", "closed").exit_code == EXIT_USAGE


def test_the_client_changes_states_and_follows_a_regression(database_url: str) -> None:
    async def operate(client: Client) -> None:
        await die(client, TIMEOUT.format(30))
        page = await client.incidents(state="open")
        [incident] = page.items
        assert (incident.state, incident.dead_count, incident.queues) == ("open", 1, ["billing"])
        resolved = await client.resolve_incident(incident.id, "deploy 2026-01-05")
        assert (resolved.state, resolved.fix_reference) == ("resolved", "deploy 2026-01-05")
        with pytest.raises(ConflictError):
            await client.acknowledge_incident(incident.id)
        await die(client, TIMEOUT.format(44))
        detail = await client.get_incident(incident.id)
        assert detail.incident.state == "regressed"
        assert [dead.incident_id for dead in detail.dead_letters] == [incident.id] * 2
        with pytest.raises(ConflictError, match="root_cause_required"):
            await client.retry_dead_letters(DeadLetterFilter(incident=incident.id))
        written = await client.record_root_cause(
            incident.id, "infrastructure", "stripe was slow", "deploy 2026-01-05"
        )
        assert written.root_cause is not None and written.root_cause["revision"] == 1
        assert "- **Fix Applied**: deploy 2026-01-05" in written.markdown
        retried = await client.retry_dead_letters(DeadLetterFilter(incident=incident.id))
        assert retried.succeeded == 2
        assert (await client.get_incident(incident.id)).incident.dead_count == 0

    with_client(database_url, operate)


def forget_incidents(database_url: str) -> None:
    """The dead letters as they were before migration 0009, straight in the database."""
    statements = (
        "UPDATE dead_letters SET fingerprint = NULL, fingerprint_version = NULL, "
        "incident_id = NULL",
        "DELETE FROM incidents",
    )
    if database_url.startswith("sqlite"):
        connection = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        with connection:
            for statement in statements:
                connection.execute(statement)
        connection.close()
        return
    with psycopg.connect(database_url, autocommit=True) as owner:
        for statement in statements:
            owner.execute(statement.encode())


def test_migrate_files_older_dead_letters_into_their_incidents(database_url: str) -> None:
    timeout, declined = make_incidents(database_url)
    forget_incidents(database_url)
    assert json.loads(redrive(database_url, "incidents", "ls", "--json").stdout)["incidents"] == []
    migrated = runner.invoke(app, ["migrate", "--database-url", database_url])
    assert migrated.exit_code == 0, migrated.output
    assert "filed 3 older dead letter(s) into their incidents" in migrated.output
    listed = json.loads(redrive(database_url, "incidents", "ls", "--json").stdout)
    assert sorted(item["id"] for item in listed["incidents"]) == sorted([timeout, declined])
    again = runner.invoke(app, ["migrate", "--database-url", database_url])
    assert again.exit_code == 0 and "filed" not in again.output


def test_incidents_show_their_trend_as_unicode_blocks(database_url: str) -> None:
    timeout, declined = make_incidents(database_url)
    table = redrive(database_url, "incidents", "ls", "--sort", "count")
    assert table.exit_code == 0, table.output
    assert "24h" in table.stdout
    assert "▁" * 23 + "█ 2" in table.stdout  # the two timeouts arrived in the last hour
    assert "▁" * 23 + "█ 1" in table.stdout  # the declined card

    week = json.loads(redrive(database_url, "incidents", "ls", "--trend", "7d", "--json").stdout)
    trends = {item["id"]: item["trend"] for item in week["incidents"]}
    assert [bucket["count"] for bucket in trends[timeout]["buckets"]] == [0] * 6 + [2]
    assert trends[declined]["summary"] == "rising: 1 in the last day, 0 the day before"

    shown = redrive(database_url, "incidents", "show", timeout)
    assert shown.exit_code == 0, shown.output
    assert "trend (24h)" in shown.stdout
    assert "rising: 2 in the last hour, 0 the hour before" in shown.stdout
    detail = with_client(database_url, lambda client: client.get_incident(timeout, trend="7d"))
    assert detail.incident.trend is not None and detail.incident.trend.counts == [0] * 6 + [2]
    bad = redrive(database_url, "incidents", "ls", "--trend", "1y")
    assert bad.exit_code == EXIT_USAGE
    assert "trend must be one of 24h, 7d" in bad.output


def test_sparkline_blocks_scale_to_the_busiest_bucket() -> None:
    assert sparkline([0, 1, 2, 4, 8]) == "▁▂▃▅█"
    assert sparkline([0, 0]) == "▁▁"
    assert sparkline([]) == ""
