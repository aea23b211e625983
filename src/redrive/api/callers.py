"""Who an HTTP request acts as: the `Caller` the authorization step made for it.

With auth on, the API key decides the tenant and the actor (the key's name); only a key made for
every tenant may pick one with `X-OJS-Tenant`. With auth off (a loopback server), the tenant
comes from `X-OJS-Tenant` (the default tenant when it is absent) and the actor is the server's
own name for the HTTP edge; a client-set actor header is never believed.
"""

from __future__ import annotations

from dataclasses import replace

from starlette.requests import Request

from redrive.api.http import header
from redrive.domain.caller import Caller, Role
from redrive.domain.envelope import validate_tenant
from redrive.domain.errors import NotFound
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.keys import ApiKey, caller_of_key

TENANT_HEADER = b"x-ojs-tenant"
ACTOR = "api"


def chosen_tenant(request: Request) -> str | None:
    value = header(request, TENANT_HEADER)
    return validate_tenant(value) if value else None


def open_caller(request: Request) -> Caller:
    """The caller of a request to a server with auth off: an admin of the named tenant."""
    tenant = chosen_tenant(request) or DEFAULT_TENANT
    # Positional, in the fields' order (tenant_id, actor, role, all_tenants, key_id,
    # request_id): the keyword cost ~1k instructions of every request.
    return Caller(tenant, ACTOR, Role.ADMIN, False, None, _request_id(request))


def key_caller(request: Request, key: ApiKey) -> Caller:
    return caller_of_key(key, chosen_tenant(request), _request_id(request))


def caller_of(request: Request) -> Caller:
    """The caller `authorize` made, kept in the request's state (read from the scope's dict,
    as `request.state.caller` would, without Starlette's State object around it)."""
    caller: Caller = request.scope["state"]["caller"]
    return caller


def caller_for_tenant(request: Request, tenant_id: str) -> Caller:
    """The caller acting for the tenant a path names: its own, or any for a key that spans
    every tenant (or with auth off); another tenant is not found, as its objects are."""
    tenant_id = validate_tenant(tenant_id)
    caller = caller_of(request)
    open_server = not request.app.state.auth_required
    if open_server or caller.all_tenants or caller.tenant_id == tenant_id:
        return replace(caller, tenant_id=tenant_id, all_tenants=False)
    raise NotFound("tenant", tenant_id)


def _request_id(request: Request) -> str | None:
    value = request.scope.get("state", {}).get("request_id")
    return value if isinstance(value, str) else None
