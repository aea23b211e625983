"""Alert routes: list alerts (state filter), one alert, and acknowledging a firing one."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.dead_letter_requests import query_values
from redrive.api.http import ojs, read_json
from redrive.api.routes_incidents import no_changes
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import alert_document
from redrive.domain.alerts import parse_alert_query

router = APIRouter(prefix="/ojs/v1/admin/alerts", tags=["alerts"])


@router.get(
    "",
    summary="List alerts, the newest first (state=firing, acknowledged, resolved or open)",
    openapi_extra=openapi.alert_query(),
    responses=openapi.outcomes(400),
)
async def list_alerts(request: Request) -> Response:
    query = parse_alert_query(query_values(request))
    found = await service_of(request).alerts.search(caller_of(request), query)
    pagination = {"limit": query.limit, "has_more": len(found) == query.limit}
    return ojs({"alerts": [alert_document(alert) for alert in found], "pagination": pagination})


@router.get("/{alert_id}", summary="One alert", responses=openapi.outcomes(404))
async def get_alert(alert_id: str, request: Request) -> Response:
    alert = await service_of(request).alerts.get(caller_of(request), alert_id)
    return ojs({"alert": alert_document(alert)})


@router.post(
    "/{alert_id}/acknowledge",
    summary="Acknowledge a firing alert: someone has seen it (it resolves when its condition "
    "clears)",
    openapi_extra=openapi.body("IncidentChange", required=False),
    responses=openapi.outcomes(400, 404, 409),
)
async def acknowledge(alert_id: str, request: Request) -> Response:
    no_changes(await read_json(request, required=False))
    alert = await service_of(request).alerts.acknowledge(caller_of(request), alert_id)
    return ojs({"alert": alert_document(alert)})
