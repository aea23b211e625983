"""The dashboard's redrive tasks: the list with each task's progress (refreshed by htmx while
one runs), starting a paced redrive of an incident, and pausing, resuming or cancelling a task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.dashboard.access import caller_of
from redrive.dashboard.actions import guarded_form
from redrive.dashboard.rendering import PREFIX, redirect, render
from redrive.domain import redrive
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.incident import check_id
from redrive.domain.redrive import RedriveRequest, check_reason
from redrive.service.facade import Service

Handler = Callable[..., Awaitable[Response]]
Wrapper = Callable[[Handler], Handler]
LISTED = 50


def _rate(text: str | None) -> int | None:
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise InvalidRequest("rate must be a whole number a minute", {"field": "rate_per_minute"})
    return int(text)


def add_redrive_routes(router: APIRouter, service: Service, wrap: Wrapper) -> None:
    @router.get("/redrives", include_in_schema=False)
    @wrap
    async def redrives(request: Request) -> Response:
        tasks = await service.redrives.search(caller_of(request), None, LISTED)
        context = {
            "page": "redrives",
            "title": "Redrives",
            "tasks": tasks,
            "running": any(task.state == redrive.RUNNING for task in tasks),
            "now": service.now(),
        }
        return render(request, "redrives.html", context)

    @router.post("/redrives")
    @wrap
    async def start_redrive(request: Request) -> Response:
        """A paced redrive of one incident's dead letters (the incident page's form)."""
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        incident = check_id(form.get("incident") or "")
        critical = form.get("critical") == "on"
        started = RedriveRequest(
            DeadLetterFilter(incident_id=incident), _rate(form.get("rate_per_minute")),
            critical, check_reason(form.get("reason") or None),
        )  # fmt: skip
        task = await service.redrives.start(caller_of(request), started)
        message = f"Redrive {task.id} started: {task.to_move} at {task.rate_per_minute}/minute."
        return redirect(request, f"{PREFIX}/redrives", message)

    @router.post("/redrives/{task_id}/{action}")
    @wrap
    async def change_redrive(task_id: str, action: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        changes = {
            redrive.Change.PAUSE: service.redrives.pause,
            redrive.Change.RESUME: service.redrives.resume,
            redrive.Change.CANCEL: service.redrives.cancel,
        }
        if action not in changes:
            raise NotFound("redrive action", action)
        task = await changes[action](caller_of(request), task_id)
        return redirect(request, f"{PREFIX}/redrives", f"Redrive {task.id}: {task.state}.")
