"""The authorization step every route runs first: read the key, make the caller, check the
route's policy (api/policies.py). Missing or bad key: 401; wrong role or tenant: 403."""

from __future__ import annotations

from starlette.requests import Request

from redrive.api.callers import key_caller, open_caller
from redrive.api.policies import policy_of
from redrive.api.routes_jobs import service_of
from redrive.domain.errors import Forbidden, Unauthenticated

AUTHORIZATION_HEADER = "authorization"


async def authorize(request: Request) -> None:
    """A FastAPI dependency on the whole app: sets `request.state.caller` or refuses."""
    policy = policy_of(request.scope.get("endpoint"))
    if policy is None:
        raise Forbidden("this route declares no access policy, so nobody may call it")
    if not request.app.state.auth_required:
        request.state.caller = open_caller(request)
        return
    if policy.permission is None:
        return
    key = await service_of(request).keys.authenticate(_bearer(request))
    caller = key_caller(request, key)
    if policy.every_tenant and not caller.all_tenants:
        raise Forbidden("this route spans every tenant: it needs a key made for all tenants")
    if not caller.may(policy.permission):
        raise Forbidden(
            f"the {caller.role.value} role may not do this (it needs {policy.permission.value})",
            {"role": caller.role.value, "needs": policy.permission.value},
        )
    request.state.caller = caller


def _bearer(request: Request) -> str:
    header = request.headers.get(AUTHORIZATION_HEADER)
    if not header:
        raise Unauthenticated("this server needs an API key: send 'Authorization: Bearer KEY'")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthenticated("send the API key as 'Authorization: Bearer KEY'")
    return credential.strip()
