"""Proxy headers (X-Forwarded-For, X-Forwarded-Proto): `ProtocolHeaders` sends a request that
names one to the server's proxy-header step (uvicorn's, as `redrive serve` sets it), which trusts
them from the configured proxies only; every other request goes straight to the app, unchanged.
Websockets and traced requests go through the step first (`RedriveApp.proxied`), as when uvicorn
put it around the whole app. Through a real `redrive serve` too: the dashboard's cookies are
Secure behind a trusted proxy that says the client came over HTTPS."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from redrive.api.app import RedriveApp, create_app
from redrive.api.middleware import ProtocolHeaders
from redrive.service.facade import Service
from tests.conformance.server import RedriveServer
from tests.unit.test_exact_routes import serving as started

pytestmark = pytest.mark.anyio


class Seen:
    """The app behind the layers: remembers the client and scheme of what reached it."""

    def __init__(self) -> None:
        self.scopes: list[tuple[Any, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append((scope.get("client"), scope.get("scheme")))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})


def layers(trusted: str = "127.0.0.1") -> tuple[ProtocolHeaders, Seen]:
    seen = Seen()
    return ProtocolHeaders(seen, 1_000, ProxyHeadersMiddleware(seen, trusted)), seen  # type: ignore[arg-type]


async def reached(
    app: ProtocolHeaders, headers: list[tuple[bytes, bytes]], kind: str = "http"
) -> None:
    scope = {
        "type": kind, "method": "GET", "path": "/", "headers": headers, "scheme": "http",
        "client": ("127.0.0.1", 50_000),
    }  # fmt: skip

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        pass

    await app(scope, receive, send)


async def test_a_trusted_proxys_forwarded_client_and_scheme_reach_the_app() -> None:
    app, seen = layers()
    await reached(app, [(b"x-forwarded-for", b"203.0.113.7"), (b"x-forwarded-proto", b"https")])
    await reached(app, [(b"host", b"a"), (b"x-forwarded-proto", b"https")])
    await reached(app, [(b"x-forwarded-for", b"203.0.113.8")])
    assert seen.scopes == [
        (("203.0.113.7", 0), "https"),
        (("127.0.0.1", 50_000), "https"),
        (("203.0.113.8", 0), "http"),
    ]


async def test_without_forwarded_headers_or_from_an_untrusted_peer_nothing_changes() -> None:
    app, seen = layers()
    await reached(app, [(b"host", b"a"), (b"x-forwarded-host", b"b")])
    untrusted, seen_untrusted = layers(trusted="192.0.2.1")
    await reached(
        untrusted, [(b"x-forwarded-for", b"203.0.113.7"), (b"x-forwarded-proto", b"https")]
    )
    assert seen.scopes == [(("127.0.0.1", 50_000), "http")]
    assert seen_untrusted.scopes == [(("127.0.0.1", 50_000), "http")]


def proxied_app() -> RedriveApp:
    app = create_app(cast(Service, object()))
    assert isinstance(app, RedriveApp)
    app.proxy_headers = lambda inner: cast(ASGIApp, ProxyHeadersMiddleware(cast(Any, inner)))
    return app


async def scheme_seen(app: RedriveApp, kind: str, headers: list[tuple[bytes, bytes]]) -> str:
    """The scheme the app's layers left in a request's scope (a path no route takes)."""
    scope = {
        "type": kind, "method": "GET", "path": "/nowhere", "raw_path": b"/nowhere",
        "query_string": b"", "headers": headers, "scheme": "http" if kind == "http" else "ws",
        "client": ("127.0.0.1", 50_000), "server": ("127.0.0.1", 8080), "root_path": "",
        "http_version": "1.1",
    }  # fmt: skip

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        pass

    await app(scope, receive, send)
    return str(scope["scheme"])


HTTPS = [(b"x-forwarded-proto", b"https")]


async def test_the_app_reads_forwarded_headers_on_every_path_uvicorns_step_did() -> None:
    """Untraced HTTP (`ProtocolHeaders`), and, through `RedriveApp.proxied`, websockets and
    traced HTTP (FastAPI's telemetry reads the scheme before the middleware stack)."""
    app = proxied_app()
    stop = await started(app)
    assert app.untraced_stack is not None
    assert await scheme_seen(app, "http", HTTPS) == "https"
    assert await scheme_seen(app, "http", []) == "http"
    assert await scheme_seen(app, "websocket", HTTPS) == "wss"
    await stop()


async def test_traced_requests_go_through_the_proxy_step_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = proxied_app()
    monkeypatch.setattr(app._native_telemetry, "enabled", lambda: True)
    reached: list[str] = []
    telemetry = type(app._native_telemetry).__call__

    async def traced(self: Any, **arguments: Any) -> None:
        reached.append(arguments["scope"]["scheme"])
        await telemetry(self, **arguments)

    monkeypatch.setattr(type(app._native_telemetry), "__call__", traced)
    stop = await started(app)
    assert app.untraced_stack is None and app.proxied is not None
    assert await scheme_seen(app, "http", HTTPS) == "https"
    await stop()
    assert reached == ["https"]


@contextmanager
def serving(tmp_path: Path, **environment: str) -> Iterator[str]:
    """`redrive serve` on a SQLite file; its base URL while the block runs."""
    settings = {"REDRIVE_CONFIG_FILE": str(tmp_path / "absent.toml"), **environment}
    database_url = f"sqlite:///{tmp_path / 'redrive.db'}"
    with RedriveServer(database_url, tmp_path, environment=settings) as server:
        yield server.base_url


def csrf_cookie(url: str, headers: dict[str, str]) -> str:
    answer = httpx.get(url + "/ui/login", headers=headers)
    cookies = [value for name, value in answer.headers.multi_items() if name == "set-cookie"]
    assert len(cookies) == 1 and cookies[0].startswith("redrive_csrf="), cookies
    return cookies[0].lower()


def test_redrive_serve_believes_forwarded_https_from_a_trusted_proxy_only(tmp_path: Path) -> None:
    """Fails if the server stops reading proxy headers (uvicorn's step turned off and not put
    back for the requests that name them)."""
    https = {"X-Forwarded-Proto": "https"}
    with serving(tmp_path / "trusted") as url:
        assert "; secure" in csrf_cookie(url, https)
        assert "; secure" not in csrf_cookie(url, {})
    with serving(tmp_path / "untrusted", FORWARDED_ALLOW_IPS="192.0.2.1") as url:
        assert "; secure" not in csrf_cookie(url, https)
