"""`redrive audit ls|verify` in --database mode on SQLite and PostgreSQL: the records an
operator's commands leave, and `verify` passing on a real log and failing (exit 1, naming the
record) once a row is altered or deleted straight in the database."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import psycopg
import pytest
from typer.testing import CliRunner, Result

from redrive.cli import app
from redrive.cli.remote import EXIT_FAILED, EXIT_USAGE, Target, open_client
from redrive.client import Client, RetryPolicy

runner = CliRunner()


def redrive(database_url: str, *arguments: str) -> Result:
    return runner.invoke(app, [*arguments, "--database", database_url], env={"COLUMNS": "200"})


def act(database_url: str) -> str:
    """What an operator does through the client: pause and resume a queue, retry a dead letter."""

    async def operate(client: Client) -> str:
        await client.pause_queue("mail")
        await client.resume_queue("mail")
        job = await client.enqueue(
            "mail.send", [1], queue="mail",
            retry=RetryPolicy(max_attempts=1, on_exhaustion="dead_letter"),
        )  # fmt: skip
        [claimed] = await client.fetch(["mail"])
        await client.nack(claimed.id, error={"code": "handler_error", "message": "no"})
        await client.retry_dead_letter(job.id)
        return job.id

    async def main() -> str:
        async with open_client(Target(database=database_url)) as client:
            return await operate(client)

    return asyncio.run(main())


def tamper(database_url: str, *statements: str) -> None:
    """Change rows straight in the database, the append-only trigger dropped first."""
    if database_url.startswith("sqlite"):
        connection = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        with connection:
            connection.execute("DROP TRIGGER audit_log_no_update")
            connection.execute("DROP TRIGGER audit_log_no_delete")
            for statement in statements:
                connection.execute(statement)
        connection.close()
        return
    with psycopg.connect(database_url, autocommit=True) as owner:
        owner.execute("DROP TRIGGER audit_log_append_only ON audit_log")
        for statement in statements:
            owner.execute(statement.encode())


def test_audit_ls_shows_what_the_commands_did(database_url: str) -> None:
    job_id = act(database_url)
    listed = redrive(database_url, "audit", "ls", "--json")
    assert listed.exit_code == 0, listed.output
    records = json.loads(listed.stdout)["records"]
    assert [record["action"] for record in records] == [
        "dead_letter.retry", "queue.resume", "queue.pause",
    ]  # fmt: skip
    assert records[0]["target"] == {"job_id": job_id, "modified": False}
    assert {record["actor"] for record in records} == {"api"}
    only = json.loads(
        redrive(database_url, "audit", "ls", "--action", "queue.pause", "--json").stdout
    )
    assert [record["seq"] for record in only["records"]] == [1]
    table = redrive(database_url, "audit", "ls")
    assert table.exit_code == 0, table.output
    assert "dead_letter.retry" in table.stdout


def test_audit_ls_refuses_an_unknown_action(database_url: str) -> None:
    result = redrive(database_url, "audit", "ls", "--action", "queue.explode")
    assert result.exit_code == EXIT_USAGE
    assert "action must be one of" in result.output


@pytest.mark.parametrize(
    ("statement", "broken"),
    [
        (
            "UPDATE audit_log SET actor = 'someone else' WHERE seq = 2",
            "BROKEN at record 2 (altered)",
        ),
        ("DELETE FROM audit_log WHERE seq = 1", "BROKEN at record 1 (missing)"),
        ("DELETE FROM audit_log WHERE seq = 3", "BROKEN at record 3 (missing)"),
    ],
    ids=["altered", "deleted", "newest deleted"],
)
def test_audit_verify_passes_on_a_real_log_and_fails_after_tampering(
    database_url: str, statement: str, broken: str
) -> None:
    act(database_url)
    intact = redrive(database_url, "audit", "verify")
    assert intact.exit_code == 0, intact.output
    assert "intact, 3 records" in intact.stdout
    tamper(database_url, statement)
    result = redrive(database_url, "audit", "verify")
    assert result.exit_code == EXIT_FAILED, result.output
    assert broken in result.stdout
    as_json = redrive(database_url, "audit", "verify", "--json")
    assert as_json.exit_code == EXIT_FAILED
    assert json.loads(as_json.stdout)["intact"] is False


def test_audit_verify_of_an_empty_log_passes(database_url: str) -> None:
    result = redrive(database_url, "audit", "verify")
    assert result.exit_code == 0, result.output
    assert "empty" in result.stdout
