"""Queue routes: list, detail with per-state counts, stats, pause and resume."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.http import ojs
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import timestamp
from redrive.domain.records import QueueRecord
from redrive.service.queues import QueueSummary

router = APIRouter(prefix="/ojs/v1/queues", tags=["queues"])


def status_word(queue: QueueSummary | QueueRecord) -> str:
    return "paused" if queue.paused else "active"


def pause_document(queue: QueueRecord) -> dict[str, Any]:
    body: dict[str, Any] = {"name": queue.name, "paused": queue.paused}
    if queue.paused:
        body["paused_at"] = timestamp(queue.paused_at)
    else:
        body["resumed_at"] = timestamp(queue.resumed_at)
    return body


@router.get("", summary="List queues", responses=openapi.outcomes(400))
async def list_queues(request: Request) -> Response:
    queues = await service_of(request).queues.overview(caller_of(request))
    items = [
        {"name": q.name, "status": status_word(q), "paused": q.paused,
         "created_at": timestamp(q.created_at)}
        for q in queues
    ]  # fmt: skip
    pagination = {"total": len(items), "limit": len(items), "offset": 0, "has_more": False}
    return ojs({"queues": items, "pagination": pagination})


@router.get(
    "/{name}",
    summary="One queue with its job counts",
    responses=openapi.outcomes(400),
)
async def get_queue(name: str, request: Request) -> Response:
    queue = await service_of(request).queues.get(caller_of(request), name)
    body = {
        "name": name,
        "paused": queue.paused,
        "status": status_word(queue),
        **queue.counts,
    }
    return ojs({"queue": body})


@router.get("/{name}/stats", summary="Queue statistics", responses=openapi.outcomes(400))
async def queue_stats(name: str, request: Request) -> Response:
    queue = await service_of(request).queues.get(caller_of(request), name)
    return ojs({"queue": name, "status": status_word(queue), "stats": queue.counts})


async def _set_paused(name: str, request: Request, paused: bool) -> Response:
    queue = await service_of(request).queues.set_paused(caller_of(request), name, paused)
    body = pause_document(queue)
    return ojs(
        {
            "queue": body,
            "status": status_word(queue),
            **{k: v for k, v in body.items() if k.endswith("_at")},
        }
    )


@router.post(
    "/{name}/pause",
    summary="Pause a queue (fetch returns nothing from it)",
    responses=openapi.outcomes(400),
)
async def pause(name: str, request: Request) -> Response:
    return await _set_paused(name, request, True)


@router.post(
    "/{name}/resume",
    summary="Resume a paused queue",
    responses=openapi.outcomes(400),
)
async def resume(name: str, request: Request) -> Response:
    return await _set_paused(name, request, False)
