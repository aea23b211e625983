"""Who an HTTP request acts as: the `Caller` every route passes to the service.

Until API keys exist, the tenant comes from the `X-OJS-Tenant` header (the default tenant when
it is absent) and the actor is the server's own name for the HTTP edge; a client-set actor
header is not believed. Routes that read or change one named tenant (the tenant stats route)
build their caller from the path.
"""

from __future__ import annotations

from starlette.requests import Request

from redrive.domain.caller import Caller, Role
from redrive.domain.envelope import validate_tenant
from redrive.domain.job import DEFAULT_TENANT

TENANT_HEADER = "x-ojs-tenant"
ACTOR = "api"


def caller_of(request: Request) -> Caller:
    value = request.headers.get(TENANT_HEADER)
    tenant = validate_tenant(value) if value else DEFAULT_TENANT
    return Caller.for_tenant(tenant, ACTOR, Role.ADMIN)


def caller_for_tenant(tenant_id: str) -> Caller:
    return Caller.for_tenant(validate_tenant(tenant_id), ACTOR, Role.ADMIN)
