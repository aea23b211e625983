"""API key routes: make a key (its secret answered once), list keys, revoke one."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.dead_letter_requests import query_values
from redrive.api.http import ojs, read_json, refuse_unknown
from redrive.api.key_requests import key_request
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import key_document
from redrive.domain.caller import Caller
from redrive.domain.errors import InvalidRequest

router = APIRouter(prefix="/ojs/v1/admin/keys", tags=["keys"])


def key_manager(request: Request) -> Caller:
    """With auth off, whoever reaches the loopback server owns it and may make keys for any
    tenant: that is how the first key is made (`redrive keys create --database` does the same)."""
    caller = caller_of(request)
    return caller if request.app.state.auth_required else replace(caller, all_tenants=True)


@router.post(
    "",
    status_code=201,
    summary="Make an API key (the key is in this answer only)",
    openapi_extra=openapi.body("KeyRequest"),
    responses=openapi.outcomes(400, 409, ok=201),
)
async def create_key(request: Request) -> Response:
    caller = key_manager(request)
    made = await service_of(request).keys.create(
        caller, key_request(await read_json(request), caller)
    )
    return ojs({**key_document(made.key), "key": made.secret}, 201)


@router.get(
    "",
    summary="List API keys (never their secrets)",
    openapi_extra=openapi.query([openapi.REVOKED_PARAMETER]),
    responses=openapi.outcomes(400),
)
async def list_keys(request: Request) -> Response:
    values = query_values(request)
    refuse_unknown(values, ("include_revoked",), "query parameter")
    flag = values.get("include_revoked", "false")
    if flag not in ("true", "false"):
        raise InvalidRequest("include_revoked must be true or false", {"field": "include_revoked"})
    keys = await service_of(request).keys.list(key_manager(request), flag == "true")
    return ojs({"keys": [key_document(key) for key in keys], "count": len(keys)})


@router.delete("/{key_id}", summary="Revoke an API key", responses=openapi.outcomes(400, 404))
async def revoke_key(key_id: str, request: Request) -> Response:
    key = await service_of(request).keys.revoke(key_manager(request), key_id)
    return ojs({"api_key": key_document(key)})
