"""Dead-letter routes, served under both /ojs/v1/dead-letter and /ojs/v1/admin/dead-letter.

The two families share every handler; they differ only where the suites read different shapes:
list paging (limit/offset/cursor and `jobs` vs page/per_page and `items`) and delete (200 with a
body vs 204).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.dead_letter_requests import (
    KEYSET_PAGING,
    NUMBERED_PAGING,
    bulk_request,
    dry_run_query,
    list_filter,
    purge_request,
    retry_request,
)
from redrive.api.http import OJS_MEDIA_TYPE, located, ojs, read_json
from redrive.api.query import limit_page, numbered_page
from redrive.api.routes_jobs import service_of
from redrive.api.routes_redrives import task_document, task_location
from redrive.api.serialise import (
    dead_letter_document,
    dead_letter_stats_document,
    episode_document,
    job_document,
    timestamp,
    upcast_document,
)
from redrive.domain.cursor import encode_cursor
from redrive.domain.redrive import RedriveTask
from redrive.ports import Page
from redrive.service.dead_letters import BulkResult

DATA_PLANE = "/ojs/v1/dead-letter"
ADMIN = "/ojs/v1/admin/dead-letter"


def bulk_document(result: BulkResult) -> dict[str, Any]:
    body: dict[str, Any] = {
        "action": result.action,
        "matched": result.matched,
        "succeeded": result.succeeded,
        "failed": result.failed,
        "errors": result.errors,
        "queues": result.queues,
        "dry_run": result.dry_run,
    }
    if result.dry_run:
        body["sample"] = result.sample
        if result.action == "retry":
            body["upcasts"] = [upcast_document(item) for item in result.upcasts if item.changed]
    key = "retried" if result.action == "retry" else "purged"
    body[key] = result.succeeded
    if result.action == "purge" and not result.dry_run:
        body["held"] = result.held  # matching dead letters legal holds kept
    return body


def paced_document(task: RedriveTask) -> Response:
    """A bulk retry larger than a burst: 202, the task, and where to follow it."""
    body = {
        "action": "retry",
        "paced": True,
        "matched": task.to_move,
        "retried": 0,
        "queues": list(task.queues),
        "task": task_document(task),
        "follow": task_location(task),
    }
    return located(body, 202, task_location(task))


async def list_page_numbered(request: Request) -> Response:
    """The admin form: `items` with page/per_page."""
    service = service_of(request)
    filters = list_filter(request, service.now(), NUMBERED_PAGING)
    page_number, per_page = numbered_page(request)
    page = Page(limit=per_page, offset=(page_number - 1) * per_page)
    items, total = await service.dead_letters.search(caller_of(request), filters, page)
    pagination = {"total": total, "page": page_number, "per_page": per_page}
    return ojs({"items": [dead_letter_document(dead) for dead in items], "pagination": pagination})


async def list_keyset(request: Request) -> Response:
    """The data-plane form: `jobs` with limit/offset, or a cursor that stays fast at any depth."""
    service = service_of(request)
    filters = list_filter(request, service.now(), KEYSET_PAGING)
    page = limit_page(request)
    items, total = await service.dead_letters.search(caller_of(request), filters, page)
    has_more = len(items) == page.limit and (
        page.cursor_at is not None or page.offset + len(items) < total
    )
    pagination: dict[str, Any] = {
        "total": total,
        "limit": page.limit,
        "offset": page.offset,
        "has_more": has_more,
    }
    if has_more and items:
        pagination["next_cursor"] = encode_cursor(items[-1].discarded_at, items[-1].id)
    return ojs({"jobs": [dead_letter_document(dead) for dead in items], "pagination": pagination})


def build_router(prefix: str) -> APIRouter:
    admin = prefix == ADMIN
    router = APIRouter(prefix=prefix, tags=["dead-letter"])

    @router.get(
        "",
        summary="List dead letters",
        openapi_extra=openapi.dead_letter_list(NUMBERED_PAGING if admin else KEYSET_PAGING),
        responses=openapi.outcomes(400),
    )
    async def list_dead_letters(request: Request) -> Response:
        return await (list_page_numbered(request) if admin else list_keyset(request))

    @router.get(
        "/stats",
        summary="Dead-letter statistics",
        responses=openapi.outcomes(400),
    )
    async def stats(request: Request) -> Response:
        service = service_of(request)
        body = dead_letter_stats_document(await service.dead_letters.stats(caller_of(request)))
        policies = await service.retention.policies(caller_of(request))
        body["retention"] = {
            **policies.global_policy.to_document(),
            "next_prune_at": timestamp(service.retention.next_prune_at()),
            "queues": {queue: policy.to_document() for queue, policy in policies.queues.items()},
            "floor_holding": await service.retention.floor_holding(caller_of(request)),
        }
        return ojs(body)

    @router.post(
        "/retry",
        summary="Retry every dead letter matching a filter",
        description="Needs a filter, and a root cause with a fix reference for every incident "
        "it touches (409 root_cause_required names those that lack one). Up to a minute's worth "
        "of the default redrive rate (100) moves within the request; a larger set starts a paced "
        "redrive task and answers 202 with it. Each job is requeued upcast to its type's current "
        "schema version; when one match would not upcast, nothing moves (422). A dry run lists "
        "the sample's `upcasts` (the changes each would get) and, in `errors`, matches whose "
        "upcast fails.",
        openapi_extra=openapi.body("BulkRequest", required=False),
        responses={**openapi.outcomes(400, 409, 422), 202: openapi.success(202, OJS_MEDIA_TYPE)},
    )
    async def bulk_retry(request: Request) -> Response:
        service = service_of(request)
        bulk = bulk_request(await read_json(request, required=False), service.now())
        result = await service.redrives.bulk_retry(caller_of(request), bulk)
        if isinstance(result, RedriveTask):
            return paced_document(result)
        return ojs(bulk_document(result))

    @router.delete(
        "",
        summary="Purge every dead letter matching a filter",
        description="The filter and the flags come from the query string, the body, or both "
        "(a key given in both is refused)",
        openapi_extra=openapi.purge(),
        responses=openapi.outcomes(400),
    )
    async def purge(request: Request) -> Response:
        service = service_of(request)
        bulk = purge_request(request, await read_json(request, required=False), service.now())
        return ojs(bulk_document(await service.dead_letters.purge(caller_of(request), bulk)))

    @router.get(
        "/{job_id}",
        summary="Get one dead letter",
        responses=openapi.outcomes(400, 404),
    )
    async def get_dead_letter(job_id: str, request: Request) -> Response:
        dead, history = await service_of(request).dead_letters.get(caller_of(request), job_id)
        document = dead_letter_document(dead)
        document["episodes"] = [episode_document(episode) for episode in history]
        return ojs({"job": document})

    @router.post(
        "/{job_id}/retry",
        summary="Retry one dead letter, optionally modified, with an optional reason",
        description="Requeues the job upcast to its type's current schema version (422 when an "
        "upcaster fails or a step is missing: the dead letter stays dead). `?dry_run=true` "
        "answers the job it would requeue and the upcast's changes, moving nothing. A poison "
        "pill's retry is refused (409 poison_pill) unless an admin sends force: true with a "
        "reason; with REDRIVE_STRICT_REDRIVE its incident needs a root cause.",
        openapi_extra={
            **openapi.body("RetryRequest", required=False),
            **openapi.query([openapi.parameter("dry_run", {"type": "boolean", "default": False})]),
        },
        responses=openapi.outcomes(400, 403, 404, 409, 422),
    )
    async def retry(job_id: str, request: Request) -> Response:
        override, intent = retry_request(await read_json(request, required=False))
        dead_letters = service_of(request).dead_letters
        if dry_run_query(request):
            preview = await dead_letters.retry_preview(caller_of(request), job_id, override)
            would_be = {"job": job_document(preview.after), "upcast": upcast_document(preview)}
            return ojs({"dry_run": True, **would_be})
        job = await dead_letters.retry(caller_of(request), job_id, override, intent)
        document = job_document(job)
        document["re_enqueued_at"] = timestamp(job.enqueued_at)
        return ojs({"job": document})

    @router.delete(
        "/{job_id}",
        summary="Delete one dead letter",
        status_code=204 if admin else 200,
        responses=openapi.outcomes(400, 404, ok=204 if admin else 200),
    )
    async def delete(job_id: str, request: Request) -> Response:
        await service_of(request).dead_letters.delete(caller_of(request), job_id)
        if admin:
            return Response(status_code=204)
        return ojs({"deleted": True, "job_id": job_id})

    return router


routers = [build_router(DATA_PLANE), build_router(ADMIN)]
