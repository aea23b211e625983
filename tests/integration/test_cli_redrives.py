"""`redrive dlq redrive` and `redrive redrives ...` and the client's redrive methods in --database
mode on SQLite and PostgreSQL: start, the refusal of a second task on a queue (exit code),
list, show, pause, resume and cancel."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import pytest

from redrive.cli.remote import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_USAGE
from redrive.client import Client, ConflictError, DeadLetterFilter, RedriveItem, RedriveTask
from redrive.domain.upcasting import Payload, Upcasters
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from tests.conftest import open_test_store
from tests.integration.test_cli_incidents import TIMEOUT, die, redrive, with_client
from tests.support.clock import ManualClock
from tests.support.options import service_options


def make_dead(database_url: str, count: int) -> None:
    async def operate(client: Client) -> None:
        for seconds in range(count):
            await die(client, TIMEOUT.format(30 + seconds))
        # the redrive policy: every incident a task touches has a root cause and a fix
        for incident in (await client.incidents()).items:
            await client.record_root_cause(incident.id, "infrastructure", "relay down", "PR #7")

    with_client(database_url, operate)


def test_dlq_redrive_starts_a_task_and_redrives_steer_it(database_url: str) -> None:
    make_dead(database_url, 3)
    started = redrive(database_url, "dlq", "redrive", "--queue", "billing", "--json")
    assert started.exit_code == 0, started.output
    task = json.loads(started.stdout)
    assert (task["state"], task["counts"]["to_move"], task["queues"]) == ("running", 3, ["billing"])
    again = redrive(database_url, "dlq", "redrive", "--filter", "type=charge.card")
    assert again.exit_code == EXIT_CONFLICT and task["id"] in again.stderr, again.output
    people = redrive(database_url, "dlq", "redrive", "--type", "nothing.here", "--detach")
    assert people.exit_code == EXIT_CONFLICT, people.output

    listed = redrive(database_url, "redrives", "ls", "--json")
    assert [item["id"] for item in json.loads(listed.stdout)["tasks"]] == [task["id"]]
    table = redrive(database_url, "redrives", "ls")
    assert task["id"] in table.stdout and "running" in table.stdout
    shown = redrive(database_url, "redrives", "show", task["id"])
    assert "0 of 3" in shown.stdout and "100/minute" in shown.stdout, shown.output
    paused = redrive(database_url, "redrives", "pause", task["id"])
    assert f"{task['id']}: paused" in paused.stdout
    assert redrive(database_url, "redrives", "pause", task["id"]).exit_code == EXIT_CONFLICT
    resumed = redrive(database_url, "redrives", "resume", task["id"], "--json")
    assert json.loads(resumed.stdout)["state"] == "running"
    cancelled = redrive(database_url, "redrives", "cancel", task["id"])
    assert f"{task['id']}: cancelled" in cancelled.stdout
    assert redrive(database_url, "redrives", "show", "rdt_x").exit_code == EXIT_NOT_FOUND
    assert redrive(database_url, "redrives", "ls", "--state", "lost").exit_code == EXIT_USAGE
    critical = redrive(database_url, "dlq", "redrive", "--queue", "billing", "--rate", "500")
    assert critical.exit_code == EXIT_USAGE and "critical" in critical.stderr


def test_the_client_starts_and_steers_tasks(database_url: str) -> None:
    make_dead(database_url, 2)

    async def operate(client: Client) -> RedriveTask:
        task = await client.start_redrive(
            DeadLetterFilter(queue="billing"), rate_per_minute=600, critical=True, reason="why"
        )
        with pytest.raises(ConflictError) as refused:
            await client.start_redrive(DeadLetterFilter(type="charge.card"))
        assert refused.value.details["task_id"] == task.id
        assert [item.id for item in await client.redrives(state="running")] == [task.id]
        assert (await client.pause_redrive(task.id)).state == "paused"
        assert (await client.resume_redrive(task.id)).state == "running"
        return await client.cancel_redrive(task.id)

    cancelled = with_client(database_url, operate)
    assert (cancelled.state, cancelled.to_move, cancelled.rate_per_minute) == ("cancelled", 2, 600)
    assert cancelled.critical and cancelled.finished and cancelled.reason == "why"


def advance_with(database_url: str, upcasters: Upcasters, minutes: int = 2) -> None:
    """A server started with these upcasters (after the task began) runs its ticks: a minute of
    credit each, from now on (the CLI started the task by the wall clock)."""

    async def main() -> None:
        store = await open_test_store(database_url)
        clock = ManualClock(int(time.time() * 1000))
        options = replace(service_options(), upcasters=upcasters)
        service = Service(Runtime(store, clock=clock, options=options))
        try:
            for _ in range(minutes):
                clock.advance(60_000)
                await service.redrives.advance()
        finally:
            await store.close()

    asyncio.run(main())


GAPPY = Upcasters()  # charge.card is at v3 with no v1 -> v2 step
GAPPY.register("charge.card", 2, lambda payload: payload)
REFUSING = Upcasters()  # charge.card v1 -> v2 refuses every payload


@REFUSING.step("charge.card", 1)
def refuse(payload: Payload) -> Payload:
    raise ValueError("amount must be an object now")


def test_show_names_why_a_task_failed_and_the_dead_letters_an_upcaster_refused(
    database_url: str,
) -> None:
    make_dead(database_url, 2)
    started = redrive(database_url, "dlq", "redrive", "--queue", "billing", "--json")
    task = json.loads(started.stdout)
    advance_with(database_url, GAPPY)
    shown = redrive(database_url, "redrives", "show", task["id"])
    assert shown.exit_code == 0, shown.output
    assert "failed" in shown.stdout and "missing_upcaster at job" in shown.stdout, shown.output
    document = json.loads(redrive(database_url, "redrives", "show", task["id"], "--json").stdout)
    assert document["state"] == "failed"
    assert document["failure"]["code"] == "missing_upcaster"
    assert "no upcaster for charge.card v1->v2" in document["failure"]["message"]
    assert document["failed_items"] == []

    # Its queue is free again: a new task, whose payloads an upcaster then refuses one by one.
    again = json.loads(
        redrive(database_url, "dlq", "redrive", "--queue", "billing", "--json").stdout
    )
    advance_with(database_url, REFUSING)
    shown = redrive(database_url, "redrives", "show", again["id"])
    assert "completed" in shown.stdout and "amount must be an object now" in shown.stdout
    listed = redrive(database_url, "redrives", "ls")
    assert again["id"] in listed.stdout

    async def operate(client: Client) -> tuple[RedriveTask, list[RedriveItem]]:
        return await client.get_redrive(again["id"]), await client.redrive_items(
            again["id"], state="failed"
        )

    done, items = with_client(database_url, operate)
    assert (done.state, done.moved, done.failed, done.failure) == ("completed", 0, 2, None)
    assert sorted(item.state for item in items) == ["failed", "failed"]
    assert all(item.error is not None and item.error.code == "upcast_failed" for item in items)
