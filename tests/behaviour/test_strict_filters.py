"""A mistyped or malformed dead-letter filter is refused (400 naming the key), never widened to
every dead letter: bulk retry, purge, list and replay rules, on both stores; nothing changes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    assert_error,
    count_rows,
    enqueue,
    explain_incidents,
    fetch,
    forbid_server_errors,
    kill_job,
)

pytestmark = pytest.mark.anyio

DEAD_ROWS = "SELECT COUNT(*) FROM dead_letters WHERE status = 'dead'"


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def two_queues_of_dead_letters(client: httpx.AsyncClient) -> dict[str, str]:
    return {
        "qa": await kill_job(client, "qa", "qa.job", "Boom"),
        "other": await kill_job(client, "other", "other.job", "Boom"),
    }


# (bulk body, the field the refusal must name)
BAD_BULK_BODIES = [
    pytest.param({"filter": {"queu": "qa"}, "confirm": True}, "filter.queu", id="mistyped-key"),
    pytest.param({"filter": [], "confirm": True}, "filter", id="filter-array"),
    pytest.param({"filter": "queue=qa", "confirm": True}, "filter", id="filter-string"),
    pytest.param({"filter": {"queue": ["qa"]}, "confirm": True}, "filter.queue", id="list-value"),
    pytest.param({"filter": {"queue": 5}, "confirm": True}, "filter.queue", id="number-value"),
    pytest.param(
        {"filter": {"type": "qa.job", "job_type": "x"}, "confirm": True},
        "filter.job_type",
        id="key-and-alias",
    ),
    pytest.param({"filter": {"queue": "qa"}, "confrim": True}, "confrim", id="mistyped-confirm"),
    pytest.param({"filter": {"queue": "qa"}, "confirm": "yes"}, "confirm", id="confirm-string"),
    pytest.param({"filter": {"queue": "qa"}, "confirm": True, "limit": 0}, "limit", id="limit"),
]


@pytest.mark.parametrize("path", ["/ojs/v1/dead-letter/retry", "/ojs/v1/admin/jobs/bulk/retry"])
@pytest.mark.parametrize(("body", "field"), BAD_BULK_BODIES)
async def test_a_bad_bulk_retry_is_refused_and_retries_nothing(
    client: httpx.AsyncClient, service: Service, path: str, body: dict[str, Any], field: str
) -> None:
    await two_queues_of_dead_letters(client)
    error = assert_error(await client.post(path, json=body), 400, "invalid_request")
    assert error["details"]["field"] == field
    assert await count_rows(service, DEAD_ROWS) == 2


@pytest.mark.parametrize(("body", "field"), BAD_BULK_BODIES)
async def test_a_bad_purge_body_is_refused_and_deletes_nothing(
    client: httpx.AsyncClient, service: Service, body: dict[str, Any], field: str
) -> None:
    await two_queues_of_dead_letters(client)
    response = await client.request("DELETE", "/ojs/v1/dead-letter", json=body)
    error = assert_error(response, 400, "invalid_request")
    assert error["details"]["field"] == field.removeprefix("filter.")
    assert await count_rows(service, DEAD_ROWS) == 2


@pytest.mark.parametrize(
    ("query", "field"),
    [
        pytest.param("queu=qa&confirm=true", "queu", id="mistyped-key"),
        pytest.param("queue=qa&queue=other&confirm=true", "queue", id="repeated-key"),
        pytest.param("queue=qa&confirm=yes", "confirm", id="confirm-word"),
        pytest.param("args_contains=a%00b&confirm=true", "args_contains", id="nul"),
        pytest.param("queue=qa&confirm=true&limit=%C2%B2", "limit", id="superscript-limit"),
    ],
)
async def test_a_bad_purge_query_is_refused_and_deletes_nothing(
    client: httpx.AsyncClient, service: Service, query: str, field: str
) -> None:
    await two_queues_of_dead_letters(client)
    response = await client.delete(f"/ojs/v1/dead-letter?{query}")
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == field
    assert await count_rows(service, DEAD_ROWS) == 2


async def test_a_key_in_both_the_purge_query_and_body_is_refused(
    client: httpx.AsyncClient, service: Service
) -> None:
    await two_queues_of_dead_letters(client)
    response = await client.request(
        "DELETE",
        "/ojs/v1/dead-letter?queue=qa",
        json={"filter": {"queue": "other"}, "confirm": True},
    )
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == "queue"
    assert await count_rows(service, DEAD_ROWS) == 2


@pytest.mark.parametrize(
    "path", ["/ojs/v1/dead-letter?queu=qa", "/ojs/v1/admin/dead-letter?queu=qa"]
)
async def test_a_list_with_an_unknown_filter_key_is_refused(
    client: httpx.AsyncClient, path: str
) -> None:
    await two_queues_of_dead_letters(client)
    error = assert_error(await client.get(path), 400, "invalid_request")
    assert error["details"]["field"] == "queu"
    assert "queue" in error["details"]["allowed"]


async def test_a_list_with_a_nul_in_args_contains_is_refused(client: httpx.AsyncClient) -> None:
    await two_queues_of_dead_letters(client)
    response = await client.get("/ojs/v1/dead-letter", params={"args_contains": "a\x00b"})
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == "args_contains"


@pytest.mark.parametrize(
    ("rule_filter", "field"),
    [
        pytest.param({"queu": "qa"}, "filter.queu", id="mistyped-key"),
        pytest.param(["qa"], "filter", id="array"),
        pytest.param({"queue": 1}, "filter.queue", id="number"),
        pytest.param({"status": "retried"}, "filter", id="status"),
    ],
)
async def test_a_replay_rule_with_a_bad_filter_is_refused(
    client: httpx.AsyncClient, rule_filter: object, field: str
) -> None:
    body = {"name": "r1", "filter": rule_filter}
    response = await client.post("/ojs/v1/dead-letter/rules", json=body)
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == field
    assert (await client.get("/ojs/v1/dead-letter/rules")).json()["rules"] == []


async def test_a_replay_rule_with_an_unknown_key_is_refused(client: httpx.AsyncClient) -> None:
    body = {"name": "r1", "filter": {"queue": "qa"}, "max_replay": 3}
    response = await client.post("/ojs/v1/dead-letter/rules", json=body)
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == "max_replay"


async def test_a_dry_run_names_only_the_queues_that_match(client: httpx.AsyncClient) -> None:
    await two_queues_of_dead_letters(client)
    nothing = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": {"queue": "empty"}, "dry_run": True}
    )
    assert (nothing.json()["matched"], nothing.json()["queues"]) == (0, [])
    some = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": {"args_contains": "x"}, "dry_run": True}
    )
    assert (some.json()["matched"], some.json()["queues"]) == (0, [])
    one = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": {"type": "qa.*"}, "dry_run": True}
    )
    assert (one.json()["matched"], one.json()["queues"]) == (1, ["qa"])


async def test_a_well_formed_filter_still_retries_exactly_its_set(
    client: httpx.AsyncClient, service: Service
) -> None:
    ids = await two_queues_of_dead_letters(client)
    await explain_incidents(client)
    response = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": {"queue": "qa"}, "confirm": True}
    )
    assert (response.json()["succeeded"], response.json()["queues"]) == (1, ["qa"])
    assert await count_rows(service, DEAD_ROWS) == 1
    assert [job["id"] for job in await fetch(client, ["qa"])] == [ids["qa"]]


async def test_enqueue_without_a_tenant_cannot_place_a_job_in_another_tenant(
    client: httpx.AsyncClient,
) -> None:
    body = {"type": "a.b", "args": [], "meta": {"tenant_id": "acme"}, "options": {"queue": "m"}}
    response = await client.post("/ojs/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["job"]["meta"]["tenant_id"] == "acme"  # kept, as OJS asks
    assert await fetch(client, ["m"], headers={"X-OJS-Tenant": "acme"}) == []
    assert [job["id"] for job in await fetch(client, ["m"])] == [response.json()["job"]["id"]]
    plain = await enqueue(client, queue="plain")
    assert "tenant_id" not in plain["meta"]
