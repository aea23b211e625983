"""Legal-hold routes: list holds, place one (on a job's dead letters, an incident's, or a
filter's), read one, release one. Placing and releasing need an admin; the author is the caller."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.dead_letter_requests import query_values
from redrive.api.http import ojs, read_json, refuse_unknown
from redrive.api.routes_jobs import service_of
from redrive.domain.errors import InvalidRequest
from redrive.domain.legal_hold import parse_hold_request

router = APIRouter(prefix="/ojs/v1/admin/legal-holds", tags=["legal holds"])
LIST_KEYS = ("include_released",)


def include_released(request: Request) -> bool:
    values = query_values(request)
    refuse_unknown(values, LIST_KEYS)
    flag = values.get("include_released", "false")
    if flag not in ("true", "false"):
        raise InvalidRequest(
            "include_released must be true or false", {"field": "include_released"}
        )
    return flag == "true"


@router.get(
    "",
    summary="Legal holds: the active ones, newest first (include_released=true: every one)",
    openapi_extra=openapi.query(
        [openapi.parameter("include_released", {"enum": ["true", "false"]}, "released ones too")]
    ),
    responses=openapi.outcomes(400),
)
async def list_holds(request: Request) -> Response:
    holds = await service_of(request).legal_holds.list(
        caller_of(request), include_released(request)
    )
    return ojs({"legal_holds": [hold.to_document() for hold in holds]})


@router.post(
    "",
    status_code=201,
    summary="Place a legal hold: its dead letters are never pruned, purged or deleted until it "
    "is released",
    openapi_extra=openapi.body("LegalHoldRequest"),
    responses=openapi.outcomes(400, 404, ok=201),
)
async def place_hold(request: Request) -> Response:
    hold_request = parse_hold_request(await read_json(request))
    hold = await service_of(request).legal_holds.place(caller_of(request), hold_request)
    return ojs({"legal_hold": hold.to_document()}, 201)


@router.get(
    "/{hold_id}",
    summary="One legal hold",
    responses=openapi.outcomes(404),
)
async def get_hold(hold_id: str, request: Request) -> Response:
    hold = await service_of(request).legal_holds.get(caller_of(request), hold_id)
    return ojs({"legal_hold": hold.to_document()})


@router.post(
    "/{hold_id}/release",
    summary="Release a legal hold: what it kept is pruned, purged or deleted normally again",
    responses=openapi.outcomes(404),
)
async def release_hold(hold_id: str, request: Request) -> Response:
    hold = await service_of(request).legal_holds.release(caller_of(request), hold_id)
    return ojs({"legal_hold": hold.to_document()})
