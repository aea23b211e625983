"""The retention floor (seed 003 §7.2): no dead letter younger than min_age is deleted by
pruning; over max_count, younger ones are archived (archive policy) or kept and counted."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from redrive.domain.caller import SYSTEM
from redrive.domain.durations import format_timestamp
from redrive.service.facade import Service
from tests.behaviour.ojs_http import forbid_server_errors
from tests.behaviour.test_dead_letter_retention import (
    DAY,
    RETENTION,
    archive_dir,
    archiving,
    archiving_service,
    kill_labelled,
    labels,
    prune_now,
    put_policy,
)
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio
__all__ = ["archive_dir", "archiving", "archiving_service"]  # fixtures used below
STATS = "/ojs/v1/dead-letter/stats"
HOLDING = "dead_letter.retention_floor_holding"


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def test_count_pruning_keeps_dead_letters_younger_than_the_floor_and_says_how_many(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("y1", "y2", "y3", "y4", "y5"):
        await kill_labelled(client, clock, "young", label)
    await put_policy(client, {"max_count": 2})  # the floor stays at its default, P90D

    report = await prune_now(client)
    assert (report["deleted"], report["floor_holding"]) == (0, {"*": 3})
    assert await labels(client) == {"y1", "y2", "y3", "y4", "y5"}
    retention = (await client.get(STATS)).json()["retention"]
    assert (retention["max_count"], retention["min_age"], retention["max_age"]) == (
        2, "P90D", "P180D",
    )  # fmt: skip
    assert retention["floor_holding"] == {"*": 3}
    events = (await client.get(f"/ojs/v1/events?types={HOLDING}")).json()["events"]
    assert [(event["data"]["scope"], event["data"]["count"]) for event in events] == [("*", 3)]

    clock.advance(90 * DAY)  # all five pass the floor: the count removes the three oldest
    report = await prune_now(client)
    assert (report["deleted"], report["floor_holding"]) == (3, {})
    assert await labels(client) == {"y4", "y5"}
    assert (await client.get(STATS)).json()["retention"]["floor_holding"] == {"*": 0}


async def test_count_pruning_removes_only_those_past_the_floor(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("old-1", "old-2"):
        await kill_labelled(client, clock, "mixed", label)
    clock.advance(100 * DAY)
    for label in ("new-1", "new-2", "new-3"):
        await kill_labelled(client, clock, "mixed", label)
    await put_policy(client, {"max_count": 1})
    report = await prune_now(client)
    assert (report["deleted"], report["floor_holding"]) == (2, {"*": 2})
    assert await labels(client) == {"new-1", "new-2", "new-3"}


async def test_age_pruning_waits_for_the_floor_when_max_age_is_shorter(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    await kill_labelled(client, clock, "aged", "a1")
    await put_policy(client, {"max_age": "P30D"})
    clock.advance(31 * DAY)
    assert (await prune_now(client))["deleted"] == 0
    assert await labels(client) == {"a1"}
    clock.advance(60 * DAY)  # 91 days: past the floor too
    assert (await prune_now(client))["deleted"] == 1
    assert await labels(client) == set()


async def test_over_the_count_young_dead_letters_are_archived_under_the_archive_policy(
    archiving: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("y1", "y2", "y3"):
        await kill_labelled(archiving, clock, "kept", label)
    await put_policy(archiving, {"max_count": 1, "pruning_policy": "archive"})
    report = await prune_now(archiving)
    assert (report["deleted"], report["archived"], report["floor_holding"]) == (0, 2, {})
    assert len(report["archives"]) == 1
    assert await labels(archiving) == {"y3"}


async def test_the_floor_is_a_policy_field_set_per_queue_and_checked(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("q1", "q2", "q3"):
        await kill_labelled(client, clock, "fast", label)
    await put_policy(client, {"max_count": 1, "min_age": "PT1S"}, "fast")
    assert (await client.get(f"{RETENTION}/fast")).json()["policy"]["min_age"] == "PT1S"
    assert (await client.get(RETENTION)).json()["global"]["min_age"] == "P90D"
    assert (await prune_now(client))["deleted"] == 2
    for bad in ("ninety days", 90, "-P1D"):
        response = await client.put(RETENTION, json={"min_age": bad})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["details"]["field"] == "min_age"
    assert (await client.get(RETENTION)).json()["global"]["min_age"] == "P90D"


# --- nothing pruned in silence ------------------------------------------------------------------


async def listed(client: httpx.AsyncClient, status: str) -> list[dict[str, Any]]:
    response = await client.get(f"/ojs/v1/dead-letter?status={status}&limit=100")
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs


async def test_a_prune_leaves_tombstones_logs_and_announces_what_it_removed(
    client: httpx.AsyncClient, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    oldest = [await kill_labelled(client, clock, "mail", label) for label in ("m1", "m2")]
    newest = await kill_labelled(client, clock, "mail", "m3")
    await put_policy(client, {"max_count": 1, "min_age": "P0D", "max_age": "P30D"})
    with caplog.at_level(logging.INFO, logger="redrive.retention"):
        report = await prune_now(client)
    assert (report["deleted"], report["by_queue"]) == (2, {"mail": 2})
    assert "pruned 2 dead letters of queue mail by count (deleted)" in caplog.text

    tombstones = await listed(client, "pruned")
    assert {job["id"] for job in tombstones} == set(oldest)
    assert all(job["args"] == [] and job["moved_by"] == "api" for job in tombstones)
    assert all(job["moved_at"] == format_timestamp(clock.now_ms()) for job in tombstones)
    assert (await client.get(STATS)).json()["total"] == 1
    events = (await client.get("/ojs/v1/events?types=dead_letter.pruned")).json()["events"]
    assert [(event["data"]["queue"], event["data"]["count"]) for event in events] == [("mail", 2)]

    clock.advance(31 * DAY)  # tombstones are kept as long as the policy keeps dead letters
    await prune_now(client)  # m3 is pruned by age; the older tombstones go
    assert [job["id"] for job in await listed(client, "pruned")] == [newest]


async def test_archived_dead_letters_leave_tombstones_that_a_restore_replaces(
    archiving: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("a1", "a2"):
        await kill_labelled(archiving, clock, "arch", label)
    await put_policy(archiving, {"max_count": 1, "pruning_policy": "archive"})
    report = await prune_now(archiving)
    assert report["archived"] == 1
    [tombstone] = await listed(archiving, "archived")
    assert tombstone["args"] == []
    restore = await archiving.post(f"/ojs/v1/dead-letter/archives/{report['archives'][0]}/restore")
    assert restore.json()["restored"] == 1, restore.text
    assert await listed(archiving, "archived") == []
    assert await labels(archiving) == {"a1", "a2"}


async def test_young_at_next_prune_counts_only_those_younger_than_a_week_that_would_go(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    for label in ("old-1", "old-2", "old-3"):
        await kill_labelled(client, clock, "mixed", label)
    clock.advance(10 * DAY)
    for label in ("new-1", "new-2"):
        await kill_labelled(client, clock, "mixed", label)
    clock.advance(4 * DAY)  # the old ones died 14 days ago, the new ones 4
    young = service.retention.young_at_next_prune
    await put_policy(client, {"min_age": "P0D", "max_count": 2})
    assert await young(SYSTEM) == 0  # the three old ones go
    await put_policy(client, {"max_count": 1})
    assert await young(SYSTEM) == 1  # and new-1
    await put_policy(client, {"min_age": "P3D"})
    assert await young(SYSTEM) == 1  # new-1 is past a 3-day floor
    await put_policy(client, {"min_age": "P8D"})
    assert await young(SYSTEM) == 0  # an 8-day floor keeps both
    await put_policy(client, {"min_age": "P0D", "max_age": "P5D", "max_count": 100})
    assert await young(SYSTEM) == 0  # by age: only the old ones
    await put_policy(client, {"max_age": "P3D"})
    assert await young(SYSTEM) == 2
    assert (await prune_now(client))["deleted"] == 5
