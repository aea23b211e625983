"""Admin routes: server and tenant stats, queues, jobs, workers, and the test-only reset."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_for_tenant, caller_of
from redrive.api.dead_letter_requests import bulk_request, query_values
from redrive.api.http import OJS_MEDIA_TYPE, ojs, read_json, refuse_unknown
from redrive.api.query import numbered_page
from redrive.api.routes_dead_letters import bulk_document, paced_document
from redrive.api.routes_jobs import service_of
from redrive.api.routes_queues import pause_document, status_word
from redrive.api.serialise import job_document, worker_document
from redrive.domain.dead_letter import RetryOverride
from redrive.domain.envelope import validate_queue_name
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.job import STATES
from redrive.domain.redrive import RedriveTask
from redrive.ports import JobFilter
from redrive.service.queues import QueueSummary

router = APIRouter(prefix="/ojs/v1/admin", tags=["admin"])
STALE_AFTER_MS = 60_000


def _page(items: list[Any], request: Request) -> tuple[list[Any], dict[str, int]]:
    page, per_page = numbered_page(request)
    start = (page - 1) * per_page
    return items[start : start + per_page], {
        "total": len(items),
        "page": page,
        "per_page": per_page,
    }


@router.get(
    "/stats",
    summary="Server-wide job counts and throughput",
    responses=openapi.outcomes(400),
)
async def stats(request: Request) -> Response:
    return ojs(await service_of(request).queues.totals(caller_of(request)))


def _queue_item(queue: QueueSummary) -> dict[str, Any]:
    return {
        "name": queue.name,
        "state": status_word(queue),
        "paused": queue.paused,
        "counts": queue.counts,
    }


@router.get(
    "/queues",
    summary="Queues with per-state counts",
    openapi_extra=openapi.numbered_pages(),
    responses=openapi.outcomes(400),
)
async def queues(request: Request) -> Response:
    overview = await service_of(request).queues.overview(caller_of(request))
    items, pagination = _page([_queue_item(queue) for queue in overview], request)
    return ojs({"items": items, "pagination": pagination})


@router.get(
    "/queues/{name}",
    summary="One queue with per-state counts",
    responses=openapi.outcomes(400),
)
async def queue(name: str, request: Request) -> Response:
    found = await service_of(request).queues.get(caller_of(request), name)
    return ojs({**_queue_item(found), "configuration": {}})


@router.post(
    "/queues/{name}/pause",
    summary="Pause a queue",
    responses=openapi.outcomes(400),
)
async def pause(name: str, request: Request) -> Response:
    found = await service_of(request).queues.set_paused(caller_of(request), name, True)
    return ojs(pause_document(found))


@router.post(
    "/queues/{name}/resume",
    summary="Resume a queue",
    responses=openapi.outcomes(400),
)
async def resume(name: str, request: Request) -> Response:
    found = await service_of(request).queues.set_paused(caller_of(request), name, False)
    return ojs(pause_document(found))


JOB_SEARCH_KEYS = ("queue", "state", "type", "page", "per_page")


def job_filter(request: Request) -> JobFilter:
    """The job search's filter; unknown parameters are refused."""
    query = query_values(request)
    refuse_unknown(query, JOB_SEARCH_KEYS, "query parameter")
    state = query.get("state") or None
    if state is not None and state not in STATES:
        raise InvalidRequest(f"state must be one of {', '.join(STATES)}", {"field": "state"})
    queue = query.get("queue") or None
    return JobFilter(
        queue=validate_queue_name(queue, "queue") if queue is not None else None,
        state=state,
        type=query.get("type") or None,
    )


@router.get(
    "/jobs",
    summary="Search jobs",
    openapi_extra=openapi.job_search(JOB_SEARCH_KEYS),
    responses=openapi.outcomes(400),
)
async def jobs(request: Request) -> Response:
    page, per_page = numbered_page(request)
    found, total = await service_of(request).jobs.list(
        caller_of(request), job_filter(request), per_page, (page - 1) * per_page
    )
    pagination = {"total": total, "page": page, "per_page": per_page}
    return ojs({"items": [job_document(job) for job in found], "pagination": pagination})


@router.post(
    "/jobs/bulk/{action}",
    summary="Bulk retry or purge of dead-lettered jobs",
    description="`action` is retry, or delete (purge is another name for it); a retry needs a "
    "filter and a root cause with a fix reference for every incident it touches",
    openapi_extra=openapi.body("BulkRequest", required=False),
    responses={**openapi.outcomes(400, 409, 422), 202: openapi.success(202, OJS_MEDIA_TYPE)},
)
async def bulk(action: str, request: Request) -> Response:
    if action not in ("retry", "delete", "purge"):
        raise InvalidRequest(
            f"unknown bulk action {action!r}; use retry or delete", {"field": "action"}
        )
    service = service_of(request)
    body = bulk_request(await read_json(request, required=False), service.now())
    if action != "retry":
        return ojs(bulk_document(await service.dead_letters.purge(caller_of(request), body)))
    result = await service.redrives.bulk_retry(caller_of(request), body)
    if isinstance(result, RedriveTask):
        return paced_document(result)
    return ojs(bulk_document(result))


@router.get(
    "/jobs/{job_id}",
    summary="Job detail (flat)",
    responses=openapi.outcomes(400, 404),
)
async def job(job_id: str, request: Request) -> Response:
    return ojs(job_document(await service_of(request).jobs.get(caller_of(request), job_id)))


@router.post(
    "/jobs/{job_id}/cancel",
    summary="Cancel a job",
    responses=openapi.outcomes(400, 404, 409),
)
async def cancel(job_id: str, request: Request) -> Response:
    cancelled, previous = await service_of(request).jobs.cancel(caller_of(request), job_id)
    return ojs({**job_document(cancelled), "previous_state": previous})


@router.post(
    "/jobs/{job_id}/retry",
    summary="Retry a dead-lettered job",
    responses=openapi.outcomes(400, 404),
)
async def retry(job_id: str, request: Request) -> Response:
    job = await service_of(request).dead_letters.retry(caller_of(request), job_id, RetryOverride())
    return ojs(job_document(job))


@router.get(
    "/workers",
    summary="Workers seen recently",
    openapi_extra=openapi.numbered_pages(),
    responses=openapi.outcomes(400),
)
async def workers(request: Request) -> Response:
    service = service_of(request)
    now = service.now()
    documents = [
        worker_document(worker, now, STALE_AFTER_MS)
        for worker in await service.workers.list(caller_of(request))
    ]
    summary = {"total": len(documents)}
    for state in ("running", "quiet", "terminate", "stale"):
        summary[state] = sum(1 for document in documents if document["state"] == state)
    items, pagination = _page(documents, request)
    return ojs({"items": items, "summary": summary, "pagination": pagination})


@router.post(
    "/workers/{worker_id}/{directive}",
    summary="Tell a worker to go quiet or terminate",
    description="`directive` is quiet, terminate or resume",
    responses=openapi.outcomes(404),
)
async def direct_worker(worker_id: str, directive: str, request: Request) -> Response:
    if directive not in ("quiet", "terminate", "resume"):
        raise NotFound("worker action", directive)
    await service_of(request).workers.set_directive(
        caller_of(request), worker_id, None if directive == "resume" else directive
    )
    return ojs({"id": worker_id, "directive": "" if directive == "resume" else directive})


@router.get(
    "/tenants/{tenant_id}/stats",
    summary="Job counts of one tenant",
    responses=openapi.outcomes(400),
)
async def tenant_stats(tenant_id: str, request: Request) -> Response:
    totals = await service_of(request).queues.totals(caller_for_tenant(request, tenant_id))
    return ojs({"tenant_id": tenant_id, "total_jobs": totals["total_jobs"], "jobs": totals["jobs"],
                "throughput": totals["throughput"]})  # fmt: skip


@router.post(
    "/reset",
    summary="Wipe all state (test hook; only with REDRIVE_TEST_HOOKS=1)",
    responses=openapi.outcomes(404),
)
async def reset(request: Request) -> Response:
    service = service_of(request)
    if not service.test_hooks:
        raise NotFound("route", "/ojs/v1/admin/reset")
    await service.reset()
    return ojs({"reset": True})
