"""Redrive task routes under /ojs/v1/dead-letter/redrives: start one (by filter or incident),
list them, read one (with the redriven jobs that died again), its items (by state: the failed
ones with their errors), pause, resume and cancel.

Registered before the dead-letter routes, so that `redrives` is never read as a job id.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.dead_letter_requests import query_values
from redrive.api.http import located, ojs, read_json
from redrive.api.redrive_requests import items_query, list_query, start_request
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import timestamp
from redrive.domain.redrive import DEAD_AGAIN, RedriveFailure, RedriveTask

PREFIX = "/ojs/v1/dead-letter/redrives"
router = APIRouter(prefix=PREFIX, tags=["redrive tasks"])


def task_location(task: RedriveTask) -> str:
    return f"{PREFIX}/{task.id}"


def failure_document(failure: RedriveFailure | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {"code": failure.code, "message": failure.message, "job_id": failure.job_id}


def task_document(task: RedriveTask) -> dict[str, Any]:
    """A task: what it pinned and how far it got, its pace, how its redriven jobs ended, and
    (`failure`, a failed task) why it stopped."""
    return {
        "id": task.id,
        "tenant_id": task.tenant_id,
        "state": task.state,
        "filter": task.filter,
        "incident_id": task.incident_id,
        "rate_per_minute": task.rate_per_minute,
        "critical": task.critical,
        "reason": task.reason,
        "created_by": task.created_by,
        "created_at": timestamp(task.created_at),
        "updated_at": timestamp(task.updated_at),
        "updated_by": task.updated_by,
        "finished_at": timestamp(task.finished_at),
        "queues": list(task.queues),
        "counts": {
            "to_move": task.to_move,
            "moved": task.moved,
            "skipped": task.skipped,
            "pending": task.pending,
            "succeeded": task.succeeded,
            "dead_again": task.dead_again,
            "failed": task.failed,
        },
        "success_rate": task.success_rate,
        "failure": failure_document(task.failure),
        "href": task_location(task),
    }


@router.post(
    "",
    status_code=201,
    summary="Start a paced redrive task by filter or for an incident",
    openapi_extra=openapi.body("RedriveTaskRequest"),
    responses=openapi.outcomes(400, 404, 409, ok=201),
)
async def create_redrive(request: Request) -> Response:
    service = service_of(request)
    started = start_request(await read_json(request), service.now())
    task = await service.redrives.start(caller_of(request), started)
    return located({"task": task_document(task)}, 201, task_location(task))


@router.get(
    "",
    summary="Redrive tasks, the newest first",
    openapi_extra=openapi.redrive_query(),
    responses=openapi.outcomes(400),
)
async def list_redrives(request: Request) -> Response:
    state, limit = list_query(query_values(request))
    found = await service_of(request).redrives.search(caller_of(request), state, limit)
    return ojs({"tasks": [task_document(task) for task in found]})


@router.get(
    "/{task_id}",
    summary="One redrive task, with the redriven jobs that died again and their fingerprints",
    responses=openapi.outcomes(404),
)
async def get_redrive(task_id: str, request: Request) -> Response:
    service = service_of(request).redrives
    caller = caller_of(request)
    task = await service.get(caller, task_id)
    # (its count says whether any died again: a running task is polled, and most have none)
    died = await service.items(caller, task_id, DEAD_AGAIN) if task.dead_again else []
    dead_again = [
        {"dead_letter_id": item["dead_letter_id"], "job_id": item["job_id"],
         "incident_id": item["incident_id"], "died_incident_id": item["died_incident_id"],
         "fingerprint": item["died_fingerprint"]}
        for item in died
    ]  # fmt: skip
    return ojs({"task": task_document(task), "dead_again": dead_again})


def item_document(item: dict[str, Any]) -> dict[str, Any]:
    """One pinned dead letter: where it got, and the error that kept a failed one dead."""
    error = None
    if item["error_code"] is not None:
        error = {"code": item["error_code"], "message": item["error_message"]}
    return {
        "dead_letter_id": item["dead_letter_id"],
        "job_id": item["job_id"],
        "queue": item["queue"],
        "state": item["state"],
        "incident_id": item["incident_id"],
        "error": error,
        "died_incident_id": item["died_incident_id"],
        "fingerprint": item["died_fingerprint"],
    }


@router.get(
    "/{task_id}/items",
    summary="A redrive task's pinned dead letters (the first 100), by state; failed ones with "
    "the upcaster's error",
    openapi_extra=openapi.redrive_items_query(),
    responses=openapi.outcomes(400, 404),
)
async def list_redrive_items(task_id: str, request: Request) -> Response:
    state = items_query(query_values(request))
    found = await service_of(request).redrives.items(caller_of(request), task_id, state)
    return ojs({"items": [item_document(item) for item in found]})


@router.post(
    "/{task_id}/pause",
    summary="Pause a running redrive task",
    responses=openapi.outcomes(404, 409),
)
async def pause_redrive(task_id: str, request: Request) -> Response:
    task = await service_of(request).redrives.pause(caller_of(request), task_id)
    return ojs({"task": task_document(task)})


@router.post(
    "/{task_id}/resume",
    summary="Resume a paused redrive task",
    responses=openapi.outcomes(404, 409),
)
async def resume_redrive(task_id: str, request: Request) -> Response:
    task = await service_of(request).redrives.resume(caller_of(request), task_id)
    return ojs({"task": task_document(task)})


@router.post(
    "/{task_id}/cancel",
    summary="Cancel a redrive task (what it moved stays moved)",
    responses=openapi.outcomes(404, 409),
)
async def cancel_redrive(task_id: str, request: Request) -> Response:
    task = await service_of(request).redrives.cancel(caller_of(request), task_id)
    return ojs({"task": task_document(task)})
