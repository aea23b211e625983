"""The dashboard's alert page: the newest alerts, by state, with an acknowledge button (the
banner of firing alerts on every page is counted in access.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.dashboard.access import caller_of
from redrive.dashboard.actions import guarded_form
from redrive.dashboard.rendering import PREFIX, redirect, render
from redrive.domain.alerts import STATES, parse_alert_query
from redrive.service.facade import Service

Handler = Callable[..., Awaitable[Response]]
Wrapper = Callable[[Handler], Handler]


def add_alert_routes(router: APIRouter, service: Service, wrap: Wrapper) -> None:
    @router.get("/alerts", include_in_schema=False)
    @wrap
    async def alerts(request: Request) -> Response:
        values = {key: value for key, value in request.query_params.items() if value}
        query = parse_alert_query(values)
        found = await service.alerts.search(caller_of(request), query)
        context = {
            "page": "alerts",
            "title": "Alerts",
            "alerts": found,
            "values": values,
            "states": [*STATES, "open"],
            "now": service.now(),
        }
        return render(request, "alerts.html", context)

    @router.post("/alerts/{alert_id}/acknowledge")
    @wrap
    async def acknowledge_alert(alert_id: str, request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        alert = await service.alerts.acknowledge(caller_of(request), alert_id)
        message = f"Alert {alert.id} ({alert.rule}, {alert.queue}) acknowledged."
        return redirect(request, f"{PREFIX}/alerts", message)
