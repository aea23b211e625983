"""`redrive alerts ls|ack` and the client's alert methods in --database mode on SQLite and
PostgreSQL: an alert fired by an evaluation over the same database is listed, filtered by state,
acknowledged once (a second time is a conflict), and a missing one is not found."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner, Result

from redrive.cli import app
from redrive.cli.remote import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_USAGE, Target, open_client
from redrive.client import Alert, ConflictError, RetryPolicy
from redrive.composition import build_service, open_ready_store
from redrive.settings import Settings

runner = CliRunner()


def redrive(database_url: str, *arguments: str) -> Result:
    return runner.invoke(app, [*arguments, "--database", database_url], env={"COLUMNS": "200"})


def fire_an_alert(database_url: str) -> str:
    """A dead letter, then one evaluation of the alert rules over the same database; the id of
    the alert it fires (new dead letter in queue billing)."""

    async def main() -> str:
        async with open_client(Target(database=database_url)) as client:
            await client.enqueue(
                "charge.card", [1], queue="billing",
                retry=RetryPolicy(max_attempts=1, on_exhaustion="dead_letter"),
            )  # fmt: skip
            [claimed] = await client.fetch(["billing"])
            await client.nack(claimed.id, error={"type": "Declined", "message": "no"})
        store, _ = await open_ready_store(Settings(database_url=database_url))
        try:
            evaluation = await build_service(store, Settings()).sweeper.evaluate_alerts()
        finally:
            await store.close()
        assert evaluation is not None
        [alert] = evaluation.fired
        return alert.id

    return asyncio.run(main())


def test_alerts_ls_and_ack(database_url: str) -> None:
    alert_id = fire_an_alert(database_url)
    listed = redrive(database_url, "alerts", "ls", "--json")
    assert listed.exit_code == 0, listed.output
    [alert] = json.loads(listed.stdout)["alerts"]
    assert (alert["id"], alert["rule"], alert["severity"], alert["state"]) == (
        alert_id, "new_dead_letter", "info", "firing"
    )  # fmt: skip
    table = redrive(database_url, "alerts", "ls")
    assert table.exit_code == 0 and alert_id in table.stdout and "new_dead_letter" in table.stdout
    acknowledged = redrive(database_url, "alerts", "ack", alert_id)
    assert acknowledged.exit_code == 0, acknowledged.output
    assert f"{alert_id}: acknowledged" in acknowledged.stdout
    assert redrive(database_url, "alerts", "ack", alert_id).exit_code == EXIT_CONFLICT
    firing = json.loads(redrive(database_url, "alerts", "ls", "--state", "firing", "--json").stdout)
    assert firing["alerts"] == []
    assert redrive(database_url, "alerts", "ack", "alr_missing").exit_code == EXIT_NOT_FOUND
    assert redrive(database_url, "alerts", "ls", "--state", "closed").exit_code == EXIT_USAGE


def test_the_client_reads_and_acknowledges_alerts(database_url: str) -> None:
    alert_id = fire_an_alert(database_url)

    async def main() -> Alert:
        async with open_client(Target(database=database_url)) as client:
            [listed] = (await client.alerts(state="open")).items
            assert (listed.id, listed.queue, listed.key, listed.count) == (
                alert_id, "billing", "billing", 1
            )  # fmt: skip
            acknowledged = await client.acknowledge_alert(alert_id)
            with pytest.raises(ConflictError):
                await client.acknowledge_alert(alert_id)
            assert (await client.get_alert(alert_id)).state == "acknowledged"
            return acknowledged

    acknowledged = asyncio.run(main())
    assert acknowledged.state == "acknowledged" and acknowledged.acknowledged_by
