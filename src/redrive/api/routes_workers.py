"""Worker protocol routes: fetch, ack, nack (one or a batch), heartbeat."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.errors import error_body, status_of
from redrive.api.http import ojs, read_json
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import job_document, timestamp
from redrive.api.worker_requests import (
    ack_request,
    batch_items,
    each_parsed,
    fetch_request,
    heartbeat_request,
    nack_request,
)
from redrive.domain.errors import InvalidRequest, OjsError
from redrive.domain.job import Job
from redrive.domain.lifecycle import Completed

router = APIRouter(prefix="/ojs/v1/workers", tags=["workers"])
# The worker protocol's routes under the job's own path (the OJS job-versioning suite acks so).
job_router = APIRouter(prefix="/ojs/v1/jobs", tags=["workers"])


def _outcome(job: Job, with_document: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": job.id,
        "job_id": job.id,
        "state": job.state,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
    }
    optional = {
        "next_attempt_at": timestamp(job.next_attempt_at) if job.state == "retryable" else None,
        "retry_delay_ms": job.retry_delay_ms if job.state == "retryable" else None,
        "discarded_at": timestamp(job.discarded_at),
        "completed_at": timestamp(job.completed_at),
        "dead_letter": True if job.dead_lettered else None,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    if with_document:
        body["job"] = job_document(job)
    return body


@router.post(
    "/fetch",
    summary="Claim available jobs with a lease",
    openapi_extra=openapi.body("FetchRequest"),
    responses=openapi.outcomes(400),
)
async def fetch(request: Request) -> Response:
    claim = fetch_request(await read_json(request))
    # A long poll stops claiming once its worker has hung up (`is_disconnected`).
    abandoned = request.is_disconnected if claim.wait_ms else None
    jobs = await service_of(request).workers.fetch(caller_of(request), claim, abandoned)
    return ojs({"jobs": [job_document(job) for job in jobs]})


def _acknowledged(done: Completed) -> dict[str, Any]:
    """An ack's entry in a batch answer: what `_outcome` gives of the completed job."""
    return {
        "acknowledged": True, "id": done.id, "job_id": done.id, "state": done.state,
        "attempt": done.attempt, "max_attempts": done.max_attempts,
        "completed_at": timestamp(done.completed_at),
    }  # fmt: skip


def _batch_results(outcomes: Sequence[Job | Completed | OjsError], request: Request) -> Response:
    """One entry per request, in order: the outcome, or the OJS error (with its HTTP status)."""
    request_id = getattr(request.state, "request_id", "")
    results: list[dict[str, Any]] = []
    for outcome in outcomes:
        if isinstance(outcome, OjsError):
            error = error_body(
                outcome.code, outcome.message, outcome.error_type, outcome.retryable,
                outcome.details, request_id, outcome.hint,
            )  # fmt: skip
            results.append({"ok": False, "status": status_of(outcome), **error})
        elif isinstance(outcome, Completed):
            results.append({"ok": True, **_acknowledged(outcome)})
        else:
            # No job document per entry: a batch answer stays small (GET the job for it).
            results.append({"ok": True, **_outcome(outcome, with_document=False)})
    succeeded = sum(1 for result in results if result["ok"])
    return ojs({"results": results, "succeeded": succeeded, "failed": len(results) - succeeded})


@router.post(
    "/ack/batch",
    summary="Acknowledge many jobs in one transaction (redrive extension)",
    description='Body `{"acks": [<ack request>, ...]}`. 200 with one result per ack, in order; '
    "each succeeds or is refused on its own (`ok`, and `error` with the status it would have had).",
    openapi_extra=openapi.body("AckBatch"),
    responses=openapi.outcomes(400),
)
async def ack_batch(request: Request) -> Response:
    acks = each_parsed(batch_items(await read_json(request), "acks"), ack_request)
    outcomes = await service_of(request).workers.ack_many(caller_of(request), acks)
    return _batch_results(outcomes, request)


@router.post(
    "/nack/batch",
    summary="Report many failed attempts in one transaction (redrive extension)",
    description='Body `{"nacks": [<nack request>, ...]}`. 200 with one result per nack, in order.',
    openapi_extra=openapi.body("NackBatch"),
    responses=openapi.outcomes(400),
)
async def nack_batch(request: Request) -> Response:
    nacks = each_parsed(batch_items(await read_json(request), "nacks"), nack_request)
    outcomes = await service_of(request).workers.nack_many(caller_of(request), nacks)
    return _batch_results(outcomes, request)


@router.post(
    "/ack",
    summary="Acknowledge a job as completed",
    openapi_extra=openapi.body("AckRequest"),
    responses=openapi.outcomes(400, 404, 409),
)
async def ack(request: Request) -> Response:
    ack_body = ack_request(await read_json(request))
    job = await service_of(request).workers.ack(caller_of(request), ack_body)
    return ojs({"acknowledged": True, **_outcome(job)})


@router.post(
    "/nack",
    summary="Report a failed attempt",
    openapi_extra=openapi.body("NackRequest"),
    responses=openapi.outcomes(400, 404, 409),
)
async def nack(request: Request) -> Response:
    nack_body = nack_request(await read_json(request))
    job = await service_of(request).workers.nack(caller_of(request), nack_body)
    return ojs(_outcome(job))


@router.post(
    "/heartbeat",
    summary="Extend leases and receive a directive",
    openapi_extra=openapi.body("HeartbeatRequest", required=False),
    responses=openapi.outcomes(400),
)
async def heartbeat(request: Request) -> Response:
    beat_body = heartbeat_request(await read_json(request, required=False) or {})
    beat = await service_of(request).workers.heartbeat(caller_of(request), beat_body)
    return ojs(
        {
            "state": beat.state,
            "directive": "" if beat.state == "running" else beat.state,
            "jobs_extended": beat.extended,
            "jobs_lost": beat.lost,
            "server_time": timestamp(beat.server_time),
        }
    )


@job_router.post(
    "/{job_id}/ack",
    summary="Acknowledge the job the path names as completed",
    openapi_extra=openapi.body("JobAckRequest", required=False),
    responses=openapi.outcomes(400, 404, 409),
)
async def ack_job(job_id: str, request: Request) -> Response:
    body = await read_json(request, required=False)
    body = {} if body is None else body
    if not isinstance(body, dict):
        raise InvalidRequest("the ack body must be a JSON object", {"field": "body"})
    if body.get("job_id", job_id) != job_id:
        raise InvalidRequest("job_id differs from the job the path names", {"field": "job_id"})
    ack_body = ack_request({**body, "job_id": job_id})
    job = await service_of(request).workers.ack(caller_of(request), ack_body)
    return ojs({"acknowledged": True, **_outcome(job)})
