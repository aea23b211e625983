"""`redrive webhooks ls|create|update|rm|deliveries` in --database mode on SQLite and PostgreSQL:
a subscription's life through the CLI (its secret printed only when made or rotated), refusals
with the usage exit code, the SQLite key file made owner-only, and PostgreSQL without a server
key saying how to set one."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from redrive.cli import app
from redrive.cli.remote import EXIT_CONFLICT, EXIT_USAGE
from redrive.domain.secret_box import encode_key
from tests.support.postgres import database_from_template

runner = CliRunner()
SERVER_KEY = encode_key(bytes(range(32)))


def redrive(database_url: str, *arguments: str, key: str | None = SERVER_KEY) -> Result:
    env = {"COLUMNS": "200"}
    if key is not None and not database_url.startswith("sqlite"):
        env["REDRIVE_SECRET_KEY"] = key
    return runner.invoke(app, [*arguments, "--database", database_url], env=env)


def test_a_subscription_is_managed_from_the_command_line(database_url: str) -> None:
    created = redrive(
        database_url, "webhooks", "create", "https://hooks.example.com/x",
        "--event", "dead_letter.*", "--event", "job.failed", "--description", "ops", "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    made = json.loads(created.stdout)
    assert made["secret"].startswith("whsec_")
    assert (made["events"], made["description"]) == (["dead_letter.*", "job.failed"], "ops")
    listed = json.loads(redrive(database_url, "webhooks", "ls", "--json").stdout)
    assert [item["id"] for item in listed] == [made["id"]] and "secret" not in listed[0]
    table = redrive(database_url, "webhooks", "ls").stdout
    assert made["id"] in table and made["secret"] not in table
    paused = redrive(database_url, "webhooks", "update", made["id"], "--inactive", "--json")
    assert json.loads(paused.stdout)["active"] is False
    rotated = redrive(database_url, "webhooks", "update", made["id"], "--rotate-secret")
    assert rotated.exit_code == 0, rotated.output
    assert "whsec_" in rotated.stdout and made["secret"] not in rotated.stdout
    log = redrive(database_url, "webhooks", "deliveries", made["id"], "--json")
    assert json.loads(log.stdout) == {"deliveries": [], "next_cursor": None}
    removed = redrive(database_url, "webhooks", "rm", made["id"])
    assert f"deleted subscription {made['id']}" in removed.stdout
    assert json.loads(redrive(database_url, "webhooks", "ls", "--json").stdout) == []


@pytest.mark.parametrize(
    "arguments",
    [
        ("create", "https://hooks.example.com/x", "--event", "job.done"),
        ("create", "ftp://hooks.example.com/x", "--event", "job.failed"),
        ("update", "sub_x"),
        ("update", "sub_x", "--secret", "s" * 20),
        ("deliveries", "--status", "lost"),
    ],
)
def test_bad_input_exits_with_the_usage_code(database_url: str, arguments: tuple[str, ...]) -> None:
    result = redrive(database_url, "webhooks", *arguments)
    assert result.exit_code == EXIT_USAGE, result.output


def test_the_sqlite_key_file_is_made_beside_the_database_for_its_owner_only(
    tmp_path: Path,
) -> None:
    database_url = f"sqlite:///{tmp_path}/hooks.db"
    made = redrive(database_url, "webhooks", "create", "https://a.example/x", "--event", "*")
    assert made.exit_code == 0, made.output
    key_file = tmp_path / "hooks.db.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = redrive(database_url, "webhooks", "update", "sub_x", "--active")  # the key is read
    assert again.exit_code == 4, again.output  # not found, not a key problem
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []


@pytest.mark.postgres
def test_on_postgres_without_a_server_key_create_says_how_to_set_one(
    postgres_template: str,
) -> None:
    with database_from_template(postgres_template) as database_url:
        refused = redrive(
            database_url, "webhooks", "create", "https://a.example/x", "--event", "*", key=None
        )
        assert refused.exit_code == EXIT_CONFLICT, refused.output
        assert "REDRIVE_SECRET_KEY" in refused.output and "openssl rand" in refused.output
