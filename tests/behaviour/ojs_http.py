"""Small HTTP helpers the behavioural tests share: enqueue, fetch, ack, nack and error checks."""

from __future__ import annotations

import random
from typing import Any

import httpx
import psycopg

from redrive.domain.caller import Caller
from redrive.domain.identifiers import uuid7
from redrive.domain.incident import IncidentQuery
from redrive.domain.root_cause import parse_root_cause
from redrive.service.facade import Service
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore

OJS_MEDIA_TYPE = "application/openjobspec+json"
_ids = random.Random(20260301)


def client_job_id(now_ms: int) -> str:
    """A fresh lowercase UUIDv7, as a client that picks its own job ids would send."""
    return uuid7(now_ms, _ids.getrandbits(74))


def forbid_server_errors(client: httpx.AsyncClient) -> None:
    """Make every request of this client fail the test if the server answers 5xx."""

    async def check(response: httpx.Response) -> None:
        if response.status_code >= 500:
            await response.aread()
            raise AssertionError(
                f"{response.request.method} {response.request.url} answered "
                f"{response.status_code}: {response.text}"
            )

    client.event_hooks["response"].append(check)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is an OJS error with this status and code; returns the `error` object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == OJS_MEDIA_TYPE
    error = response.json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["retryable"], bool)
    assert isinstance(error["hint"], str)
    assert error["hint"]
    assert isinstance(error["docs_url"], str)
    assert error["docs_url"]
    return dict(error)


def retry_policy(
    max_attempts: int = 3, on_exhaustion: str = "discard", **more: Any
) -> dict[str, Any]:
    return {"max_attempts": max_attempts, "on_exhaustion": on_exhaustion, **more}


async def enqueue(
    client: httpx.AsyncClient,
    job_type: str = "test.job",
    args: list[Any] | None = None,
    headers: dict[str, str] | None = None,
    meta: dict[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """POST one job and return its document (asserts 201)."""
    body: dict[str, Any] = {"type": job_type, "args": [] if args is None else args}
    if meta is not None:
        body["meta"] = meta
    if options:
        body["options"] = options
    response = await client.post("/ojs/v1/jobs", json=body, headers=headers)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


async def fetch(
    client: httpx.AsyncClient,
    queues: list[str],
    count: int | None = None,
    worker_id: str | None = None,
    headers: dict[str, str] | None = None,
    visibility_timeout_ms: int | None = None,
) -> list[dict[str, Any]]:
    """Claim jobs and return them (asserts 200)."""
    body: dict[str, Any] = {"queues": queues}
    if count is not None:
        body["count"] = count
    if worker_id is not None:
        body["worker_id"] = worker_id
    if visibility_timeout_ms is not None:
        body["visibility_timeout_ms"] = visibility_timeout_ms
    response = await client.post("/ojs/v1/workers/fetch", json=body, headers=headers)
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs


async def fetch_one(client: httpx.AsyncClient, queue: str, **more: Any) -> dict[str, Any]:
    jobs = await fetch(client, [queue], **more)
    assert len(jobs) == 1, jobs
    return jobs[0]


async def ack(client: httpx.AsyncClient, job_id: str, **more: Any) -> httpx.Response:
    return await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, **more})


async def nack(
    client: httpx.AsyncClient,
    job_id: str,
    code: str = "handler_error",
    message: str = "it failed",
    headers: dict[str, str] | None = None,
    **more: Any,
) -> httpx.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    for key in ("type", "retryable", "details"):
        if key in more:
            error[key] = more.pop(key)
    return await client.post(
        "/ojs/v1/workers/nack", json={"job_id": job_id, "error": error, **more}, headers=headers
    )


async def get_job(
    client: httpx.AsyncClient, job_id: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = await client.get(f"/ojs/v1/jobs/{job_id}", headers=headers)
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


async def state_of(
    client: httpx.AsyncClient, job_id: str, headers: dict[str, str] | None = None
) -> str:
    return str((await get_job(client, job_id, headers))["state"])


async def kill_job(
    client: httpx.AsyncClient,
    queue: str = "dlq",
    job_type: str = "test.dead",
    error_type: str = "Boom",
    args: list[Any] | None = None,
    headers: dict[str, str] | None = None,
) -> str:
    """Enqueue a one-attempt dead_letter job, fail it once, and return its id (now dead)."""
    job = await enqueue(
        client, job_type, args, headers=headers, queue=queue,
        retry=retry_policy(1, "dead_letter"),
    )  # fmt: skip
    fetched = await fetch(client, [queue], headers=headers)
    assert [item["id"] for item in fetched] == [job["id"]]
    failed = await nack(
        client, job["id"], type=error_type, message=f"{error_type} happened", headers=headers
    )
    assert failed.status_code == 200, failed.text
    assert failed.json()["state"] == "discarded"
    return str(job["id"])


# The events the outbox keeps: a row keeping a run of alike events (`members`) is `size` of them.
COUNT_EVENTS = "SELECT COALESCE(SUM(COALESCE(size, 1)), 0) FROM events"


async def count_rows(service: Service, sql: str) -> int:
    """Run a COUNT(*) query straight on the store's database, bypassing the service."""
    store = service.runtime.store
    if isinstance(store, SqliteStore):
        return int(await store.call(lambda: store.connection.execute(sql).fetchone()[0]))
    assert isinstance(store, PostgresStore)
    # As the tables' owner: the pool's connections are bound by row-level security.
    async with await psycopg.AsyncConnection.connect(store.url) as connection:
        cursor = await connection.execute(sql)
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


ROOT_CAUSE = {"category": "infrastructure", "root_cause": "the relay was down",
              "fix_reference": "PR #1"}  # fmt: skip


async def explain_incidents(
    client: httpx.AsyncClient, headers: dict[str, str] | None = None
) -> list[str]:
    """Record a root cause with a fix reference for every incident of the tenant (the redrive
    policy asks it of a bulk retry); their ids."""
    response = await client.get("/ojs/v1/admin/incidents", params={"limit": "500"}, headers=headers)
    assert response.status_code == 200, response.text
    ids = [str(item["id"]) for item in response.json()["incidents"]]
    for incident_id in ids:
        written = await client.put(
            f"/ojs/v1/admin/incidents/{incident_id}/root-cause", json=ROOT_CAUSE, headers=headers
        )
        assert written.status_code == 200, written.text
    return ids


async def explain_all(service: Service, caller: Caller) -> list[str]:
    """The same through the service, for tests that call it directly."""
    ids = [incident.id for incident in await service.incidents.search(
        caller, IncidentQuery(limit=500))]  # fmt: skip
    written = parse_root_cause(ROOT_CAUSE)
    for incident_id in ids:
        await service.incidents.record_root_cause(caller, incident_id, written)
    return ids
