"""Who a dashboard request acts as: the caller of the browser's session (with auth off, the open
caller), checked against the route's policy (api/policies.py, handed over by the authorization
step). Without a live session a page sends the browser to sign in; a refused one gets a 403 page
and, as in the API, an `access.denied` record in the audit log. A page a reader may open also
gets the count of firing alerts its banner shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from urllib.parse import unquote, urlencode, urlsplit

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from redrive.dashboard.rendering import PREFIX, redirect, render, secure
from redrive.domain.alerts import FIRING
from redrive.domain.audit import Action
from redrive.domain.caller import GRANTS, Caller, Permission, Policy, Role
from redrive.domain.errors import Unauthenticated
from redrive.domain.keys import caller_of_key
from redrive.service.facade import Service

SESSION_COOKIE = "redrive_session"
LOGIN_PATH = f"{PREFIX}/login"
LOGOUT_PATH = f"{PREFIX}/logout"
MAX_NEXT_LENGTH = 2000
# With auth off (a loopback server) nobody signs in: the dashboard acts across every tenant as
# an admin, recorded as "dashboard".
OPEN_CALLER = Caller.across_tenants("dashboard", Role.ADMIN)
ROLE_HINT = (
    "What you may do here depends on the role of the API key you signed in with. "
    "Ask an administrator for a key whose role allows this, and sign in with it."
)


class SignInNeeded(Exception):
    """The route needs a caller and the browser has no live session; `ended` when it sent a
    session cookie whose session is over (signed out elsewhere, expired, key revoked)."""

    def __init__(self, ended: bool) -> None:
        super().__init__("sign in needed")
        self.ended = ended


class Refused(Exception):
    """The signed-in caller's role (or tenant) may not take this route."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a page of this dashboard, else its overview. Only a
    relative path under /ui is followed, so `next` can never lead to another site (`//host`,
    `https://host`, `/\\host`) or out of the dashboard."""
    if not value or len(value) > MAX_NEXT_LENGTH or "\\" in value or not value.isprintable():
        return PREFIX
    parts = urlsplit(value)
    path = parts.path
    if parts.scheme or parts.netloc or not (path == PREFIX or path.startswith(PREFIX + "/")):
        return PREFIX
    segments = unquote(path).split("/")
    if "." in segments or ".." in segments or path in (LOGIN_PATH, LOGOUT_PATH):
        return PREFIX
    return value


def login_location(came_from: str | None) -> str:
    target = safe_next(came_from)
    return LOGIN_PATH if target == PREFIX else f"{LOGIN_PATH}?{urlencode({'next': target})}"


def caller_of(request: Request) -> Caller:
    """The caller of a route whose policy needs one (the access check has set it)."""
    caller: Caller = request.state.caller
    return caller


def _request_id(request: Request) -> str | None:
    value = getattr(request.state, "request_id", None)
    return value if isinstance(value, str) else None


SEVERITY_ORDER = ("critical", "warning", "info")


async def note_firing_alerts(service: Service, request: Request, caller: Caller) -> None:
    """For a page a reader opens: how many alerts fire now per severity, for the banner."""
    if request.method != "GET" or Permission.READ not in GRANTS[caller.role]:
        return
    counts = await service.alerts.open_counts(caller)
    firing = {severity: 0 for severity in SEVERITY_ORDER}
    for (_, severity, state), count in counts.items():
        if state == FIRING:
            firing[severity] = firing.get(severity, 0) + count
    request.state.firing_alerts = {key: value for key, value in firing.items() if value}


def access_check(service: Service) -> Callable[[Request], Awaitable[None]]:
    """The dashboard router's dependency: runs after the app's authorization step."""

    async def check_access(request: Request) -> None:
        """Sets `request.state.caller` (a public page without a session gets none) or refuses."""
        policy: Policy = request.state.policy
        if not request.app.state.auth_required:
            request.state.caller = replace(OPEN_CALLER, request_id=_request_id(request))
            await note_firing_alerts(service, request, request.state.caller)
            return
        token = request.cookies.get(SESSION_COOKIE)
        caller: Caller | None = None
        if token:
            try:
                key = await service.sessions.authenticate(token)
            except Unauthenticated:
                pass
            else:
                caller = caller_of_key(key, None, _request_id(request))
                request.state.caller = caller
        if policy.permission is None:
            return
        if caller is None:
            raise SignInNeeded(ended=bool(token))
        refusal = policy.refusal(caller)
        if refusal is not None:
            await service.audit.record_attempt(
                caller, Action.ACCESS_DENIED, _denied(request, refusal.message)
            )
            raise Refused(refusal.message)
        await note_firing_alerts(service, request, caller)

    return check_access


def _denied(request: Request, reason: str) -> dict[str, str]:
    """The audit record's target for a refused route, as the API writes it."""
    route = request.scope.get("route")
    path = request.url.path
    return {
        "method": request.method,
        "route": getattr(route, "path", path),
        "path": path,
        "reason": reason,
    }


def clear_session_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path=PREFIX, httponly=True, samesite="strict", secure=secure(request)
    )


def _current_page(request: Request) -> str | None:
    """The page the browser shows: the request's own for a page, the one htmx names for a
    fragment; only a GET can be gone back to."""
    if request.headers.get("hx-request") == "true":
        parts = urlsplit(request.headers.get("hx-current-url", ""))
        return parts.path + (f"?{parts.query}" if parts.query else "")
    if request.method != "GET":
        return None
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


async def send_to_sign_in(request: Request, error: Exception) -> Response:
    """A page goes to the sign-in form (303), coming back afterwards; an htmx request gets a 401
    whose HX-Redirect does the same for the whole page."""
    assert isinstance(error, SignInNeeded)
    location = login_location(_current_page(request))
    if request.headers.get("hx-request") == "true":
        response = Response(status_code=401, headers={"HX-Redirect": location})
    else:
        response = redirect(request, location)
    if error.ended:
        clear_session_cookie(request, response)
    return response


async def show_refusal(request: Request, error: Exception) -> Response:
    assert isinstance(error, Refused)
    context = {"title": "Not allowed", "reason": error.reason, "hint": ROLE_HINT}
    return render(request, "forbidden.html", context, 403)


def install_refusals(app: FastAPI) -> None:
    app.add_exception_handler(SignInNeeded, send_to_sign_in)
    app.add_exception_handler(Refused, show_refusal)
