"""Incident routes: list incidents (filters, two orders, keyset pages, their trends on asking),
one incident with its newest dead letters (and its trend on asking), the state changes
(acknowledge, resolve with a fix reference, ignore, reopen), its class, and its root-cause
record."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.dead_letter_requests import query_values
from redrive.api.http import ojs, read_json, refuse_unknown
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import dead_letter_document, incident_document, root_cause_document
from redrive.domain.errors import InvalidRequest
from redrive.domain.incident import (
    Incident,
    Transition,
    check_fix_reference,
    encode_incident_cursor,
    parse_incident_query,
)
from redrive.domain.root_cause import (
    RootCause,
    RootCauseInput,
    check_class,
    markdown,
    parse_root_cause,
)
from redrive.domain.trend import parse_window

router = APIRouter(prefix="/ojs/v1/admin/incidents", tags=["incidents"])
RESOLUTION_KEYS = ("fix_reference",)
INCIDENT_KEYS = ("trend",)
CLASSIFICATION_KEYS = ("class",)


def _object(body: object) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    return body


def no_changes(body: object) -> None:
    """Acknowledge, ignore and reopen take no fields: nothing, or an empty object."""
    unknown = sorted(_object(body))
    if unknown:
        raise InvalidRequest(
            f"unknown key {unknown[0]!r}; this change takes no fields", {"field": unknown[0]}
        )


def resolution(body: object) -> str:
    """A resolution's body: `{"fix_reference": "PR #123"}`."""
    values = _object(body)
    refuse_unknown(values, RESOLUTION_KEYS)
    return check_fix_reference(values.get("fix_reference"))


def classification(body: object) -> str:
    """A classification's body: `{"class": "contract"}`."""
    values = _object(body)
    refuse_unknown(values, CLASSIFICATION_KEYS)
    return check_class(values.get("class"))


def root_cause_body(body: object) -> RootCauseInput:
    """A root-cause record's body (domain/root_cause.py parse_root_cause)."""
    return parse_root_cause(_object(body))


async def changed(request: Request, incident_id: str, transition: Transition) -> Response:
    body = await read_json(request, required=False)
    fix_reference = None
    if transition == Transition.RESOLVE:
        fix_reference = resolution(body)
    else:
        no_changes(body)
    incident = await service_of(request).incidents.change(
        caller_of(request), incident_id, transition, fix_reference
    )
    return ojs({"incident": incident_document(incident)})


@router.get(
    "",
    summary="List incidents: the most recent first, or (sort=count) the most dead now first",
    openapi_extra=openapi.incident_query(),
    responses=openapi.outcomes(400),
)
async def list_incidents(request: Request) -> Response:
    query = parse_incident_query(query_values(request))
    incidents = service_of(request).incidents
    found = await incidents.search(caller_of(request), query)
    trends = (
        {}
        if query.trend is None
        else await incidents.trends(caller_of(request), found, query.trend)
    )
    pagination: dict[str, Any] = {"limit": query.limit, "has_more": len(found) == query.limit}
    if found and len(found) == query.limit:
        pagination["next_cursor"] = encode_incident_cursor(found[-1], query.sort)
    documents = [incident_document(item, trends.get(item.id)) for item in found]
    return ojs({"incidents": documents, "pagination": pagination})


@router.get(
    "/{incident_id}",
    summary="One incident, with its newest dead letters (and, with trend=, its arrivals)",
    openapi_extra=openapi.incident_trend_query(),
    responses=openapi.outcomes(400, 404),
)
async def get_incident(incident_id: str, request: Request) -> Response:
    values = query_values(request)
    refuse_unknown(values, INCIDENT_KEYS, "query parameter")
    window = parse_window(values.get("trend"))
    incidents = service_of(request).incidents
    incident, recent = await incidents.get(caller_of(request), incident_id)
    trend = None
    if window is not None:
        trend = (await incidents.trends(caller_of(request), [incident], window))[incident.id]
    return ojs(
        {
            "incident": incident_document(incident, trend),
            "dead_letters": [dead_letter_document(dead) for dead in recent],
        }
    )


@router.post(
    "/{incident_id}/acknowledge",
    summary="Acknowledge an open or regressed incident: someone is on it",
    openapi_extra=openapi.body("IncidentChange", required=False),
    responses=openapi.outcomes(400, 404, 409),
)
async def acknowledge(incident_id: str, request: Request) -> Response:
    return await changed(request, incident_id, Transition.ACKNOWLEDGE)


@router.post(
    "/{incident_id}/resolve",
    summary="Resolve an incident with the reference of its fix (a new dead letter regresses it)",
    openapi_extra=openapi.body("IncidentResolution"),
    responses=openapi.outcomes(400, 404, 409),
)
async def resolve(incident_id: str, request: Request) -> Response:
    return await changed(request, incident_id, Transition.RESOLVE)


@router.post(
    "/{incident_id}/ignore",
    summary="Ignore an incident (its dead letters are still counted)",
    openapi_extra=openapi.body("IncidentChange", required=False),
    responses=openapi.outcomes(400, 404, 409),
)
async def ignore(incident_id: str, request: Request) -> Response:
    return await changed(request, incident_id, Transition.IGNORE)


@router.post(
    "/{incident_id}/reopen",
    summary="Reopen an acknowledged, resolved or ignored incident",
    openapi_extra=openapi.body("IncidentChange", required=False),
    responses=openapi.outcomes(400, 404, 409),
)
async def reopen(incident_id: str, request: Request) -> Response:
    return await changed(request, incident_id, Transition.REOPEN)


def root_cause_answer(incident: Incident, found: RootCause | None) -> Response:
    """The incident, its record, and the seed's RCA Markdown template filled in."""
    text = markdown(incident.type, incident.first_seen_at, incident.total_count,
                    incident.message, found, None)  # fmt: skip
    return ojs(
        {
            "incident": incident_document(incident),
            "root_cause": root_cause_document(found),
            "markdown": text,
        }
    )


@router.get(
    "/{incident_id}/root-cause",
    summary="An incident's root-cause record (null until someone writes one)",
    responses=openapi.outcomes(404),
)
async def get_root_cause(incident_id: str, request: Request) -> Response:
    incident, found = await service_of(request).incidents.root_cause(
        caller_of(request), incident_id
    )
    return root_cause_answer(incident, found)


@router.put(
    "/{incident_id}/root-cause",
    summary="Write an incident's root-cause record: category, root cause, fix reference",
    description="The author is the caller; each edit is kept in the audit log. The category "
    "becomes the incident's class. A redrive of more than one dead letter needs a record with "
    "a fix reference for every incident it touches.",
    openapi_extra=openapi.body("RootCause"),
    responses=openapi.outcomes(400, 404, 409),
)
async def put_root_cause(incident_id: str, request: Request) -> Response:
    written = root_cause_body(await read_json(request))
    incident, saved = await service_of(request).incidents.record_root_cause(
        caller_of(request), incident_id, written
    )
    return root_cause_answer(incident, saved)


@router.post(
    "/{incident_id}/classify",
    summary="Set an incident's class: infrastructure, contract, business, poison_pill or "
    "unclassified",
    openapi_extra=openapi.body("IncidentClassification"),
    responses=openapi.outcomes(400, 404),
)
async def classify(incident_id: str, request: Request) -> Response:
    wanted = classification(await read_json(request))
    incident = await service_of(request).incidents.classify(caller_of(request), incident_id, wanted)
    return ojs({"incident": incident_document(incident)})
