"""A job's whole life through the HTTP edge, on each store."""

from __future__ import annotations

import httpx
import pytest

from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_enqueue_fetch_fail_dead_letter_retry(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    created = await client.post(
        "/ojs/v1/jobs",
        json={
            "type": "email.send",
            "args": [1],
            "options": {"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}},
        },
    )
    assert created.status_code == 201
    job_id = created.json()["job"]["id"]
    fetched = await client.post("/ojs/v1/workers/fetch", json={"queues": ["default"]})
    assert [job["id"] for job in fetched.json()["jobs"]] == [job_id]
    failed = await client.post(
        "/ojs/v1/workers/nack", json={"job_id": job_id, "error": {"code": "boom", "message": "no"}}
    )
    assert failed.json()["state"] == "discarded"
    listed = await client.get("/ojs/v1/dead-letter")
    assert [job["id"] for job in listed.json()["jobs"]] == [job_id]
    retried = await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert retried.json()["job"]["state"] == "available"
    assert retried.json()["job"]["errors"][0]["code"] == "boom"
