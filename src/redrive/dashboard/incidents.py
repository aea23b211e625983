"""The dashboard's incident pages: the list (filters, two orders, older pages, each incident's
trend as a sparkline), one incident with its trend charted and its newest dead letters, the
state buttons, its class and its root-cause record (a form for operators, read-only for viewers),
and those forms' posts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.dashboard import views
from redrive.dashboard.access import caller_of
from redrive.dashboard.actions import guarded_form
from redrive.dashboard.rendering import PREFIX, redirect, render
from redrive.dashboard.sparkline import LARGE, chart
from redrive.domain.errors import NotFound
from redrive.domain.incident import (
    STATES,
    TRANSITIONS,
    Sort,
    Transition,
    check_fix_reference,
    encode_incident_cursor,
    parse_incident_query,
)
from redrive.domain.root_cause import ACTIONS, CATEGORIES, CLASSES, check_class, parse_root_cause
from redrive.domain.trend import DEFAULT_WINDOW, SHAPES, Window, parse_window
from redrive.service.facade import Service

Handler = Callable[..., Awaitable[Response]]
Wrapper = Callable[[Handler], Handler]
# What each button says it did.
DONE = {
    Transition.ACKNOWLEDGE: "acknowledged",
    Transition.RESOLVE: "resolved",
    Transition.IGNORE: "ignored",
    Transition.REOPEN: "reopened",
}

# The trend windows as the pages offer them: value, then words.
WINDOW_NAMES = {window.value: f"last {SHAPES[window][3]}" for window in Window}


def add_incident_routes(router: APIRouter, service: Service, wrap: Wrapper) -> None:
    @router.get("/incidents", include_in_schema=False)
    @wrap
    async def incidents(request: Request) -> Response:
        values = dict(request.query_params.items())
        query = parse_incident_query(values)
        window = query.trend or DEFAULT_WINDOW
        found = await service.incidents.search(caller_of(request), query)
        trends = await service.incidents.trends(caller_of(request), found, window)
        full = len(found) == query.limit
        next_cursor = encode_incident_cursor(found[-1], query.sort) if full else None
        context = {
            "page": "incidents",
            "title": "Incidents",
            "incidents": found,
            "trends": trends,
            "charts": {key: chart(trend) for key, trend in trends.items()},
            "window": window.value,
            "windows": WINDOW_NAMES,
            "values": values,
            "states": STATES,
            "sorts": [sort.value for sort in Sort],
            "next_query": urlencode({**values, "cursor": next_cursor or ""}),
            "next_cursor": next_cursor,
            "now": service.now(),
        }
        return render(request, "incidents.html", context)

    @router.get("/incidents/{incident_id}", include_in_schema=False)
    @wrap
    async def incident(incident_id: str, request: Request) -> Response:
        window = parse_window(request.query_params.get("trend"), DEFAULT_WINDOW) or DEFAULT_WINDOW
        found, recent = await service.incidents.get(caller_of(request), incident_id)
        trends = await service.incidents.trends(caller_of(request), [found], window)
        _, root_cause = await service.incidents.root_cause(caller_of(request), incident_id)
        context = {
            "root_cause": root_cause,
            "trend": trends[found.id],
            "chart": chart(trends[found.id], LARGE, detailed=True),
            "window": window.value,
            "windows": WINDOW_NAMES,
            "classes": CLASSES,
            "categories": CATEGORIES,
            "action": ACTIONS[found.classification],
            "page": "incidents",
            "title": f"Incident {found.type}",
            "incident": found,
            "rows": [views.row(dead) for dead in recent],
            "transitions": [
                transition.value
                for transition, (sources, _) in TRANSITIONS.items()
                if found.state in sources and transition != Transition.RESOLVE
            ],
            "resolvable": found.state in TRANSITIONS[Transition.RESOLVE][0],
            "now": service.now(),
        }
        return render(request, "incident.html", context)

    @router.post("/incidents/{incident_id}/root-cause")
    @wrap
    async def record_root_cause(incident_id: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        fix = (form.get("fix_reference") or "").strip() or None
        values = {"category": form.get("category"), "root_cause": form.get("root_cause")}
        written = parse_root_cause({**values, "fix_reference": fix})
        changed, _ = await service.incidents.record_root_cause(
            caller_of(request), incident_id, written
        )
        message = f"Root cause of incident {changed.id} ({changed.type}) recorded."
        return redirect(request, f"{PREFIX}/incidents/{changed.id}", message)

    @router.post("/incidents/{incident_id}/classify")
    @wrap
    async def classify_incident(incident_id: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        wanted = check_class(form.get("class"))
        changed = await service.incidents.classify(caller_of(request), incident_id, wanted)
        message = f"Incident {changed.id} ({changed.type}) classified as {wanted}."
        return redirect(request, f"{PREFIX}/incidents/{changed.id}", message)

    @router.post("/incidents/{incident_id}/{action}")
    @wrap
    async def change_incident(incident_id: str, action: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        try:
            transition = Transition(action)
        except ValueError as error:
            raise NotFound("incident action", action) from error
        fix = None
        if transition == Transition.RESOLVE:
            fix = check_fix_reference(form.get("fix_reference"))
        changed = await service.incidents.change(caller_of(request), incident_id, transition, fix)
        message = f"Incident {changed.id} ({changed.type}) {DONE[transition]}."
        return redirect(request, f"{PREFIX}/incidents/{changed.id}", message)
