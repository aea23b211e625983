"""Turning templates into responses: the Jinja2 environment, display filters, cookies, and who is
signed in (every page shows it, and hides what that caller may not do)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from redrive.dashboard import csrf
from redrive.domain.caller import GRANTS, Caller
from redrive.domain.durations import format_duration
from redrive.domain.errors import (
    Conflict,
    Duplicate,
    Forbidden,
    NotFound,
    OjsError,
    Unauthenticated,
)

PACKAGE_DIRECTORY = Path(__file__).parent
TEMPLATE_DIRECTORY = PACKAGE_DIRECTORY / "templates"
STATIC_DIRECTORY = PACKAGE_DIRECTORY / "static"
PREFIX = "/ui"
FLASH_COOKIE = "redrive_flash"
FLASH_LIMIT = 400
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
    ),
}


def short_id(value: str | None) -> str:
    """The last eight characters: UUIDv7 ids share their leading timestamp digits."""
    if not value:
        return ""
    return value if len(value) <= 10 else "…" + value[-8:]


def absolute_time(milliseconds: int | None) -> str:
    if milliseconds is None:
        return "—"
    moment = datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def iso_time(milliseconds: int | None) -> str:
    if milliseconds is None:
        return ""
    return datetime.fromtimestamp(milliseconds / 1000, tz=UTC).isoformat(timespec="milliseconds")


def relative_time(milliseconds: int | None, now: int) -> str:
    """`3 min ago`, `in 2 h`: coarse on purpose, the absolute time sits beside it."""
    if milliseconds is None:
        return "never"
    delta = (now - milliseconds) // 1000
    future = delta < 0
    seconds = abs(delta)
    for size, unit in ((86_400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            text = f"{seconds // size} {unit}"
            break
    else:
        return "just now" if seconds < 5 else (f"in {seconds} s" if future else f"{seconds} s ago")
    return f"in {text}" if future else f"{text} ago"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def duration_text(milliseconds: int | None) -> str:
    return "—" if milliseconds is None else format_duration(milliseconds)


def build_environment() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(str(TEMPLATE_DIRECTORY)),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        short_id=short_id,
        absolute=absolute_time,
        iso=iso_time,
        pretty_json=pretty_json,
        duration=duration_text,
    )
    environment.globals.update(relative=relative_time, prefix=PREFIX, field=csrf.FIELD_NAME)
    return environment


ENVIRONMENT = build_environment()


def session_token(request: Request) -> str:
    """The browser's CSRF token, or a new one that the response will set."""
    existing = request.cookies.get(csrf.COOKIE_NAME)
    if csrf.is_plausible_token(existing):
        assert existing is not None
        return existing
    cached = getattr(request.state, "csrf_token", None)
    if cached is None:
        cached = csrf.new_token()
        request.state.csrf_token = cached
    return str(cached)


def secure(request: Request) -> bool:
    """Whether cookies must be Secure: the request came over HTTPS."""
    return request.url.scheme == "https"


def set_csrf_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        csrf.COOKIE_NAME, token, max_age=csrf.COOKIE_MAX_AGE_SECONDS, path=PREFIX,
        httponly=True, samesite="strict", secure=secure(request),
    )  # fmt: skip


def finish(request: Request, response: Response) -> Response:
    """Security headers, the CSRF cookie when the browser has none yet, a flash consumed."""
    response.headers.update(SECURITY_HEADERS)
    token = session_token(request)
    if request.cookies.get(csrf.COOKIE_NAME) != token:
        set_csrf_cookie(request, response, token)
    return response


def signed_in(request: Request) -> Caller | None:
    """Who the request acts as (dashboard/access.py), or None on a public page without one."""
    caller = getattr(request.state, "caller", None)
    return caller if isinstance(caller, Caller) else None


def take_flash(request: Request) -> str | None:
    raw = request.cookies.get(FLASH_COOKIE)
    return unquote(raw)[:FLASH_LIMIT] if raw else None


def render(
    request: Request,
    template: str,
    context: dict[str, Any],
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    flash = take_flash(request)
    caller = signed_in(request)
    may = set() if caller is None else {permission.value for permission in GRANTS[caller.role]}
    # Firing alerts per severity, counted once per request by the access check (the banner).
    firing = getattr(request.state, "firing_alerts", None)
    page = ENVIRONMENT.get_template(template).render(
        request=request, csrf_token=session_token(request), flash=flash, who=caller, may=may,
        firing_alerts=firing, **context,
    )  # fmt: skip
    response = HTMLResponse(page, status_code=status_code, headers=headers)
    if flash is not None and not request.headers.get("hx-request"):
        response.delete_cookie(FLASH_COOKIE, path=PREFIX)
    return finish(request, response)


def redirect(request: Request, location: str, flash: str | None = None) -> Response:
    """303 See Other after a POST (so reload and back never repeat it), with a message."""
    response = RedirectResponse(location, status_code=303)
    if flash:
        response.set_cookie(
            FLASH_COOKIE, quote(flash[:FLASH_LIMIT]), path=PREFIX, httponly=True,
            samesite="strict", secure=secure(request),
        )  # fmt: skip
    return finish(request, response)


def status_of(error: OjsError) -> int:
    if isinstance(error, Unauthenticated):
        return 401
    if isinstance(error, Forbidden):
        return 403
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, Conflict | Duplicate):
        return 409
    return 400


def error_page(request: Request, error: OjsError, title: str = "That did not work") -> Response:
    return render(
        request, "error.html", {"title": title, "message": error.message}, status_of(error)
    )


FORGERY_HINT = (
    "Changes can only be made from this dashboard's own pages. "
    "Reload the page you came from and try again."
)


def forbidden_page(request: Request, reason: str) -> Response:
    """The 403 page. It sets no cookie: a cross-site post must not replace the browser's token."""
    page = ENVIRONMENT.get_template("forbidden.html").render(
        request=request, csrf_token="", flash=None, title="Request refused", reason=reason,
        hint=FORGERY_HINT,
    )  # fmt: skip
    response = HTMLResponse(page, status_code=403)
    response.headers.update(SECURITY_HEADERS)
    return response
