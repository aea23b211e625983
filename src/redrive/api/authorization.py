"""The authorization step every route runs first: find the route's policy (api/policies.py), read
the key, make the caller, check the policy. Missing or bad key: 401; wrong role or tenant: 403,
and an `access.denied` record in the audit log. Dashboard routes sign in with a session cookie
instead and show refusals as pages: the dashboard checks their policy itself
(dashboard/access.py)."""

from __future__ import annotations

from starlette.requests import Request

from redrive.api.callers import key_caller, open_caller
from redrive.api.policies import is_dashboard, policy_of
from redrive.api.routes_jobs import service_of
from redrive.domain.audit import Action
from redrive.domain.errors import Forbidden, Unauthenticated
from redrive.domain.keys import ApiKey, caller_of_key

AUTHORIZATION_HEADER = "authorization"


async def authorize(request: Request) -> None:
    """A FastAPI dependency on the whole app: sets `request.state.caller` or refuses (for a
    dashboard route, sets `request.state.policy` for the dashboard's own check)."""
    if not authorized_at_once(request):
        await authorize_by_key(request)


def authorized_at_once(request: Request) -> bool:
    """`authorize`'s steps that read no key: True when they settle the request (a dashboard
    route, a server with auth off, a route that needs no permission), False when the key must
    be checked (`authorize_by_key`). Exact routes call this first, without a coroutine: with
    auth off, every request of a producer ends here."""
    endpoint = request.scope.get("endpoint")
    policy = policy_of(endpoint)
    if endpoint is None or policy is None:
        raise _no_policy()
    if is_dashboard(endpoint):
        request.state.policy = policy
        return True
    if not request.app.state.auth_required:
        request.scope.setdefault("state", {})["caller"] = open_caller(request)
        return True
    return policy.permission is None


async def authorize_by_key(request: Request) -> None:
    """The rest of `authorize` once `authorized_at_once` has not settled the request: the key,
    its caller and the route's policy."""
    policy = policy_of(request.scope.get("endpoint"))
    if policy is None:  # refused by `authorized_at_once` already
        raise _no_policy()
    key = await service_of(request).keys.authenticate(_bearer(request))
    try:
        caller = key_caller(request, key)
        refusal = policy.refusal(caller)
        if refusal is not None:
            raise refusal
    except Forbidden as refusal:
        await _record_refusal(request, key, refusal)
        raise
    request.scope.setdefault("state", {})["caller"] = caller


def _no_policy() -> Forbidden:
    return Forbidden("this route declares no access policy, so nobody may call it")


async def _record_refusal(request: Request, key: ApiKey, refusal: Forbidden) -> None:
    """A valid key refused is worth an audit record in the key's own tenant: which route it
    tried and why not (a missing or bad key is not: it names nobody)."""
    route = request.scope.get("route")
    target = {
        "method": request.method,
        "route": getattr(route, "path", request.url.path),
        "path": request.url.path,
        "reason": refusal.message,
    }
    caller = caller_of_key(key, None, getattr(request.state, "request_id", None))
    await service_of(request).audit.record_attempt(caller, Action.ACCESS_DENIED, target)


def _bearer(request: Request) -> str:
    header = request.headers.get(AUTHORIZATION_HEADER)
    if not header:
        raise Unauthenticated("this server needs an API key: send 'Authorization: Bearer KEY'")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthenticated("send the API key as 'Authorization: Bearer KEY'")
    return credential.strip()
