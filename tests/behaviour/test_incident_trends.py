"""Incident trends on both stores: the dead letters arriving at each incident per bucket, by the
runtime's clock (no sleeps), retried ones still counted, other tenants' never, the window's
edges, and the strict `trend` value of the API."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.domain.caller import Caller, Role
from redrive.domain.incident import parse_incident_query
from redrive.domain.trend import DAY_MS, HOUR_MS, Window
from redrive.service.facade import Service
from tests.behaviour.ojs_http import assert_error, forbid_server_errors
from tests.behaviour.test_incidents import INCIDENTS, die, incident_of, incident_of_tenant
from tests.support.callers import ACROSS_TENANTS, CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def trend_of(
    client: httpx.AsyncClient,
    incident_id: str,
    window: str = "24h",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    response = await client.get(f"{INCIDENTS}/{incident_id}", params={"trend": window},
                                headers=headers)  # fmt: skip
    assert response.status_code == 200, response.text
    trend: dict[str, Any] = response.json()["incident"]["trend"]
    return trend


def counts(trend: dict[str, Any]) -> list[int]:
    return [bucket["count"] for bucket in trend["buckets"]]


async def test_arrivals_are_counted_per_hour_by_the_runtime_clock(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    first = await die(client)  # 5 hours ago, when the trend is read
    incident = await incident_of(client, first)
    clock.advance(2 * HOUR_MS)
    await die(client)  # 3 hours ago
    await die(client)
    clock.advance(2 * HOUR_MS)
    await die(client)  # an hour ago, to the millisecond: the bucket before the last
    clock.advance(HOUR_MS)
    for _ in range(3):
        await die(client)  # now: the last bucket
    trend = await trend_of(client, incident)
    assert counts(trend) == [0] * 18 + [1, 0, 2, 0, 1, 3]
    assert (trend["window"], trend["bucket_seconds"], trend["total"]) == ("24h", 3600, 7)
    assert trend["direction"] == "rising"
    assert trend["summary"] == "rising: 3 in the last hour, 1 the hour before"
    starts = [bucket["start"] for bucket in trend["buckets"]]
    # Now is 2026-09-21T19:13:20.000Z: the last bucket is the hour up to it (and including it).
    assert (starts[0], starts[-1]) == ("2026-09-20T19:13:20.001Z", "2026-09-21T18:13:20.001Z")

    week = await trend_of(client, incident, "7d")
    assert counts(week) == [0, 0, 0, 0, 0, 0, 7]
    assert (week["bucket_seconds"], week["direction"]) == (86_400, "rising")


async def test_the_window_starts_just_after_24_hours_ago_and_ends_at_now(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    incident = await incident_of(client, await die(client))
    clock.advance(DAY_MS - 1)  # the arrival is 24 h less 1 ms old: the first bucket's first ms
    assert counts(await trend_of(client, incident)) == [1] + [0] * 23
    clock.advance(1)  # exactly 24 h old: out of the window
    trend = await trend_of(client, incident)
    assert counts(trend) == [0] * 24
    assert trend["summary"] == "quiet: none in the last 24 hours"
    assert counts(await trend_of(client, incident, "7d")) == [0] * 5 + [1, 0]  # the day before


async def test_retried_dead_letters_still_count_as_arrivals(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = [await die(client) for _ in range(3)]
    incident = await incident_of(client, jobs[0])
    assert (await client.post(f"/ojs/v1/dead-letter/{jobs[0]}/retry")).status_code == 200
    found = (await client.get(f"{INCIDENTS}/{incident}")).json()["incident"]
    assert found["dead_count"] == 2  # the retried one left the dead count...
    assert counts(await trend_of(client, incident))[-1] == 3  # ...but it arrived all the same
    listed = await service.incidents.search(CALLER, parse_incident_query({}))
    trends = await service.incidents.trends(CALLER, listed, Window.DAY)
    assert trends[incident].counts[-1] == 3


async def test_other_tenants_dead_letters_are_never_counted(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    acme, globex = {"X-OJS-Tenant": "acme"}, {"X-OJS-Tenant": "globex"}
    ours = await incident_of_tenant(client, await die(client, headers=acme), acme)
    for _ in range(4):
        theirs = await incident_of_tenant(client, await die(client, headers=globex), globex)
    listed = await client.get(INCIDENTS, params={"trend": "24h"}, headers=acme)
    assert listed.status_code == 200, listed.text
    [only] = listed.json()["incidents"]
    assert (only["id"], counts(only["trend"])[-1]) == (ours, 1)
    # Asked for another tenant's incident, a tenant's caller sees no arrival at all.
    acme_caller = Caller.for_tenant("acme", "test", Role.ADMIN)
    globex_incident, _ = await service.incidents.get(ACROSS_TENANTS, theirs)
    hidden = await service.incidents.trends(acme_caller, [globex_incident], Window.DAY)
    assert hidden[theirs].total == 0
    seen = await service.incidents.trends(ACROSS_TENANTS, [globex_incident], Window.DAY)
    assert seen[theirs].counts[-1] == 4


async def test_the_list_carries_each_incidents_trend_from_one_query(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    timeout = await incident_of(client, await die(client))
    clock.advance(HOUR_MS)
    declined = await incident_of(client, await die(client, "card_declined", "CardError"))
    await die(client, "card_declined", "CardError")
    response = await client.get(INCIDENTS, params={"trend": "24h", "sort": "count"})
    assert response.status_code == 200, response.text
    found = {item["id"]: item["trend"] for item in response.json()["incidents"]}
    assert counts(found[declined])[-2:] == [0, 2]
    assert counts(found[timeout])[-2:] == [1, 0]
    assert found[timeout]["summary"] == "falling: 0 in the last hour, 1 the hour before"
    plain = await client.get(INCIDENTS)
    assert all("trend" not in item for item in plain.json()["incidents"])


@pytest.mark.parametrize("query", ["?trend=1h", "?trend=24H", "?trend=24h&trend=7d"])
async def test_a_bad_trend_is_refused_on_the_list(client: httpx.AsyncClient, query: str) -> None:
    await die(client)
    error = assert_error(await client.get(f"{INCIDENTS}{query}"), 400, "invalid_request")
    assert error["details"]["field"] == "trend"


async def test_a_bad_trend_or_another_parameter_is_refused_on_one_incident(
    client: httpx.AsyncClient,
) -> None:
    incident = await incident_of(client, await die(client))
    error = assert_error(
        await client.get(f"{INCIDENTS}/{incident}", params={"trend": "30d"}), 400,
        "invalid_request",
    )  # fmt: skip
    assert error["details"] == {"field": "trend", "allowed": ["24h", "7d"]}
    error = assert_error(
        await client.get(f"{INCIDENTS}/{incident}", params={"window": "7d"}), 400,
        "invalid_request",
    )  # fmt: skip
    assert error["details"]["field"] == "window"
    plain = await client.get(f"{INCIDENTS}/{incident}")
    assert "trend" not in plain.json()["incident"]
