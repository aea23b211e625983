"""Bad input at the HTTP edge gets a clear OJS error (400/404/405/409/413/422), never a 500."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    OJS_MEDIA_TYPE,
    ack,
    assert_error,
    client_job_id,
    count_rows,
    enqueue,
    fetch,
    fetch_one,
    forbid_server_errors,
    get_job,
    kill_job,
    nack,
    retry_policy,
)
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

UNKNOWN_ID = "019a0000-0000-7000-8000-000000000000"
BODY_CAP = 64_000


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def post_raw(client: httpx.AsyncClient, path: str, content: bytes) -> httpx.Response:
    return await client.post(path, content=content, headers={"content-type": OJS_MEDIA_TYPE})


# --- body parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"{", b'{"type": "a.b", "args": [}', b"not json at all", b'{"type": "a.b",}', b"\xff\xfe"],
)
async def test_malformed_json_is_invalid_payload(client: httpx.AsyncClient, raw: bytes) -> None:
    response = await post_raw(client, "/ojs/v1/jobs", raw)
    error = assert_error(response, 400, "invalid_payload")
    assert error["retryable"] is False


@pytest.mark.parametrize(
    "path", ["/ojs/v1/jobs", "/ojs/v1/jobs/batch", "/ojs/v1/workers/ack", "/ojs/v1/workers/nack"]
)
async def test_malformed_json_on_other_endpoints(client: httpx.AsyncClient, path: str) -> None:
    assert_error(await post_raw(client, path, b'{"job_id": '), 400, "invalid_payload")


async def test_empty_body_on_enqueue_is_invalid_payload(client: httpx.AsyncClient) -> None:
    assert_error(await client.post("/ojs/v1/jobs"), 400, "invalid_payload")
    assert_error(await post_raw(client, "/ojs/v1/jobs", b""), 400, "invalid_payload")
    assert_error(await post_raw(client, "/ojs/v1/jobs", b"   \n"), 400, "invalid_payload")


async def test_empty_body_on_fetch_is_invalid_payload(client: httpx.AsyncClient) -> None:
    assert_error(await client.post("/ojs/v1/workers/fetch"), 400, "invalid_payload")


@pytest.mark.parametrize("body", [[{"type": "a.b", "args": []}], "a.b", 42, True, None])
async def test_json_that_is_not_an_object_is_rejected(
    client: httpx.AsyncClient, service: Service, body: object
) -> None:
    response = await client.post("/ojs/v1/jobs", json=body)
    assert response.status_code == 400, response.text
    assert_error(response, 400, response.json()["error"]["code"])
    assert response.json()["error"]["code"] in ("invalid_request", "invalid_payload")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize("body", [["default"], "default", 7])
async def test_fetch_body_that_is_not_an_object_is_rejected(
    client: httpx.AsyncClient, body: object
) -> None:
    response = await client.post("/ojs/v1/workers/fetch", json=body)
    assert_error(response, 400, "invalid_request")


async def test_unsupported_content_type_is_rejected(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/ojs/v1/jobs",
        content=b'{"type": "a.b", "args": []}',
        headers={"content-type": "text/plain"},
    )
    assert response.status_code == 400
    assert_error(response, 400, response.json()["error"]["code"])


async def test_json_content_type_with_charset_is_accepted(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/ojs/v1/jobs",
        content=b'{"type": "a.b", "args": []}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 201, response.text


# --- wrong field types --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "a.b", "args": {"to": "x"}}, "args"),
        ({"type": "a.b", "args": "x"}, "args"),
        ({"type": "a.b", "args": None}, "args"),
        ({"type": "a.b"}, "args"),
        ({"args": []}, "type"),
        ({"type": "Email.Send", "args": []}, "type"),
        ({"type": 5, "args": []}, "type"),
        ({"type": "a.b", "args": [], "options": {"priority": "high"}}, "priority"),
        ({"type": "a.b", "args": [], "options": {"priority": True}}, "priority"),
        ({"type": "a.b", "args": [], "options": {"priority": 101}}, "priority"),
        ({"type": "a.b", "args": [], "options": {"queue": 5}}, "queue"),
        ({"type": "a.b", "args": [], "options": {"queue": "My Queue"}}, "queue"),
        ({"type": "a.b", "args": [], "options": "fast"}, "options"),
        ({"type": "a.b", "args": [], "meta": ["x"]}, "meta"),
        ({"type": "a.b", "args": [], "id": "not-a-uuid"}, "id"),
        ({"type": "a.b", "args": [], "options": {"timeout_ms": "soon"}}, "timeout_ms"),
        ({"type": "a.b", "args": [], "options": {"scheduled_at": "2030-01-01T00:00:00"}}, "at"),
    ],
)
async def test_invalid_envelope_is_400_naming_the_field(
    client: httpx.AsyncClient, service: Service, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/ojs/v1/jobs", json=body)
    error = assert_error(response, 400, "invalid_request")
    assert error["type"] == "validation_error"
    assert error["retryable"] is False
    assert field in error["message"] or field in str(error["details"].get("field", ""))
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        ({"max_attempts": -1}, "max_attempts"),
        ({"max_attempts": "three"}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"backoff_coefficient": 0.5}, "backoff_coefficient"),
        ({"initial_interval": "soon"}, "initial_interval"),
        ({"initial_interval": "PT10S", "max_interval": "PT1S"}, "max_interval"),
        ({"jitter": "yes"}, "jitter"),
        ({"on_exhaustion": "explode"}, "on_exhaustion"),
        ({"non_retryable_errors": "Fatal"}, "non_retryable_errors"),
    ],
)
async def test_invalid_retry_policy_is_422_naming_the_field(
    client: httpx.AsyncClient, service: Service, retry: dict[str, Any], field: str
) -> None:
    body = {"type": "retry.test.invalid-policy", "args": [], "options": {"retry": retry}}
    error = assert_error(await client.post("/ojs/v1/jobs", json=body), 422, "invalid_request")
    assert error["type"] == "validation_error"
    assert field in error["message"]
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"queues": "default"}, "queues"),
        ({"queues": []}, "queues"),
        ({}, "queues"),
        ({"queues": ["default"], "count": "five"}, "count"),
        ({"queues": ["default"], "count": 0}, "count"),
        ({"queues": ["Bad Queue"]}, "queues"),
        ({"queues": ["default"], "visibility_timeout_ms": -5}, "visibility_timeout_ms"),
    ],
)
async def test_invalid_fetch_request_names_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    error = assert_error(
        await client.post("/ojs/v1/workers/fetch", json=body), 400, "invalid_request"
    )
    assert field in error["message"]


async def test_invalid_nack_error_object_is_400(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="bad-nack")
    await fetch_one(client, "bad-nack")
    response = await client.post(
        "/ojs/v1/workers/nack", json={"job_id": job["id"], "error": "it broke"}
    )
    assert_error(response, 400, "invalid_request")
    response = await client.post(
        "/ojs/v1/workers/nack", json={"job_id": job["id"], "requeue": "yes"}
    )
    assert_error(response, 400, "invalid_request")
    assert (await get_job(client, job["id"]))["state"] == "active"


async def test_ack_without_job_id_is_400(client: httpx.AsyncClient) -> None:
    error = assert_error(await client.post("/ojs/v1/workers/ack", json={}), 400, "invalid_request")
    assert "job_id" in error["message"]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type": "a.b", "args": [NaN]}',
        b'{"type": "a.b", "args": [Infinity]}',
        b'{"type": "a.b", "args": [-Infinity]}',
        b'{"type": "a.b", "args": [1e400]}',
    ],
    ids=["nan", "infinity", "minus-infinity", "overflowing-float"],
)
async def test_non_json_numbers_are_invalid_payload(
    client: httpx.AsyncClient, service: Service, raw: bytes
) -> None:
    """NaN and Infinity are not JSON (RFC 8259); accepting them stores what cannot be served."""
    assert_error(await post_raw(client, "/ojs/v1/jobs", raw), 400, "invalid_payload")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_deeply_nested_json_is_a_400_not_a_500(
    client: httpx.AsyncClient, service: Service
) -> None:
    depth = 20_000
    raw = b'{"type": "a.b", "args": ' + b"[" * depth + b"]" * depth + b"}"
    assert len(raw) < BODY_CAP
    response = await post_raw(client, "/ojs/v1/jobs", raw)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] in ("invalid_payload", "invalid_request")
    assert_error(response, 400, response.json()["error"]["code"])
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_lone_surrogate_is_a_400_not_a_500(
    client: httpx.AsyncClient, service: Service
) -> None:
    raw = b'{"type": "a.b", "args": ["\\ud800"]}'
    response = await post_raw(client, "/ojs/v1/jobs", raw)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] in ("invalid_payload", "invalid_request")
    assert_error(response, 400, response.json()["error"]["code"])
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize(
    "body",
    [
        {"type": "a.b", "args": ["a\u0000b"]},
        {"type": "a.b", "args": [], "meta": {"note\u0000": 1}},
        {"type": "a.b", "args": [{"deep": ["x\u0000"]}]},
    ],
    ids=["in-args", "in-meta-key", "nested"],
)
async def test_nul_characters_are_kept_exactly_or_refused(
    client: httpx.AsyncClient, service: Service, body: dict[str, Any]
) -> None:
    """U+0000 is a legal JSON string character: keep it byte for byte, or refuse with a 400."""
    response = await client.post("/ojs/v1/jobs", json=body)
    if response.status_code != 201:
        assert_error(response, 400, response.json()["error"]["code"])
        assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0
        return
    stored = await get_job(client, response.json()["job"]["id"])
    assert stored["args"] == body["args"]
    assert stored["meta"] == body.get("meta", {})


HUGE = 10**20


@pytest.mark.parametrize(
    "options",
    [
        {"visibility_timeout_ms": HUGE},
        {"timeout_ms": HUGE},
        {"retry": {"max_attempts": HUGE}},
        {"scheduled_at": "+P999999999999D"},
        {"expires_at": "+P99999999D"},
        {"delay_until": "+PT99999999999999999S"},
    ],
    ids=["visibility", "timeout", "max-attempts", "schedule", "expiry", "delay"],
)
async def test_out_of_range_numbers_are_a_4xx_not_a_500(
    client: httpx.AsyncClient, service: Service, options: dict[str, Any]
) -> None:
    response = await client.post(
        "/ojs/v1/jobs", json={"type": "a.b", "args": [], "options": options}
    )
    assert response.status_code in (400, 422), response.text
    error = assert_error(response, response.status_code, "invalid_request")
    assert error["retryable"] is False
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_out_of_range_fetch_visibility_is_a_400(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="huge")
    body = {"queues": ["huge"], "visibility_timeout_ms": HUGE}
    response = await client.post("/ojs/v1/workers/fetch", json=body)
    error = assert_error(response, 400, "invalid_request")
    assert "visibility_timeout_ms" in error["message"]
    assert (await get_job(client, job["id"]))["state"] == "available"


async def test_out_of_range_dead_letter_time_filter_is_a_400(client: httpx.AsyncClient) -> None:
    response = await client.get("/ojs/v1/dead-letter?since=%2BP999999999999D")
    assert_error(response, 400, "invalid_request")


async def test_purge_with_a_filter_that_is_not_an_object_is_a_400(
    client: httpx.AsyncClient,
) -> None:
    job_id = await kill_job(client)
    body = {"filter": "everything", "confirm": True}
    response = await client.request("DELETE", "/ojs/v1/dead-letter", json=body)
    assert_error(response, 400, "invalid_request")
    bulk = await client.post("/ojs/v1/dead-letter/retry", json=body)
    assert_error(bulk, 400, "invalid_request")
    listed = (await client.get("/ojs/v1/dead-letter")).json()["jobs"]
    assert [item["id"] for item in listed] == [job_id]


# --- size limit ---------------------------------------------------------------------------------


def big_job(size: int) -> bytes:
    padding = "x" * size
    return f'{{"type": "a.b", "args": ["{padding}"]}}'.encode()


async def test_oversized_body_is_413_with_an_ojs_error(
    client: httpx.AsyncClient, service: Service
) -> None:
    response = await post_raw(client, "/ojs/v1/jobs", big_job(BODY_CAP + 1))
    error = assert_error(response, 413, "payload_too_large")
    assert error["retryable"] is False
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_oversized_streamed_body_without_length_is_413(
    client: httpx.AsyncClient, service: Service
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        body = big_job(BODY_CAP * 2)
        for start in range(0, len(body), 16_000):
            yield body[start : start + 16_000]

    response = await client.post(
        "/ojs/v1/jobs", content=chunks(), headers={"content-type": OJS_MEDIA_TYPE}
    )
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "payload_too_large")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_oversized_body_naming_a_supported_ojs_version_is_413(
    client: httpx.AsyncClient, service: Service
) -> None:
    response = await client.post(
        "/ojs/v1/jobs",
        content=big_job(BODY_CAP + 1),
        headers={"content-type": OJS_MEDIA_TYPE, "OJS-Version": "1.0"},
    )
    assert_error(response, 413, "payload_too_large")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize("version", ["1.0", "1.2", " 1.0 ", ""])
async def test_a_1_x_or_empty_ojs_version_is_served(
    client: httpx.AsyncClient, version: str
) -> None:
    response = await client.post(
        "/ojs/v1/jobs", json={"type": "a.b", "args": []}, headers={"OJS-Version": version}
    )
    assert response.status_code == 201, response.text
    assert response.headers["ojs-version"] == "1.0"


async def test_body_just_under_the_cap_is_accepted(client: httpx.AsyncClient) -> None:
    body = big_job(0)
    body = big_job(BODY_CAP - len(body))
    assert len(body) == BODY_CAP
    response = await post_raw(client, "/ojs/v1/jobs", body)
    assert response.status_code == 201, response.text


# --- unknown ids --------------------------------------------------------------------------------


@pytest.mark.parametrize("job_id", [UNKNOWN_ID, "not-a-uuid", "42"])
async def test_unknown_job_is_404_everywhere(client: httpx.AsyncClient, job_id: str) -> None:
    responses = [
        await client.get(f"/ojs/v1/jobs/{job_id}"),
        await client.delete(f"/ojs/v1/jobs/{job_id}"),
        await ack(client, job_id),
        await nack(client, job_id),
        await client.post(f"/ojs/v1/jobs/{job_id}/activate"),
        await client.get(f"/ojs/v1/dead-letter/{job_id}"),
        await client.post(f"/ojs/v1/dead-letter/{job_id}/retry"),
        await client.delete(f"/ojs/v1/dead-letter/{job_id}"),
        await client.delete(f"/ojs/v1/admin/dead-letter/{job_id}"),
    ]
    for response in responses:
        error = assert_error(response, 404, "not_found")
        assert error["retryable"] is False
        assert job_id in error["message"]


async def test_unknown_cron_is_404(client: httpx.AsyncClient) -> None:
    assert_error(await client.delete("/ojs/v1/cron/nope"), 404, "not_found")
    assert_error(await client.get("/ojs/v1/cron/nope"), 404, "not_found")


# --- invalid transitions ------------------------------------------------------------------------


async def test_ack_of_an_available_job_is_conflict(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    error = assert_error(await ack(client, job["id"]), 409, "conflict")
    assert error["retryable"] is False
    assert (await get_job(client, job["id"]))["state"] == "available"
    assert "completed_at" not in await get_job(client, job["id"])


async def test_nack_of_an_available_job_is_conflict(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    assert_error(await nack(client, job["id"]), 409, "conflict")
    after = await get_job(client, job["id"])
    assert after["state"] == "available"
    assert after["errors"] == []


async def test_cancel_of_a_completed_job_is_conflict(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="done")
    await fetch_one(client, "done")
    assert (await ack(client, job["id"], result={"ok": True})).status_code == 200
    assert_error(await client.delete(f"/ojs/v1/jobs/{job['id']}"), 409, "conflict")
    after = await get_job(client, job["id"])
    assert after["state"] == "completed"
    assert after["result"] == {"ok": True}
    assert "cancelled_at" not in after


async def test_every_worker_op_on_a_completed_job_is_conflict(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="done")
    await fetch_one(client, "done")
    assert (await ack(client, job["id"])).status_code == 200
    assert_error(await ack(client, job["id"]), 409, "conflict")
    assert_error(await nack(client, job["id"]), 409, "conflict")
    assert (await get_job(client, job["id"]))["state"] == "completed"


async def test_nack_of_a_discarded_job_is_conflict(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="gone", retry=retry_policy(1))
    await fetch_one(client, "gone")
    assert (await nack(client, job["id"])).json()["state"] == "discarded"
    before = await get_job(client, job["id"])
    assert_error(await nack(client, job["id"]), 409, "conflict")
    assert_error(await ack(client, job["id"]), 409, "conflict")
    assert_error(await client.delete(f"/ojs/v1/jobs/{job['id']}"), 409, "conflict")
    assert await get_job(client, job["id"]) == before


async def test_worker_ops_on_a_dead_lettered_job_are_conflict(client: httpx.AsyncClient) -> None:
    job_id = await kill_job(client)
    assert_error(await nack(client, job_id), 409, "conflict")
    assert_error(await ack(client, job_id), 409, "conflict")
    assert_error(await client.delete(f"/ojs/v1/jobs/{job_id}"), 409, "conflict")
    listed = (await client.get("/ojs/v1/dead-letter")).json()["jobs"]
    assert [item["id"] for item in listed] == [job_id]
    assert listed[0]["errors"][0]["attempt"] == 1
    assert len(listed[0]["errors"]) == 1


async def test_cancel_twice_is_conflict(client: httpx.AsyncClient) -> None:
    job = await enqueue(client)
    assert (await client.delete(f"/ojs/v1/jobs/{job['id']}")).status_code == 200
    assert_error(await client.delete(f"/ojs/v1/jobs/{job['id']}"), 409, "conflict")


async def test_ack_and_nack_of_a_scheduled_job_are_conflict(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, scheduled_at="2099-12-31T23:59:59Z")
    assert job["state"] == "scheduled"
    assert_error(await ack(client, job["id"]), 409, "conflict")
    assert_error(await nack(client, job["id"]), 409, "conflict")
    assert (await get_job(client, job["id"]))["state"] == "scheduled"


async def test_activate_of_a_job_that_is_not_pending_is_conflict(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client)
    assert_error(await client.post(f"/ojs/v1/jobs/{job['id']}/activate"), 409, "conflict")


# --- duplicates and batches ---------------------------------------------------------------------


async def test_duplicate_client_id_is_409_duplicate(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job_id = client_job_id(clock.now_ms())
    first = await client.post("/ojs/v1/jobs", json={"id": job_id, "type": "a.b", "args": [1]})
    assert first.status_code == 201
    assert first.json()["job"]["id"] == job_id
    again = await client.post("/ojs/v1/jobs", json={"id": job_id, "type": "c.d", "args": [2]})
    error = assert_error(again, 409, "duplicate")
    assert error["retryable"] is False
    kept = await get_job(client, job_id)
    assert (kept["type"], kept["args"]) == ("a.b", [1])
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 1


async def test_duplicate_id_of_a_finished_job_is_still_409(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    job_id = client_job_id(clock.now_ms())
    body = {"id": job_id, "type": "a.b", "args": [], "options": {"queue": "dup"}}
    assert (await client.post("/ojs/v1/jobs", json=body)).status_code == 201
    await fetch_one(client, "dup")
    assert (await ack(client, job_id)).status_code == 200
    assert_error(await client.post("/ojs/v1/jobs", json=body), 409, "duplicate")
    assert (await get_job(client, job_id))["state"] == "completed"


async def test_batch_with_one_invalid_job_writes_nothing(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    ids = [client_job_id(clock.now_ms()) for _ in range(3)]
    jobs: list[dict[str, Any]] = [
        {"id": ids[0], "type": "batch.ok", "args": [0]},
        {"id": ids[1], "type": "batch.ok", "args": [1]},
        {"id": ids[2], "type": "batch.bad", "args": "not-an-array"},
    ]
    response = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs})
    error = assert_error(response, 400, "invalid_request")
    assert error["details"]["index"] == 2
    for job_id in ids:
        assert_error(await client.get(f"/ojs/v1/jobs/{job_id}"), 404, "not_found")
    assert await fetch(client, ["default"], count=10) == []
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0
    events = (await client.get("/ojs/v1/events")).json()["events"]
    assert [event for event in events if event["type"] == "job.enqueued"] == []


async def test_batch_with_an_invalid_retry_policy_writes_nothing(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    good = client_job_id(clock.now_ms())
    jobs: list[dict[str, Any]] = [
        {"id": good, "type": "batch.ok", "args": []},
        {"type": "batch.bad", "args": [], "options": {"retry": {"max_attempts": -1}}},
    ]
    response = await client.post("/ojs/v1/jobs/batch", json={"jobs": jobs})
    assert response.status_code in (400, 422)
    error = assert_error(response, response.status_code, "invalid_request")
    assert error["details"]["index"] == 1
    assert_error(await client.get(f"/ojs/v1/jobs/{good}"), 404, "not_found")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_batch_reusing_an_existing_id_writes_nothing(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    existing = client_job_id(clock.now_ms())
    fresh = client_job_id(clock.now_ms())
    body = {"id": existing, "type": "a.b", "args": []}
    assert (await client.post("/ojs/v1/jobs", json=body)).status_code == 201
    batch = {"jobs": [{"id": fresh, "type": "a.b", "args": []}, body]}
    assert_error(await client.post("/ojs/v1/jobs/batch", json=batch), 409, "duplicate")
    assert_error(await client.get(f"/ojs/v1/jobs/{fresh}"), 404, "not_found")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 1


async def test_batch_repeating_an_id_writes_nothing(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    job_id = client_job_id(clock.now_ms())
    batch = {"jobs": [{"id": job_id, "type": "a.b", "args": []}] * 2}
    assert_error(await client.post("/ojs/v1/jobs/batch", json=batch), 409, "duplicate")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize("body", [{"jobs": []}, {"jobs": "x"}, {}])
async def test_empty_or_malformed_batch_is_400(client: httpx.AsyncClient, body: object) -> None:
    assert_error(await client.post("/ojs/v1/jobs/batch", json=body), 400, "invalid_request")


# --- routing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/nowhere", "/ojs/v1/nothing-here", "/ojs/v2/jobs", "/ojs/v1/jobs/a/b/c"]
)
async def test_unknown_route_is_404_with_an_ojs_body(client: httpx.AsyncClient, path: str) -> None:
    assert_error(await client.get(path), 404, "not_found")
    assert_error(await client.post(path, json={}), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/ojs/v1/jobs"),
        ("GET", "/ojs/v1/jobs"),
        ("PATCH", f"/ojs/v1/jobs/{UNKNOWN_ID}"),
        ("GET", "/ojs/v1/workers/fetch"),
        ("DELETE", "/ojs/v1/workers/ack"),
        ("PUT", "/ojs/v1/dead-letter/stats"),
        ("POST", "/ojs/v1/health"),
    ],
)
async def test_wrong_method_is_405_with_an_ojs_body(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    response = await client.request(method, path)
    error = assert_error(response, 405, response.json()["error"]["code"])
    assert error["retryable"] is False


async def test_error_responses_carry_protocol_headers(client: httpx.AsyncClient) -> None:
    response = await client.get(f"/ojs/v1/jobs/{UNKNOWN_ID}", headers={"X-Request-Id": "req-1"})
    assert_error(response, 404, "not_found")
    assert response.headers["ojs-version"] == "1.0"
    assert response.headers["x-request-id"] == "req-1"
    assert response.json()["error"]["request_id"] == "req-1"


async def test_unsupported_ojs_version_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/ojs/v1/jobs", json={"type": "a.b", "args": []}, headers={"OJS-Version": "2.0"}
    )
    assert_error(response, 422, "unsupported")


async def test_bad_tenant_header_is_400(client: httpx.AsyncClient, service: Service) -> None:
    response = await client.post(
        "/ojs/v1/jobs", json={"type": "a.b", "args": []}, headers={"X-OJS-Tenant": "-bad tenant"}
    )
    assert_error(response, 400, "invalid_request")
    mismatch = await client.post(
        "/ojs/v1/jobs",
        json={"type": "a.b", "args": [], "meta": {"tenant_id": "other"}},
        headers={"X-OJS-Tenant": "acme"},
    )
    assert_error(mismatch, 400, "invalid_request")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=abc", "offset=-1", "cursor=%%%", "since=yesterday", "queue=Bad!"]
)
async def test_bad_dead_letter_list_query_is_400(client: httpx.AsyncClient, query: str) -> None:
    assert_error(await client.get(f"/ojs/v1/dead-letter?{query}"), 400, "invalid_request")


async def test_bad_cron_is_400(client: httpx.AsyncClient) -> None:
    template = {"type": "a.b", "args": []}
    for body in (
        {"name": "c1", "expression": "every minute please", "job_template": template},
        {"name": "c2", "expression": "99 25 32 13 8", "job_template": template},
        {
            "name": "c3",
            "expression": "* * * * *",
            "timezone": "Mars/Olympus",
            "job_template": template,
        },
        {"name": "c4", "expression": "* * * * *", "job_template": {"type": "Bad Type", "args": []}},
        {
            "name": "c5",
            "expression": "* * * * *",
            "overlap_policy": "maybe",
            "job_template": template,
        },
    ):
        assert_error(await client.post("/ojs/v1/cron", json=body), 400, "invalid_request")
    assert (await client.get("/ojs/v1/cron")).json()["crons"] == []


async def test_bulk_actions_without_confirm_are_400(client: httpx.AsyncClient) -> None:
    job_id = await kill_job(client)
    for method, path in (
        ("POST", "/ojs/v1/dead-letter/retry"),
        ("POST", "/ojs/v1/admin/dead-letter/retry"),
        ("POST", "/ojs/v1/admin/jobs/bulk/retry"),
        ("DELETE", "/ojs/v1/dead-letter"),
    ):
        assert_error(await client.request(method, path), 400, "invalid_request")
        response = await client.request(method, path, json={"filter": {}, "confirm": False})
        assert_error(response, 400, "invalid_request")
    listed = (await client.get("/ojs/v1/dead-letter")).json()["jobs"]
    assert [item["id"] for item in listed] == [job_id]


# --- raw surrogate bytes and out-of-range cursors -----------------------------------------------

# A lone surrogate encoded straight into the bytes (not as a \u escape): not UTF-8 at all.
RAW_SURROGATE = b"\xed\xa0\x80"


async def test_raw_surrogate_bytes_in_enqueue_args_are_refused(
    client: httpx.AsyncClient, service: Service
) -> None:
    raw = b'{"type": "a.b", "args": ["x' + RAW_SURROGATE + b'y"]}'
    error = assert_error(await post_raw(client, "/ojs/v1/jobs", raw), 400, "invalid_payload")
    assert error["type"] == "validation_error"
    assert error["retryable"] is False
    assert "UTF-8" in error["message"]
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jobs": [{"type": "a.b", "args": []}, {"type": "a.b", "args": ["'
        + RAW_SURROGATE
        + b'"]}]}',
        b'{"jobs": [{"type": "a.b", "args": [], "meta": {"k' + RAW_SURROGATE + b'": 1}}]}',
    ],
    ids=["in-args", "in-meta-key"],
)
async def test_raw_surrogate_bytes_in_an_enqueue_batch_are_refused(
    client: httpx.AsyncClient, service: Service, raw: bytes
) -> None:
    assert_error(await post_raw(client, "/ojs/v1/jobs/batch", raw), 400, "invalid_payload")
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_raw_surrogate_bytes_in_a_nack_message_change_nothing(
    client: httpx.AsyncClient,
) -> None:
    job = await enqueue(client, queue="surrogate", retry=retry_policy(3))
    leased = await fetch_one(client, "surrogate")
    raw = (
        b'{"job_id": "' + job["id"].encode() + b'", "error": {"code": "handler_error", '
        b'"message": "broke ' + RAW_SURROGATE + b'"}}'
    )
    for path in ("/ojs/v1/workers/nack", "/ojs/v1/workers/nack/batch"):
        body = raw if path.endswith("nack") else b'{"nacks": [' + raw + b"]}"
        assert_error(await post_raw(client, path, body), 400, "invalid_payload")
        after = await get_job(client, job["id"])
        assert after["state"] == "active"
        assert after["attempt"] == 1
        assert after["errors"] == []
        assert "error" not in after
        assert after["lease_token"] == leased["lease_token"]
    done = await nack(client, job["id"], message="broke properly")
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "retryable"
    stored = await get_job(client, job["id"])
    assert [entry["message"] for entry in stored["errors"]] == ["broke properly"]


async def test_raw_surrogate_bytes_in_an_ack_batch_are_refused(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, queue="surrogate-ack")
    await fetch_one(client, "surrogate-ack")
    raw = b'{"acks": [{"job_id": "' + job["id"].encode() + b'", "result": "' + RAW_SURROGATE
    raw += b'"}]}'
    assert_error(await post_raw(client, "/ojs/v1/workers/ack/batch", raw), 400, "invalid_payload")
    assert (await get_job(client, job["id"]))["state"] == "active"


async def test_escaped_lone_surrogate_in_a_utf16_body_is_refused(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The escape check must look at the text, not at the bytes: UTF-16 spells `\\u` apart."""
    raw = '{"type": "a.b", "args": ["\\ud800"]}'.encode("utf-16")
    response = await post_raw(client, "/ojs/v1/jobs", raw)
    assert_error(response, 400, response.json()["error"]["code"])
    assert await count_rows(service, "SELECT COUNT(*) FROM jobs") == 0


async def test_well_formed_non_ascii_text_is_stored_exactly(client: httpx.AsyncClient) -> None:
    args = ["é", "日本", "😀", "\U0001f600 by escape"]
    raw = b'{"type": "a.b", "args": ["\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80", '
    raw += b'"\\ud83d\\ude00 by escape"]}'
    response = await post_raw(client, "/ojs/v1/jobs", raw)
    assert response.status_code == 201, response.text
    assert (await get_job(client, response.json()["job"]["id"]))["args"] == args


def cursor_of(text: str) -> str:
    """A cursor spelled the way this server spells them, around any text."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "text",
    [
        "99999999999999999999999:abc",
        "-99999999999999999999999:abc",
        f"{2**63}:abc",
        "-1:abc",
        "1_000:abc",
        "12:",
        "12",
        ":abc",
        "12:a\x00b",
    ],
    ids=[
        "beyond-64-bits", "below-64-bits", "just-beyond", "negative", "underscored",
        "empty-id", "no-id", "no-moment", "nul-in-id",
    ],
)  # fmt: skip
async def test_dead_letter_cursor_out_of_range_is_400(client: httpx.AsyncClient, text: str) -> None:
    response = await client.get("/ojs/v1/dead-letter", params={"cursor": cursor_of(text)})
    error = assert_error(response, 400, "invalid_request")
    assert error["message"] == "cursor is not one this server issued"
    assert error["details"]["field"] == "cursor"


async def test_dead_letter_cursor_at_the_edge_of_the_range_is_accepted(
    client: httpx.AsyncClient,
) -> None:
    first = await kill_job(client, queue="edge")
    second = await kill_job(client, queue="edge")
    cursor = cursor_of(f"{2**63 - 1}:{UNKNOWN_ID}")
    response = await client.get("/ojs/v1/dead-letter", params={"cursor": cursor, "limit": 10})
    assert response.status_code == 200, response.text
    assert {item["id"] for item in response.json()["jobs"]} == {first, second}
