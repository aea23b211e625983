"""Fixtures for the dashboard's HTTP tests: the app with the dashboard mounted, a CSRF session."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.dashboard import install_dashboard
from redrive.dashboard.csrf import COOKIE_NAME
from redrive.service.facade import Service
from tests.behaviour.ojs_http import forbid_server_errors

BASE_URL = "http://redrive.test"
SAME_ORIGIN = {"origin": BASE_URL}
HIDDEN_INPUT = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


@pytest.fixture
async def dashboard(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like client: keeps cookies, never follows redirects by itself."""
    app = create_app(service, max_body_bytes=64_000)
    install_dashboard(app, service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        forbid_server_errors(http)
        yield http


async def session_token(dashboard: httpx.AsyncClient) -> str:
    """Open a page, as a browser would, and return the CSRF token its cookie carries."""
    response = await dashboard.get("/ui")
    assert response.status_code == 200, response.text
    token = dashboard.cookies.get(COOKIE_NAME)
    assert token
    return str(token)


async def post_form(
    dashboard: httpx.AsyncClient,
    path: str,
    fields: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST a url-encoded form from this origin (unless `headers` say otherwise)."""
    chosen = SAME_ORIGIN if headers is None else headers
    return await dashboard.post(path, data=fields, headers=chosen)


def hidden_fields(page: str) -> dict[str, list[str]]:
    """The hidden inputs of a page, as a browser would submit them."""
    found: dict[str, list[str]] = {}
    for name, value in HIDDEN_INPUT.findall(page):
        found.setdefault(html.unescape(name), []).append(html.unescape(value))
    return found
