"""Cross-site request forgery defence for the dashboard: a session token and a same-origin check.

The token lives in an HttpOnly, SameSite=Strict cookie and must come back with every state-changing
request, either as the `csrf_token` form field or the `X-CSRF-Token` header (htmx); the two are
compared in constant time. Independently, the request must come from this origin: `Sec-Fetch-Site`,
when the browser sends it, must be `same-origin`, and `Origin` (or, without it, `Referer`) must name
the host the request was sent to. A request without either header is refused as well: every browser
sends `Origin` on a form POST.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

COOKIE_NAME = "redrive_csrf"
FIELD_NAME = "csrf_token"
HEADER_NAME = "x-csrf-token"
TOKEN_BYTES = 32
COOKIE_MAX_AGE_SECONDS = 12 * 3600


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def is_plausible_token(value: str | None) -> bool:
    """A token this module could have issued (so a junk cookie is replaced, not trusted)."""
    return value is not None and 40 <= len(value) <= 64 and value.isascii()


def tokens_match(cookie_token: str | None, submitted: str | None) -> bool:
    """The submitted token equals the cookie's, compared in constant time."""
    if not is_plausible_token(cookie_token) or not submitted:
        return False
    assert cookie_token is not None
    return hmac.compare_digest(cookie_token.encode("ascii"), submitted.encode("utf-8", "replace"))


def _netloc(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return parts.netloc.lower()


def origin_problem(headers: Mapping[str, str], host: str | None) -> str | None:
    """Why the request does not look same-origin, or None when it does."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site != "same-origin":
        return f"the request came from another site (Sec-Fetch-Site: {fetch_site})"
    if not host:
        return "the request names no Host"
    origin = headers.get("origin")
    if origin is not None and origin != "null":
        if _netloc(origin) != host.lower():
            return "the request's Origin is not this server"
        return None
    referer = headers.get("referer")
    if referer:
        if _netloc(referer) != host.lower():
            return "the request's Referer is not this server"
        return None
    return "the request carries neither Origin nor Referer"


def forgery_problem(
    headers: Mapping[str, str], cookies: Mapping[str, str], form_token: str | None
) -> str | None:
    """Why a state-changing request must be refused, or None when it may go ahead."""
    problem = origin_problem(headers, headers.get("host"))
    if problem is not None:
        return problem
    submitted = form_token or headers.get(HEADER_NAME)
    if not submitted:
        return "the request carries no CSRF token"
    if not tokens_match(cookies.get(COOKIE_NAME), submitted):
        return "the CSRF token does not match this browser session"
    return None
