"""Worker protocol routes: fetch, ack, nack, heartbeat."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api.http import ojs, read_json, tenant_of
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import job_document, timestamp
from redrive.domain.job import Job

router = APIRouter(prefix="/ojs/v1/workers", tags=["workers"])


def _outcome(job: Job) -> dict[str, Any]:
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
    body["job"] = job_document(job)
    return body


@router.post("/fetch", summary="Claim available jobs with a lease")
async def fetch(request: Request) -> Response:
    jobs = await service_of(request).workers.fetch(await read_json(request), tenant_of(request))
    return ojs({"jobs": [job_document(job) for job in jobs]})


@router.post("/ack", summary="Acknowledge a job as completed")
async def ack(request: Request) -> Response:
    job = await service_of(request).workers.ack(await read_json(request), tenant_of(request))
    return ojs({"acknowledged": True, **_outcome(job)})


@router.post("/nack", summary="Report a failed attempt")
async def nack(request: Request) -> Response:
    job = await service_of(request).workers.nack(await read_json(request), tenant_of(request))
    return ojs(_outcome(job))


@router.post("/heartbeat", summary="Extend leases and receive a directive")
async def heartbeat(request: Request) -> Response:
    beat = await service_of(request).workers.heartbeat(
        await read_json(request, required=False) or {}, tenant_of(request)
    )
    return ojs(
        {
            "state": beat.state,
            "directive": "" if beat.state == "running" else beat.state,
            "jobs_extended": beat.extended,
            "jobs_lost": beat.lost,
            "server_time": timestamp(beat.server_time),
        }
    )
