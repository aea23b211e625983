"""The dead-letter queue: how jobs enter, how they are found, redriven, deleted, purged, counted."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import httpx
import pytest

from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import fetch_request, nack_request
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.durations import format_timestamp
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    COUNT_EVENTS,
    OJS_MEDIA_TYPE,
    ack,
    assert_error,
    count_rows,
    enqueue,
    explain_all,
    explain_incidents,
    fetch,
    fetch_one,
    forbid_server_errors,
    get_job,
    kill_job,
    nack,
    retry_policy,
    state_of,
)
from tests.support.callers import CALLER, acting_as
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def dead_ids(client: httpx.AsyncClient, query: str = "") -> list[str]:
    response = await client.get(f"/ojs/v1/dead-letter{query}")
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["jobs"]]


async def admin_dead_ids(client: httpx.AsyncClient, query: str = "") -> list[str]:
    response = await client.get(f"/ojs/v1/admin/dead-letter{query}")
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["items"]]


# --- entry paths --------------------------------------------------------------------------------


async def test_retry_exhaustion_with_dead_letter_policy_enters_the_queue(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job = await enqueue(
        client, "mail.send", ["x@y"], queue="mail", meta={"trace_id": "t1"},
        retry=retry_policy(2, "dead_letter", jitter=False),
    )  # fmt: skip
    await fetch_one(client, "mail")
    assert (await nack(client, job["id"], type="SmtpError")).json()["state"] == "retryable"
    clock.advance(1_000)
    await service.sweeper.sweep()
    await fetch_one(client, "mail")
    outcome = (await nack(client, job["id"], type="SmtpError", message="refused")).json()
    assert outcome["state"] == "discarded"
    assert outcome["attempt"] == 2

    assert await dead_ids(client) == [job["id"]]
    dead = (await client.get(f"/ojs/v1/dead-letter/{job['id']}")).json()["job"]
    assert dead["state"] == "discarded"
    assert (dead["type"], dead["args"], dead["queue"]) == ("mail.send", ["x@y"], "mail")
    assert dead["meta"] == {"trace_id": "t1"}
    assert [error["attempt"] for error in dead["errors"]] == [1, 2]
    assert dead["error_type"] == "SmtpError"
    assert dead["discarded_at"] == format_timestamp(clock.now_ms())
    added = (await client.get("/ojs/v1/events?types=dead_letter.added")).json()["events"]
    assert [event["subject"] for event in added] == [job["id"]]


async def test_dead_letter_code_enters_the_queue_even_with_discard_policy(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client, queue="handler", retry=retry_policy(5))
    await fetch_one(client, "handler")
    outcome = (await nack(client, job["id"], code="DEAD_LETTER", message="poison")).json()
    assert outcome["state"] == "discarded"
    assert outcome["attempt"] == 1
    assert await dead_ids(client) == [job["id"]]


async def test_a_failed_job_s_row_holds_its_last_error_once(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    """A failed job's last error is stored once, as the last of its `errors`: its row's `error`
    column holds `true` for it, retryable and dead alike, and the job reads back with that error
    as before; the bulk retry (one statement) and the single retry both leave none."""
    job = await enqueue(
        client, "mail.send", ["x@y"], queue="mail",
        retry=retry_policy(2, "dead_letter", jitter=False),
    )  # fmt: skip
    marked = f"SELECT COUNT(*) FROM jobs WHERE id = '{job['id']}' AND CAST(error AS text) = 'true'"
    await fetch_one(client, "mail")
    await nack(client, job["id"], type="SmtpError", message="first")
    assert await count_rows(service, marked) == 1
    retryable = await get_job(client, job["id"])
    assert retryable["state"] == "retryable"
    assert (retryable["error"]["type"], retryable["error"]["message"]) == ("SmtpError", "first")
    clock.advance(1_000)
    await service.sweeper.sweep()
    await fetch_one(client, "mail")
    await nack(client, job["id"], type="SmtpError", message="second")
    assert await count_rows(service, marked) == 1
    dead = await get_job(client, job["id"])
    assert dead["state"] == "discarded"
    assert (dead["error"]["type"], dead["error"]["message"]) == ("SmtpError", "second")
    assert (await client.get(f"/ojs/v1/dead-letter/{job['id']}")).json()["job"]["error"] == (
        dead["error"]
    )

    await explain_incidents(client)
    response = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": {"queue": "mail"}, "confirm": True}
    )
    assert response.status_code == 200, response.text
    retried = await get_job(client, job["id"])
    assert retried["state"] == "available"
    assert "error" not in retried
    assert [error["message"] for error in retried["errors"]] == ["first", "second"]
    nulls = f"SELECT COUNT(*) FROM jobs WHERE id = '{job['id']}' AND error IS NULL"
    assert await count_rows(service, nulls) == 1


async def test_non_retryable_error_enters_the_queue_at_the_first_attempt(
    client: httpx.AsyncClient,
) -> None:
    flagged = await enqueue(client, queue="nr", retry=retry_policy(5, "dead_letter"))
    await fetch_one(client, "nr")
    assert (await nack(client, flagged["id"], retryable=False)).json()["state"] == "discarded"
    listed = await enqueue(
        client,
        queue="nr",
        retry=retry_policy(5, "dead_letter", non_retryable_errors=["FatalError"]),
    )
    await fetch_one(client, "nr")
    assert (await nack(client, listed["id"], type="FatalError")).json()["state"] == "discarded"
    assert sorted(await dead_ids(client)) == sorted([flagged["id"], listed["id"]])


async def test_discard_policy_jobs_are_not_dead_letters(client: httpx.AsyncClient) -> None:
    exhausted = await enqueue(client, queue="plain", retry=retry_policy(1))
    await fetch_one(client, "plain")
    assert (await nack(client, exhausted["id"])).json()["state"] == "discarded"
    fatal = await enqueue(client, queue="plain", retry=retry_policy(5))
    await fetch_one(client, "plain")
    assert (await nack(client, fatal["id"], retryable=False)).json()["state"] == "discarded"
    asked = await enqueue(client, queue="plain", retry=retry_policy(5, "dead_letter"))
    await fetch_one(client, "plain")
    assert (await nack(client, asked["id"], code="DISCARD")).json()["state"] == "discarded"

    assert await dead_ids(client) == []
    assert await admin_dead_ids(client) == []
    for job in (exhausted, fatal, asked):
        assert_error(await client.get(f"/ojs/v1/dead-letter/{job['id']}"), 404, "not_found")
        assert (await get_job(client, job["id"]))["state"] == "discarded"
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["total"] == 0


async def test_cancelled_jobs_are_not_dead_letters(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="c", retry=retry_policy(1, "dead_letter"))
    await client.delete(f"/ojs/v1/jobs/{job['id']}")
    assert await dead_ids(client) == []


async def test_a_dead_job_still_answers_get(client: httpx.AsyncClient) -> None:
    job_id = await kill_job(client, queue="q1", job_type="report.daily")
    response = await client.get(f"/ojs/v1/jobs/{job_id}")
    assert response.status_code == 200
    assert response.headers["content-type"] == OJS_MEDIA_TYPE
    job = response.json()["job"]
    assert job["id"] == job_id
    assert job["state"] == "discarded"
    assert job["type"] == "report.daily"
    assert len(job["errors"]) == 1
    admin = (await client.get(f"/ojs/v1/admin/jobs/{job_id}")).json()
    assert (admin["id"], admin["state"]) == (job_id, "discarded")


async def test_a_dead_job_still_answers_get_after_the_hot_table_is_pruned(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job_id = await kill_job(client)
    clock.advance(30 * 86_400_000)
    await service.sweeper.sweep()
    assert (await get_job(client, job_id))["state"] == "discarded"
    assert await dead_ids(client) == [job_id]


async def test_a_dead_job_can_be_retried_after_the_hot_table_is_pruned(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job_id = await kill_job(client, queue="cold")
    clock.advance(30 * 86_400_000)
    await service.sweeper.sweep()
    retried = await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert retried.status_code == 200, retried.text
    assert (retried.json()["job"]["state"], retried.json()["job"]["attempt"]) == ("available", 0)
    fetched = await fetch_one(client, "cold")
    assert (fetched["id"], fetched["attempt"]) == (job_id, 1)
    assert [error["type"] for error in fetched["errors"]] == ["Boom"]


async def test_a_dead_job_deleted_after_the_hot_table_is_pruned_is_gone(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job_id = await kill_job(client)
    clock.advance(30 * 86_400_000)
    await service.sweeper.sweep()
    assert (await client.delete(f"/ojs/v1/dead-letter/{job_id}")).status_code == 200
    assert_error(await client.get(f"/ojs/v1/jobs/{job_id}"), 404, "not_found")


# --- listing and filters ------------------------------------------------------------------------


async def populate(client: httpx.AsyncClient, clock: ManualClock) -> dict[str, str]:
    """Five dead letters, one per second, across queues, types and error types."""
    ids = {}
    for name, queue, job_type, error_type in (
        ("a", "billing", "report.daily", "Timeout"),
        ("b", "billing", "report.weekly", "SmtpError"),
        ("c", "mail", "mail.send", "SmtpError"),
        ("d", "mail", "reports.other", "Timeout"),
        ("e", "mail", "report", "KeyError"),
    ):
        ids[name] = await kill_job(client, queue, job_type, error_type, args=[name])
        clock.advance(1_000)
    return ids


async def test_list_is_newest_first_with_full_envelopes(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    response = await client.get("/ojs/v1/dead-letter")
    assert response.headers["content-type"] == OJS_MEDIA_TYPE
    body = response.json()
    assert [job["args"][0] for job in body["jobs"]] == ["e", "d", "c", "b", "a"]
    assert body["pagination"]["total"] == 5
    assert body["pagination"]["has_more"] is False
    first = body["jobs"][0]
    assert first["id"] == ids["e"]
    assert (first["state"], first["type"], first["queue"]) == ("discarded", "report", "mail")
    assert len(first["errors"]) == 1


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("queue=billing", ["b", "a"]),
        ("queue=mail", ["e", "d", "c"]),
        ("queue=nothing", []),
        ("type=report.daily", ["a"]),
        ("job_type=mail.send", ["c"]),
        ("type=report", ["e"]),
        ("type=report.*", ["b", "a"]),
        ("type=report*", ["e", "d", "b", "a"]),
        ("error_type=SmtpError", ["c", "b"]),
        ("error_type=Timeout&queue=mail", ["d"]),
        ("type=report.*&error_type=SmtpError", ["b"]),
    ],
)
async def test_list_filters_on_both_path_families(
    client: httpx.AsyncClient, clock: ManualClock, query: str, expected: list[str]
) -> None:
    ids = await populate(client, clock)
    wanted = [ids[name] for name in expected]
    data = (await client.get(f"/ojs/v1/dead-letter?{query}")).json()
    assert [job["id"] for job in data["jobs"]] == wanted
    assert data["pagination"]["total"] == len(wanted)
    admin = (await client.get(f"/ojs/v1/admin/dead-letter?{query}")).json()
    assert [job["id"] for job in admin["items"]] == wanted
    assert admin["pagination"]["total"] == len(wanted)


async def test_list_filters_by_time_window(client: httpx.AsyncClient, clock: ManualClock) -> None:
    start = clock.now_ms()
    ids = await populate(client, clock)

    def at(seconds: int) -> str:
        return quote(format_timestamp(start + seconds * 1_000))

    window = f"since={at(1)}&until={at(3)}"
    expected = [ids["d"], ids["c"], ids["b"]]
    assert await dead_ids(client, f"?{window}") == expected
    assert await admin_dead_ids(client, f"?{window}") == expected
    assert await dead_ids(client, f"?since={at(4)}") == [ids["e"]]
    assert await dead_ids(client, f"?until={at(0)}") == [ids["a"]]
    assert await dead_ids(client, f"?since={at(5)}") == []
    assert await dead_ids(client, f"?since={at(1)}&queue=billing") == [ids["b"]]


async def test_offset_pagination(client: httpx.AsyncClient, clock: ManualClock) -> None:
    ids = await populate(client, clock)
    body = (await client.get("/ojs/v1/dead-letter?limit=2&offset=2")).json()
    assert [job["id"] for job in body["jobs"]] == [ids["c"], ids["b"]]
    assert body["pagination"] == {
        "total": 5, "limit": 2, "offset": 2, "has_more": True,
        "next_cursor": body["pagination"]["next_cursor"],
    }  # fmt: skip
    last = (await client.get("/ojs/v1/dead-letter?limit=2&offset=4")).json()
    assert [job["id"] for job in last["jobs"]] == [ids["a"]]
    assert last["pagination"]["has_more"] is False
    assert "next_cursor" not in last["pagination"]


async def test_admin_page_pagination(client: httpx.AsyncClient, clock: ManualClock) -> None:
    ids = await populate(client, clock)
    pages = []
    for page in (1, 2, 3):
        body = (await client.get(f"/ojs/v1/admin/dead-letter?page={page}&per_page=2")).json()
        assert body["pagination"] == {"total": 5, "page": page, "per_page": 2}
        pages.append([job["id"] for job in body["items"]])
    assert pages == [[ids["e"], ids["d"]], [ids["c"], ids["b"]], [ids["a"]]]
    default = (await client.get("/ojs/v1/admin/dead-letter")).json()["pagination"]
    assert (default["page"], default["per_page"]) == (1, 20)


async def walk_with_cursor(client: httpx.AsyncClient, query: str) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(50):
        suffix = f"&cursor={cursor}" if cursor else ""
        body = (await client.get(f"/ojs/v1/dead-letter?{query}{suffix}")).json()
        seen += [job["id"] for job in body["jobs"]]
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            return seen
    raise AssertionError("the cursor never ran out")


async def test_cursor_pagination_walks_every_entry_exactly_once(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    created = []
    for index in range(11):
        created.append(await kill_job(client, args=[index]))
        if index % 4 == 3:
            clock.advance(1)
    seen = await walk_with_cursor(client, "limit=3")
    assert len(seen) == 11
    assert sorted(seen) == sorted(created)
    assert seen == await dead_ids(client, "?limit=100")


async def test_cursor_pagination_keeps_the_filter(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    assert await walk_with_cursor(client, "limit=1&queue=mail") == [ids["e"], ids["d"], ids["c"]]


async def test_cursor_pagination_is_stable_while_entries_are_added(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    page = (await client.get("/ojs/v1/dead-letter?limit=2")).json()
    await kill_job(client, args=["newer"])
    cursor = page["pagination"]["next_cursor"]
    rest = (await client.get(f"/ojs/v1/dead-letter?limit=10&cursor={cursor}")).json()
    assert [job["id"] for job in rest["jobs"]] == [ids["c"], ids["b"], ids["a"]]


# --- single retry -------------------------------------------------------------------------------


async def test_retry_keeps_id_and_errors_and_resets_attempt(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    job_id = await kill_job(client, queue="redo")
    clock.advance(5_000)
    response = await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert response.status_code == 200, response.text
    retried = response.json()["job"]
    assert retried["id"] == job_id
    assert retried["state"] == "available"
    assert retried["attempt"] == 0
    assert [error["type"] for error in retried["errors"]] == ["Boom"]
    assert retried["re_enqueued_at"] == format_timestamp(clock.now_ms())
    for cleared in ("error", "completed_at", "discarded_at", "started_at"):
        assert cleared not in retried
    assert await dead_ids(client) == []
    assert_error(await client.get(f"/ojs/v1/dead-letter/{job_id}"), 404, "not_found")
    assert_error(await client.post(f"/ojs/v1/dead-letter/{job_id}/retry"), 404, "not_found")

    fetched = await fetch_one(client, "redo")
    assert (fetched["id"], fetched["attempt"]) == (job_id, 1)
    assert (await ack(client, job_id)).status_code == 200
    assert (await get_job(client, job_id))["state"] == "completed"


async def test_a_retried_job_can_die_again_as_a_new_episode(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job_id = await kill_job(client, queue="twice", error_type="FirstError")
    first = (await client.get(f"/ojs/v1/dead-letter/{job_id}")).json()["job"]
    clock.advance(60_000)
    assert (await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")).status_code == 200
    await fetch_one(client, "twice")
    outcome = (await nack(client, job_id, type="SecondError")).json()
    assert outcome["state"] == "discarded"

    second = (await client.get(f"/ojs/v1/dead-letter/{job_id}")).json()["job"]
    assert second["dead_letter_id"] != first["dead_letter_id"]
    assert second["error_type"] == "SecondError"
    assert second["discarded_at"] == format_timestamp(clock.now_ms())
    assert [error["type"] for error in second["errors"]] == ["FirstError", "SecondError"]
    assert await dead_ids(client) == [job_id]
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["total"] == 1
    assert stats["by_error_type"] == {"SecondError": 1}
    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == 2
    retried = await client.get("/ojs/v1/dead-letter?status=retried")
    assert [job["dead_letter_id"] for job in retried.json()["jobs"]] == [first["dead_letter_id"]]


async def test_retry_with_override(client: httpx.AsyncClient) -> None:
    job = await enqueue(
        client, "fix.me", [1], queue="broken", meta={"a": 1, "b": 1},
        retry=retry_policy(1, "dead_letter"),
    )  # fmt: skip
    await fetch_one(client, "broken")
    await nack(client, job["id"])
    override = {"queue": "repaired", "priority": 7, "meta": {"b": 2, "c": 3}, "args": [2]}
    response = await client.post(
        f"/ojs/v1/dead-letter/{job['id']}/retry", json={"override": override}
    )
    assert response.status_code == 200, response.text
    retried = response.json()["job"]
    assert retried["queue"] == "repaired"
    assert retried["priority"] == 7
    assert retried["meta"] == {"a": 1, "b": 2, "c": 3}
    assert retried["args"] == [2]
    assert await fetch(client, ["broken"]) == []
    fetched = await fetch_one(client, "repaired")
    assert (fetched["id"], fetched["args"], fetched["priority"]) == (job["id"], [2], 7)


async def test_retry_with_top_level_override_on_the_admin_path(client: httpx.AsyncClient) -> None:
    job_id = await kill_job(client, queue="broken")
    response = await client.post(
        f"/ojs/v1/admin/dead-letter/{job_id}/retry",
        json={"queue": "elsewhere", "retry": {"max_attempts": 4}},
    )
    assert response.status_code == 200, response.text
    retried = response.json()["job"]
    assert retried["queue"] == "elsewhere"
    assert retried["max_attempts"] == 4
    assert retried["retry"]["on_exhaustion"] == "dead_letter"


async def test_retry_with_an_invalid_override_changes_nothing(client: httpx.AsyncClient) -> None:
    job_id = await kill_job(client, queue="broken")
    for override in ({"queue": "Bad Queue"}, {"priority": 1000}, {"retry": {"max_attempts": -2}}):
        response = await client.post(
            f"/ojs/v1/dead-letter/{job_id}/retry", json={"override": override}
        )
        assert response.status_code in (400, 422), response.text
    assert await dead_ids(client) == [job_id]
    assert await state_of(client, job_id) == "discarded"


async def test_concurrent_single_retries_redrive_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    job_id = await kill_job(client, queue="race")
    responses = await asyncio.gather(
        *(client.post(f"/ojs/v1/dead-letter/{job_id}/retry") for _ in range(4))
    )
    assert sorted(response.status_code for response in responses) == [200, 404, 404, 404]
    assert len(await fetch(client, ["race"], count=10)) == 1
    retried = (await client.get("/ojs/v1/events?types=dead_letter.retried")).json()["events"]
    assert len(retried) == 1


# --- bulk retry ---------------------------------------------------------------------------------


async def test_bulk_retry_without_confirm_is_refused_and_changes_nothing(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    for body in ({}, {"filter": {"queue": "mail"}}, {"filter": {}, "confirm": False}):
        response = await client.post("/ojs/v1/dead-letter/retry", json=body)
        error = assert_error(response, 400, "invalid_request")
        assert "confirm" in error["message"]
    assert_error(
        await client.post("/ojs/v1/admin/jobs/bulk/retry", json={"confirm": False}),
        400, "invalid_request",
    )  # fmt: skip
    assert sorted(await dead_ids(client)) == sorted(ids.values())
    for job_id in ids.values():
        assert await state_of(client, job_id) == "discarded"


async def test_bulk_retry_dry_run_counts_and_changes_nothing(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    response = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": {"queue": "mail"}, "dry_run": True}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dry_run"] is True
    assert body["matched"] == 3
    assert body["succeeded"] == 0
    assert sorted(body["sample"]) == sorted([ids["c"], ids["d"], ids["e"]])
    assert body["queues"] == ["mail"]
    assert len(await dead_ids(client)) == 5
    assert await fetch(client, ["mail", "billing"], count=10) == []


async def test_bulk_retry_of_a_filtered_set_retries_exactly_those(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    await explain_incidents(client)
    response = await client.post(
        "/ojs/v1/dead-letter/retry",
        json={"filter": {"error_type": "SmtpError"}, "confirm": True},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["action"], body["matched"], body["succeeded"], body["failed"]) == (
        "retry",
        2,
        2,
        0,
    )
    assert body["retried"] == 2
    assert body["errors"] == []
    assert sorted(await dead_ids(client)) == sorted([ids["a"], ids["d"], ids["e"]])
    for name in ("b", "c"):
        job = await get_job(client, ids[name])
        assert (job["state"], job["attempt"]) == ("available", 0)
    for name in ("a", "d", "e"):
        assert await state_of(client, ids[name]) == "discarded"
    fetched = await fetch(client, ["mail", "billing"], count=10)
    assert sorted(job["id"] for job in fetched) == sorted([ids["b"], ids["c"]])


async def test_a_bulk_retry_writes_each_event_as_a_single_retry_does(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    """The bulk retry's statement writes its events from the moved rows (domain.events builds
    the single retry's): the same type, subject, queue, job type and data, field for field."""
    ids = await populate(client, clock)
    await explain_incidents(client)
    episodes = {
        name: (await client.get(f"/ojs/v1/dead-letter/{ids[name]}")).json()["job"]
        for name in ("b", "c")
    }
    assert (await client.post(f"/ojs/v1/dead-letter/{ids['b']}/retry")).status_code == 200
    bulk = {"filter": {"queue": "mail", "type": "mail.send"}, "confirm": True}
    assert (await client.post("/ojs/v1/dead-letter/retry", json=bulk)).json()["succeeded"] == 1
    events = (await client.get("/ojs/v1/events?types=dead_letter.retried")).json()["events"]
    assert [event["subject"] for event in events] == [ids["b"], ids["c"]]
    single, bulk_event = events
    for event, name in ((single, "b"), (bulk_event, "c")):
        dead = episodes[name]
        assert event["data"] == {
            "job_type": dead["type"],
            "queue": dead["queue"],
            "moved_by": single["data"]["moved_by"],
            "episode_id": dead["dead_letter_id"],
        }
    same = ("specversion", "type", "source", "time")
    assert {key: bulk_event[key] for key in same} == {key: single[key] for key in same}
    assert bulk_event.keys() == single.keys()
    assert bulk_event["id"].startswith("evt_") and bulk_event["id"] != single["id"]


async def test_bulk_retry_and_purge_with_a_limit_move_only_the_newest(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    await explain_incidents(client)
    mail = {"queue": "mail"}
    preview = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": mail, "dry_run": True, "limit": 2}
    )
    assert (preview.json()["matched"], len(preview.json()["sample"])) == (2, 2)
    retried = await client.post(
        "/ojs/v1/dead-letter/retry", json={"filter": mail, "confirm": True, "limit": 2}
    )
    assert retried.status_code == 200, retried.text
    assert (retried.json()["matched"], retried.json()["retried"]) == (2, 2)
    assert sorted(await dead_ids(client)) == sorted([ids["a"], ids["b"], ids["c"]])
    for name in ("d", "e"):
        assert await state_of(client, ids[name]) == "available"

    purged = await client.request(
        "DELETE", "/ojs/v1/dead-letter", params={"confirm": "true", "limit": "1"}
    )
    assert purged.status_code == 200, purged.text
    assert purged.json()["purged"] == 1
    assert sorted(await dead_ids(client)) == sorted([ids["a"], ids["b"]])

    for bad in (0, -1, "many", 2.5, True):
        refused = await client.post(
            "/ojs/v1/dead-letter/retry", json={"filter": {}, "confirm": True, "limit": bad}
        )
        assert refused.status_code == 400, (bad, refused.text)
        assert refused.json()["error"]["details"]["field"] == "limit"
    assert sorted(await dead_ids(client)) == sorted([ids["a"], ids["b"]])


async def test_bulk_retry_by_type_prefix_on_the_admin_path(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    await explain_incidents(client)
    response = await client.post(
        "/ojs/v1/admin/dead-letter/retry",
        json={"filter": {"job_type": "report.*"}, "confirm": True},
    )
    assert response.json()["succeeded"] == 2
    assert sorted(await dead_ids(client)) == sorted([ids["c"], ids["d"], ids["e"]])


async def test_bulk_retry_of_everything_is_refused_whatever_confirm_says(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    """Seed 003 RULE-040-040: mass redrive without filters is prohibited, even with every
    incident explained; a dry run may still count everything."""
    ids = await populate(client, clock)
    await explain_incidents(client)
    for path in ("/ojs/v1/admin/jobs/bulk/retry", "/ojs/v1/dead-letter/retry"):
        for body in ({"confirm": True}, {"filter": {}, "confirm": True}, {"confirm": False}):
            response = await client.post(path, json=body)
            assert assert_error(response, 400, "invalid_request")["details"]["field"] == "filter"
    counted = await client.post("/ojs/v1/dead-letter/retry", json={"dry_run": True})
    assert counted.json()["matched"] == 5
    assert sorted(await dead_ids(client)) == sorted(ids.values())


async def make_dead_letters(service: Service, count: int, queue: str) -> list[str]:
    """`count` dead letters made through the service (HTTP adds nothing to the setup)."""
    jobs = [
        {"type": "bulk.item", "args": [index],
         "options": {"queue": queue, "retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}}
        for index in range(count)
    ]  # fmt: skip
    created = await service.jobs.enqueue_batch(CALLER, job_requests({"jobs": jobs}))
    claimed = await service.workers.fetch(
        CALLER, fetch_request({"queues": [queue], "count": count})
    )
    assert len(claimed) == count
    failed = await asyncio.gather(
        *(
            service.workers.nack(CALLER, nack_request({"job_id": job.id, "error": {"code": "x"}}))
            for job in claimed
        )
    )
    assert {job.state for job in failed} == {"discarded"}
    return [job.id for job in created]


async def test_concurrent_bulk_retries_redrive_each_dead_letter_once(
    client: httpx.AsyncClient, service: Service
) -> None:
    ids = await make_dead_letters(service, 200, "crowd")
    request = BulkRequest(parse_filter({"queue": "crowd"}, service.now()), confirm=True)
    await explain_all(service, CALLER)
    results = await asyncio.gather(
        service.dead_letters.bulk_retry(acting_as("operator-1"), request),
        service.dead_letters.bulk_retry(acting_as("operator-2"), request),
    )
    assert sum(result.succeeded for result in results) == 200
    for result in results:
        assert result.matched == result.succeeded + result.failed

    assert await count_rows(service, "SELECT COUNT(*) FROM dead_letters") == 200
    retried = "SELECT COUNT(*) FROM dead_letters WHERE status = 'retried'"
    assert await count_rows(service, retried) == 200
    assert await count_rows(service, "SELECT COUNT(DISTINCT job_id) FROM dead_letters") == 200
    available = "SELECT COUNT(*) FROM jobs WHERE queue = 'crowd' AND state = 'available'"
    assert await count_rows(service, available) == 200
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 200
    events = await count_rows(service, COUNT_EVENTS + " WHERE type = 'dead_letter.retried'")
    assert events == 200
    fetched = await fetch(client, ["crowd"], count=1000)
    assert sorted(job["id"] for job in fetched) == sorted(ids)
    assert {job["attempt"] for job in fetched} == {1}
    assert await fetch(client, ["crowd"], count=1000) == []


# --- delete and purge ---------------------------------------------------------------------------


async def test_delete_on_the_data_plane_removes_the_job_entirely(
    client: httpx.AsyncClient,
) -> None:
    job_id = await kill_job(client)
    response = await client.delete(f"/ojs/v1/dead-letter/{job_id}")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == OJS_MEDIA_TYPE
    assert response.json() == {"deleted": True, "job_id": job_id}
    assert await dead_ids(client) == []
    assert_error(await client.get(f"/ojs/v1/dead-letter/{job_id}"), 404, "not_found")
    assert_error(await client.get(f"/ojs/v1/jobs/{job_id}"), 404, "not_found")
    assert_error(await client.post(f"/ojs/v1/dead-letter/{job_id}/retry"), 404, "not_found")
    assert_error(await client.delete(f"/ojs/v1/dead-letter/{job_id}"), 404, "not_found")


async def test_delete_on_the_admin_path_is_204(client: httpx.AsyncClient) -> None:
    job_id = await kill_job(client)
    response = await client.delete(f"/ojs/v1/admin/dead-letter/{job_id}")
    assert response.status_code == 204
    assert response.content == b""
    assert await admin_dead_ids(client) == []
    assert_error(await client.get(f"/ojs/v1/jobs/{job_id}"), 404, "not_found")


async def test_delete_of_a_retried_job_is_404_and_keeps_it_running(
    client: httpx.AsyncClient,
) -> None:
    job_id = await kill_job(client, queue="back")
    await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert_error(await client.delete(f"/ojs/v1/dead-letter/{job_id}"), 404, "not_found")
    assert await state_of(client, job_id) == "available"


async def test_purge_needs_confirm_and_removes_the_filtered_set(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    assert_error(await client.delete("/ojs/v1/dead-letter?queue=billing"), 400, "invalid_request")
    assert len(await dead_ids(client)) == 5

    response = await client.delete("/ojs/v1/dead-letter?queue=billing&confirm=true")
    assert response.status_code == 200, response.text
    assert response.json()["purged"] == 2
    assert sorted(await dead_ids(client)) == sorted([ids["c"], ids["d"], ids["e"]])
    for name in ("a", "b"):
        assert_error(await client.get(f"/ojs/v1/jobs/{ids[name]}"), 404, "not_found")
    assert await state_of(client, ids["c"]) == "discarded"

    body = {"filter": {"error_type": "Timeout"}, "confirm": True}
    admin = await client.request("DELETE", "/ojs/v1/admin/dead-letter", json=body)
    assert admin.status_code == 200, admin.text
    assert admin.json()["purged"] == 1
    assert sorted(await dead_ids(client)) == sorted([ids["c"], ids["e"]])


async def test_purge_everything(client: httpx.AsyncClient, clock: ManualClock) -> None:
    await populate(client, clock)
    response = await client.request("DELETE", "/ojs/v1/dead-letter", json={"confirm": True})
    assert response.json()["purged"] == 5
    assert await dead_ids(client) == []
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == 0


# --- stats --------------------------------------------------------------------------------------


async def test_stats_totals_and_breakdowns(client: httpx.AsyncClient, clock: ManualClock) -> None:
    empty = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert empty["total"] == 0
    assert empty["by_queue"] == {}

    start = clock.now_ms()
    await populate(client, clock)
    for path in ("/ojs/v1/dead-letter/stats", "/ojs/v1/admin/dead-letter/stats"):
        response = await client.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"] == OJS_MEDIA_TYPE
        stats = response.json()
        assert stats["total"] == 5
        assert stats["by_queue"] == {"billing": 2, "mail": 3}
        assert stats["by_error_type"] == {"Timeout": 2, "SmtpError": 2, "KeyError": 1}
        assert stats["by_type"] == {
            "report.daily": 1, "report.weekly": 1, "mail.send": 1, "reports.other": 1, "report": 1,
        }  # fmt: skip
        assert stats["oldest_at"] == format_timestamp(start)
        assert stats["newest_at"] == format_timestamp(start + 4_000)
        assert stats["retention"]["max_count"] > 0
        assert isinstance(stats["retention"]["max_age"], str)


async def test_stats_follow_retries_and_deletes(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = await populate(client, clock)
    await client.post(f"/ojs/v1/dead-letter/{ids['a']}/retry")
    await client.delete(f"/ojs/v1/dead-letter/{ids['e']}")
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["total"] == 3
    assert stats["by_queue"] == {"billing": 1, "mail": 2}
    assert stats["by_error_type"] == {"SmtpError": 2, "Timeout": 1}
    metrics = (await client.get("/metrics")).text
    assert 'ojs_dead_letter_total{queue="mail"} 2' in metrics
    assert 'ojs_dead_letter_retried_total{queue="billing"} 1' in metrics
