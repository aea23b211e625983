"""Cron routes: register, list, read, enable or disable, delete."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.cron_requests import cron_enabled, cron_registration
from redrive.api.http import ojs, read_json
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import cron_document

router = APIRouter(prefix="/ojs/v1/cron", tags=["cron"])


@router.post(
    "",
    status_code=201,
    summary="Register (or replace) a cron entry",
    openapi_extra=openapi.body("CronRegistration"),
    responses=openapi.outcomes(400, ok=201),
)
async def register(request: Request) -> Response:
    registration = cron_registration(await read_json(request))
    cron = await service_of(request).crons.register(caller_of(request), registration)
    return ojs({"cron": cron_document(cron)}, 201)


@router.get("", summary="List cron entries", responses=openapi.outcomes(400))
async def list_crons(request: Request) -> Response:
    crons = await service_of(request).crons.list(caller_of(request))
    return ojs({"crons": [cron_document(cron) for cron in crons], "count": len(crons)})


@router.get("/{name}", summary="Get a cron entry", responses=openapi.outcomes(400, 404))
async def get_cron(name: str, request: Request) -> Response:
    return ojs(
        {"cron": cron_document(await service_of(request).crons.get(caller_of(request), name))}
    )


@router.patch(
    "/{name}",
    summary="Enable or disable a cron entry",
    openapi_extra=openapi.body("CronEnabled"),
    responses=openapi.outcomes(400, 404),
)
async def update_cron(name: str, request: Request) -> Response:
    enabled = cron_enabled(await read_json(request))
    cron = await service_of(request).crons.set_enabled(caller_of(request), name, enabled)
    return ojs({"cron": cron_document(cron)})


@router.delete(
    "/{name}",
    summary="Delete a cron entry",
    responses=openapi.outcomes(400, 404),
)
async def delete_cron(name: str, request: Request) -> Response:
    cron = await service_of(request).crons.delete(caller_of(request), name)
    return ojs({"cron": cron_document(cron), "deleted": True, "name": name})
