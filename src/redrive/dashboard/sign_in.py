"""Signing in to the dashboard with an API key and out again: the form, the session cookie.

The key is posted once, behind the CSRF check (so another site cannot sign a browser in with its
own key), and never logged or echoed back; the browser then holds only a random session token in
an HttpOnly, SameSite=Strict cookie limited to /ui (Secure over HTTPS), of which the server keeps
a hash. A refused key gets the same answer whatever the reason; the reason goes to the log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.dashboard import csrf
from redrive.dashboard.access import (
    LOGIN_PATH,
    SESSION_COOKIE,
    clear_session_cookie,
    safe_next,
)
from redrive.dashboard.actions import guarded_form
from redrive.dashboard.rendering import (
    PREFIX,
    redirect,
    render,
    secure,
    set_csrf_cookie,
    signed_in,
)
from redrive.domain.errors import Unauthenticated
from redrive.service.facade import Service

Handler = Callable[..., Awaitable[Response]]
Wrapper = Callable[[Handler], Handler]

log = logging.getLogger("redrive.dashboard")
REFUSED = (
    "That key was not accepted. Check that you pasted all of it; it may also have expired or "
    "been revoked. An administrator can make you a new one."
)


def login_page(
    request: Request, next_page: str, status_code: int = 200, problem: str | None = None
) -> Response:
    context = {"title": "Sign in", "next": next_page, "problem": problem}
    return render(request, "login.html", context, status_code)


def add_sign_in_routes(router: APIRouter, service: Service, wrap: Wrapper) -> None:
    @router.get("/login", include_in_schema=False)
    @wrap
    async def login_form(request: Request) -> Response:
        next_page = safe_next(request.query_params.get("next"))
        if not request.app.state.auth_required or signed_in(request) is not None:
            return redirect(request, next_page)
        return login_page(request, next_page)

    @router.post("/login", include_in_schema=False)
    @wrap
    async def login(request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        next_page = safe_next(form.get("next"))
        if not request.app.state.auth_required:
            return redirect(request, next_page)
        try:
            started = await service.sessions.sign_in(
                form.get("key"), request.cookies.get(SESSION_COOKIE)
            )
        except Unauthenticated as error:
            log.info("dashboard sign-in refused: %s", error.message)
            return login_page(request, next_page, 401, REFUSED)
        key = started.key
        scope = "all tenants" if key.all_tenants else f"tenant {key.tenant_id}"
        message = f"Signed in as {key.name} ({key.role.value}, {scope})."
        response = redirect(request, next_page, message)
        lifetime_seconds = (started.session.expires_at - started.session.created_at) // 1000
        response.set_cookie(
            SESSION_COOKIE, started.token, max_age=lifetime_seconds, path=PREFIX,
            httponly=True, samesite="strict", secure=secure(request),
        )  # fmt: skip
        # A new CSRF token with the new session: one planted before sign-in is worth nothing.
        set_csrf_cookie(request, response, csrf.new_token())
        return response

    @router.post("/logout", include_in_schema=False)
    @wrap
    async def logout(request: Request) -> Response:
        form, refusal = await guarded_form(request)
        if form is None:
            return refusal or Response(status_code=403)
        if not request.app.state.auth_required:
            return redirect(request, PREFIX)
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            await service.sessions.sign_out(token)
        response = redirect(request, LOGIN_PATH, "Signed out.")
        clear_session_cookie(request, response)
        return response
