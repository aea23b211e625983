"""The retention floor (seed 003 §7.2): no dead letter younger than min_age is deleted by
pruning; over max_count, younger ones are archived (archive policy) or kept and counted."""

from __future__ import annotations

import httpx
import pytest

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
