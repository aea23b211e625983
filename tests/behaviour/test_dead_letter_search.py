"""Dead-letter search: args filters, status, keyset cursors, and stats that agree with the list."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    assert_error,
    count_rows,
    explain_incidents,
    fetch_one,
    forbid_server_errors,
    kill_job,
    nack,
)
from tests.behaviour.test_dead_letters import make_dead_letters, walk_with_cursor
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

LIST = "/ojs/v1/dead-letter"
# A `since` long before any test's clock: the same set, but counted by a query, not the tallies.
COUNTED = {"since": "2000-01-01T00:00:00Z"}


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def listed(client: httpx.AsyncClient, **params: str) -> tuple[list[dict[str, Any]], int]:
    """Every dead letter the filter selects (one page of up to 1000) and the reported total."""
    response = await client.get(LIST, params={"limit": "1000", **params})
    assert response.status_code == 200, response.text
    body = response.json()
    return body["jobs"], body["pagination"]["total"]


# --- args_contains and args_match ---------------------------------------------------------------

ARGS: dict[str, list[Any]] = {
    "a": [{"customer_id": "cust_123", "amount": 9999, "vip": True}],
    "b": [{"customer_id": "cust_1234", "amount": 10, "vip": False}],
    "c": ["cust_123", 42],
    "d": [{"customer": {"id": "cust_9", "tags": ["x", "y"]}, "note": "Zürich"}],
    "e": [{"customer_id": "cust_777", "amount": 9999.5, "vip": None}],
    "f": [[1, 2], {"flag": "true", "n": 0}],
    "g": [{"other": 1}, {"customer_id": "cust_555", "vip": True}],
}


async def populate_args(client: httpx.AsyncClient, clock: ManualClock) -> dict[str, str]:
    ids = {}
    for name, args in ARGS.items():
        queue = "vip" if name in "ag" else "plain"
        ids[name] = await kill_job(client, queue, "args.job", "Boom", args=args)
        clock.advance(1_000)
    return ids


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"args_contains": "cust_123"}, "abc"),
        ({"args_contains": '"cust_123"'}, "ac"),
        ({"args_contains": "Zürich"}, "d"),
        ({"args_contains": "9999"}, "ae"),
        ({"args_contains": '"vip":true'}, "ag"),
        ({"args_contains": "CUST_123"}, ""),
        ({"args_contains": "cust_123", "queue": "vip"}, "a"),
        ({"args_match": '$.customer_id == "cust_123"'}, "a"),
        ({"args_match": '$.customer_id=="cust_1234"'}, "b"),
        ({"args_match": '$.customer_id == "cust_777"'}, "e"),
        ({"args_match": "$.amount == 9999"}, "a"),
        ({"args_match": "$.amount == 9999.5"}, "e"),
        ({"args_match": "$.amount == 10"}, "b"),
        ({"args_match": '$.amount == "9999"'}, ""),
        ({"args_match": "$.vip == true"}, "ag"),
        ({"args_match": "$.vip == false"}, "b"),
        ({"args_match": "$.vip == null"}, "e"),
        ({"args_match": "$.vip == 1"}, ""),
        ({"args_match": '$.vip == "true"'}, ""),
        ({"args_match": '$.customer.id == "cust_9"'}, "d"),
        ({"args_match": '$.customer.tags[1] == "y"'}, "d"),
        ({"args_match": '$.note == "Zürich"'}, "d"),
        ({"args_match": "$.n == 0"}, "f"),
        ({"args_match": '$.flag == "true"'}, "f"),
        ({"args_match": "$.flag == true"}, ""),
        ({"args_match": "$[0] == 1"}, "f"),
        ({"args_match": '$.customer_id == "cust_555"'}, "g"),
        ({"args_match": "$.vip == true", "queue": "vip"}, "ag"),
        ({"args_match": "$.missing == 1"}, ""),
        ({"args_match": '$.customer_id == "cust_123"', "args_contains": "9999"}, "a"),
    ],
    ids=lambda value: value if isinstance(value, str) else "&".join(map("=".join, value.items())),
)
async def test_args_filters_select_exactly_the_right_entries(
    client: httpx.AsyncClient, clock: ManualClock, params: dict[str, str], expected: str
) -> None:
    ids = await populate_args(client, clock)
    wanted = {ids[name] for name in expected}
    jobs, total = await listed(client, **params)
    assert {job["id"] for job in jobs} == wanted
    assert total == len(wanted)
    admin = await client.get("/ojs/v1/admin/dead-letter", params={"per_page": "100", **params})
    assert {job["id"] for job in admin.json()["items"]} == wanted


async def test_args_match_tries_every_element_even_when_others_lack_the_path(
    client: httpx.AsyncClient,
) -> None:
    """Only one element of args needs to match; elements without the path, scalars and arrays
    among them do not stop the others from matching."""
    ids = {
        "object-after-scalar": await kill_job(client, args=[7, {"region": "eu"}]),
        "object-after-array": await kill_job(client, args=[["eu"], {"region": "eu"}]),
        "object-after-object": await kill_job(client, args=[{"zone": 1}, {"region": "eu"}]),
        "nested-after-object": await kill_job(client, args=[{"a": {}}, {"a": {"region": "eu"}}]),
        "first-of-two": await kill_job(client, args=[{"region": "eu"}, {"zone": 2}]),
        "no-match": await kill_job(client, args=[{"zone": 1}, {"region": "us"}]),
    }
    for match, expected in (
        ('$.region == "eu"', {"object-after-scalar", "object-after-array", "object-after-object",
                              "first-of-two"}),
        ('$.a.region == "eu"', {"nested-after-object"}),
    ):  # fmt: skip
        jobs, total = await listed(client, args_match=match)
        found = {name for name, job_id in ids.items() if job_id in {job["id"] for job in jobs}}
        assert found == expected, match
        assert total == len(expected)


async def test_args_match_compares_numbers_by_value(client: httpx.AsyncClient) -> None:
    """JSON has one number type: 10, 10.0 and 1e1 are the same value (as in RFC 9535 JSONPath)."""
    whole = await kill_job(client, args=[{"amount": 10}])
    written_as_float = await kill_job(client, args=[{"amount": 10.0}])
    await kill_job(client, args=[{"amount": 10.5}])
    for match in ("$.amount == 10", "$.amount == 10.0", "$.amount == 1e1"):
        jobs, total = await listed(client, args_match=match)
        assert {job["id"] for job in jobs} == {whole, written_as_float}, match
        assert total == 2, match


INVALID_MATCHES = [
    "customer_id == 1",
    '$.customer_id = "x"',
    "$.customer_id ==",
    "$.customer_id == cust_123",
    '$.a == {"x": 1}',
    "$.a == [1]",
    "$..a == 1",
    "$.a == 1 OR 1 = 1",
    "$ == 1",
    "$.a b == 1",
    "$.a[-1] == 1",
]


@pytest.mark.parametrize("match", INVALID_MATCHES)
async def test_an_invalid_args_match_is_400_everywhere_and_changes_nothing(
    client: httpx.AsyncClient, clock: ManualClock, service: Service, match: str
) -> None:
    await populate_args(client, clock)
    error = assert_error(
        await client.get(LIST, params={"args_match": match}), 400, "invalid_request"
    )
    assert error["details"]["field"] == "args_match"
    admin = await client.get("/ojs/v1/admin/dead-letter", params={"args_match": match})
    assert_error(admin, 400, "invalid_request")
    body = {"filter": {"args_match": match}, "confirm": True}
    assert_error(await client.post(f"{LIST}/retry", json=body), 400, "invalid_request")
    assert_error(await client.request("DELETE", LIST, json=body), 400, "invalid_request")
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters WHERE status = 'dead'") == 7
    assert (await client.get(f"{LIST}/stats")).json()["total"] == 7


async def test_bulk_retry_and_purge_honour_args_filters(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate_args(client, clock)
    await explain_incidents(client)  # the redrive policy asks a bulk retry for root causes
    retry = await client.post(
        f"{LIST}/retry", json={"filter": {"args_match": "$.vip == true"}, "confirm": True}
    )
    assert retry.json()["succeeded"] == 2
    purge = await client.request(
        "DELETE", LIST, json={"filter": {"args_contains": "cust_1"}, "confirm": True}
    )
    assert purge.json()["succeeded"] == 2
    jobs, _ = await listed(client)
    assert {job["id"] for job in jobs} == {ids["d"], ids["e"], ids["f"]}


# --- status -------------------------------------------------------------------------------------


async def test_status_selects_episodes_by_how_they_left(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    names = ("dead", "retried", "replayed", "deleted")
    ids = {name: await kill_job(client, name, "s.job", "E") for name in names}
    assert (await client.post(f"{LIST}/{ids['retried']}/retry")).status_code == 200
    assert (await client.delete(f"{LIST}/{ids['deleted']}")).status_code == 200
    rule = {"name": "replay-it", "filter": {"queue": "replayed"}}
    assert (await client.post(f"{LIST}/rules", json=rule)).status_code == 201
    await service.sweeper.sweep()
    for status in names:
        jobs, total = await listed(client, status=status)
        assert [job["id"] for job in jobs] == [ids[status]], status
        assert total == 1
        assert jobs[0]["dead_letter_status"] == status
    jobs, _ = await listed(client)
    assert [job["id"] for job in jobs] == [ids["dead"]]
    error = assert_error(await client.get(LIST, params={"status": "gone"}), 400, "invalid_request")
    assert error["details"]["field"] == "status"


# --- keyset cursor ------------------------------------------------------------------------------


async def make_keyset_set(service: Service, clock: ManualClock) -> list[str]:
    """120 dead letters in queue `keyset` (30 per millisecond, so many share a time) among 60 in
    other queues; returns the 120 ids."""
    wanted: list[str] = []
    for _ in range(4):
        wanted += await make_dead_letters(service, 30, "keyset")
        await make_dead_letters(service, 15, "noise")
        clock.advance(1)
    return wanted


@pytest.mark.parametrize(
    "query",
    [
        "limit=7&queue=keyset",
        "limit=30&queue=keyset",
        "limit=11&queue=keyset&type=bulk.*",
        "limit=13&queue=keyset&since=2000-01-01T00:00:00Z",
    ],
)
async def test_a_keyset_cursor_through_120_filtered_entries_visits_each_once(
    client: httpx.AsyncClient, clock: ManualClock, service: Service, query: str
) -> None:
    wanted = await make_keyset_set(service, clock)
    seen = await walk_with_cursor(client, query)
    assert len(seen) == 120
    assert len(set(seen)) == 120
    assert set(seen) == set(wanted)
    jobs, total = await listed(client, queue="keyset")
    assert total == 120
    assert seen == [job["id"] for job in jobs]


async def test_a_keyset_cursor_skips_entries_removed_during_the_walk(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    await make_keyset_set(service, clock)
    order = [job["id"] for job in (await listed(client, queue="keyset"))[0]]
    first = (await client.get(LIST, params={"limit": "10", "queue": "keyset"})).json()
    assert [job["id"] for job in first["jobs"]] == order[:10]
    removed = order[40:45] + order[100:103]
    for job_id in removed[:5]:
        assert (await client.delete(f"{LIST}/{job_id}")).status_code == 200
    for job_id in removed[5:]:
        assert (await client.post(f"{LIST}/{job_id}/retry")).status_code == 200

    seen = [job["id"] for job in first["jobs"]]
    cursor = first["pagination"]["next_cursor"]
    while cursor:
        page = (
            await client.get(LIST, params={"limit": "10", "queue": "keyset", "cursor": cursor})
        ).json()
        seen += [job["id"] for job in page["jobs"]]
        cursor = page["pagination"].get("next_cursor")
    assert seen == [job_id for job_id in order if job_id not in removed]


# --- stats stay in step with the list -----------------------------------------------------------


def metric_samples(text: str, name: str) -> dict[str, float]:
    """queue label -> value for one metric family of /metrics."""
    samples = {}
    for line in text.splitlines():
        if line.startswith(name + "{queue="):
            labels, value = line.rsplit(" ", 1)
            samples[labels.split('"')[1]] = float(value)
    return samples


async def assert_stats_match_the_list(client: httpx.AsyncClient) -> dict[str, Any]:
    stats: dict[str, Any] = (await client.get(f"{LIST}/stats")).json()
    jobs, tallied_total = await listed(client)
    _, counted_total = await listed(client, **COUNTED)
    assert stats["total"] == tallied_total == counted_total == len(jobs)
    assert stats["by_queue"] == dict(Counter(job["queue"] for job in jobs))
    assert stats["by_type"] == dict(Counter(job["type"] for job in jobs))
    assert stats["by_error_type"] == dict(Counter(job["error_type"] for job in jobs))
    for key, breakdown in (("queue", "by_queue"), ("error_type", "by_error_type")):
        for value, count in stats[breakdown].items():
            assert (await listed(client, **{key: value}))[1] == count, (key, value)
            assert (await listed(client, **{key: value}, **COUNTED))[1] == count, (key, value)
    # The tallies count each filter of their fields (types, prefixes, pairs) as rows would.
    prefixes = {job["type"].split(".")[0] + ".*" for job in jobs}
    pairs = {(job["queue"], job["error_type"]) for job in jobs}
    filters = [
        *({"type": name} for name in stats["by_type"]),
        *({"type": prefix} for prefix in prefixes),
        *({"queue": queue, "error_type": error_type} for queue, error_type in pairs),
        {"queue": "no-such-queue"},
    ]
    for params in filters:
        tallied, counted = (
            (await listed(client, **params))[1],
            (await listed(client, **params, **COUNTED))[1],
        )
        assert tallied == counted, params
    times = sorted(job["discarded_at"] for job in jobs)
    assert (stats["oldest_at"], stats["newest_at"]) == (
        (times[0], times[-1]) if times else (None, None)
    )
    admin = (await client.get("/ojs/v1/admin/dead-letter/stats")).json()
    assert {key: admin[key] for key in ("total", "by_queue")} == {
        key: stats[key] for key in ("total", "by_queue")
    }
    gauge = metric_samples((await client.get("/metrics")).text, "ojs_dead_letter_total")
    assert {queue: n for queue, n in gauge.items() if n} == stats["by_queue"]
    return stats


async def test_stats_totals_agree_with_the_list_after_retries_deletes_and_prunes(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    ids = {}
    for index in range(12):
        queue = ("billing", "mail", "reports")[index % 3]
        error_type = ("Timeout", "SmtpError", "KeyError", "Timeout")[index % 4]
        ids[index] = await kill_job(client, queue, f"{queue}.job{index % 2}", error_type, [index])
        clock.advance(1_000)
    assert (await assert_stats_match_the_list(client))["total"] == 12

    await client.post(f"{LIST}/{ids[0]}/retry")
    await fetch_one(client, "billing")
    await nack(client, ids[0], type="SecondError")
    assert (await assert_stats_match_the_list(client))["by_error_type"]["SecondError"] == 1

    await explain_incidents(client)  # the redrive policy asks a bulk retry for root causes
    await client.post(f"{LIST}/retry", json={"filter": {"error_type": "KeyError"}, "confirm": True})
    assert (await assert_stats_match_the_list(client))["total"] == 9

    await client.delete(f"{LIST}/{ids[1]}")
    await client.request("DELETE", LIST, json={"filter": {"queue": "reports"}, "confirm": True})
    assert (await assert_stats_match_the_list(client))["total"] == 5

    # The floor (P90D by default) would keep these young dead letters: off here.
    await client.put(f"{LIST}/retention", json={"max_count": 3, "min_age": "P0D"})
    await client.put(f"{LIST}/retention/billing", json={"max_count": 1, "min_age": "P0D"})
    await client.post(f"{LIST}/prune", json={"confirm": True})
    stats = await assert_stats_match_the_list(client)
    assert stats["total"] == 3

    await client.post(f"{LIST}/rules", json={"name": "all-mail", "filter": {"queue": "mail"}})
    await service.sweeper.sweep()
    stats = await assert_stats_match_the_list(client)
    assert "mail" not in stats["by_queue"]

    await client.request("DELETE", LIST, json={"confirm": True})
    stats = await assert_stats_match_the_list(client)
    assert (stats["total"], stats["by_queue"], stats["by_error_type"]) == (0, {}, {})
    assert stats["oldest_at"] is None
