"""Which routes the exact-route table answers itself: fixed paths with a `(request)` handler that
no earlier route would take; everything else stays with FastAPI's routing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import cast

import httpx
import pytest
from fastapi import APIRouter, Depends
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

from redrive.api.app import ROUTERS, RedriveApp, create_app
from redrive.api.exact_routes import ExactRoutes, exact_routes
from redrive.api.middleware import ProtocolHeaders
from redrive.service.facade import Service


async def plain(request: Request) -> Response:
    return Response()


async def with_parameter(job_id: str, request: Request) -> Response:
    return Response()


async def returning_a_dict(request: Request) -> dict[str, str]:
    return {}


def test_fixed_paths_with_a_request_handler_only_in_the_routers_order() -> None:
    router = APIRouter(prefix="/things")
    router.add_api_route("/{thing_id}", with_parameter, methods=["GET"])
    router.add_api_route("/stats", plain, methods=["GET", "POST"])  # GET is /{thing_id}'s
    router.add_api_route("/plain", plain, methods=["DELETE"])
    router.add_api_route("/dict", returning_a_dict, methods=["GET"])
    guarded = APIRouter(prefix="/guarded", dependencies=[Depends(plain)])
    guarded.add_api_route("/plain", plain, methods=["GET"])
    table = exact_routes([*router.routes, *guarded.routes])
    assert sorted(table) == [("DELETE", "/things/plain"), ("POST", "/things/stats")]


def test_the_hot_paths_are_in_the_apps_table() -> None:
    table = exact_routes(route for router in ROUTERS for route in router.routes)
    for path in ("/jobs", "/jobs/batch", "/workers/fetch", "/workers/ack", "/workers/nack"):
        assert ("POST", f"/ojs/v1{path}") in table
    assert not any("{" in path for _, path in table)


def test_protocol_headers_then_the_table_run_before_fastapis_own_layers() -> None:
    """The two layers every request passes through come first, so an exact route does not go
    through FastAPI's error, telemetry and body-limit layers on its way (they still wrap the
    routes FastAPI serves)."""
    app = create_app(cast(Service, object()), max_body_bytes=1234)
    stack = app.build_middleware_stack()
    assert isinstance(stack, ProtocolHeaders)
    assert stack.max_body_bytes == 1234
    routes = stack.app
    assert isinstance(routes, ExactRoutes)
    assert ("POST", "/ojs/v1/jobs") in routes.routes
    assert isinstance(routes.app, ServerErrorMiddleware)


async def serving(app: RedriveApp) -> Callable[[], Awaitable[None]]:
    """Start the app as an ASGI server does (lifespan startup); the function that stops it."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()
    running = asyncio.create_task(app({"type": "lifespan"}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"

    async def stop() -> None:
        await inbox.put({"type": "lifespan.shutdown"})
        await running

    return stop


async def not_found(app: RedriveApp) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get("/ojs/v1/nowhere")


@pytest.mark.anyio
async def test_once_started_without_telemetry_requests_skip_fastapis_per_request_check() -> None:
    app = create_app(cast(Service, object()))
    assert isinstance(app, RedriveApp)
    stop = await serving(app)
    assert app.untraced_stack is not None and app.untraced_stack is app.middleware_stack
    answer = await not_found(app)
    await stop()
    assert answer.status_code == 404
    assert answer.headers["ojs-version"] == "1.0"
    assert answer.json()["error"]["code"] == "not_found"


@pytest.mark.anyio
async def test_with_telemetry_configured_requests_keep_fastapis_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = create_app(cast(Service, object()))
    assert isinstance(app, RedriveApp)
    monkeypatch.setattr(app._native_telemetry, "enabled", lambda: True)
    stop = await serving(app)
    assert app.untraced_stack is None
    assert (await not_found(app)).status_code == 404
    await stop()


def test_every_included_router_is_built_when_the_app_starts() -> None:
    """FastAPI builds an included router's routes on the first request that reaches it; the app
    builds them all as it starts, so no request after a start pays for it. Fails if FastAPI
    changes how it includes routers (the start-up no longer builds them: revisit build_routes)."""
    app = cast(RedriveApp, create_app(cast(Service, object())))
    included = [route for route in app.router.routes if hasattr(route, "effective_candidates")]
    assert len(included) >= len(ROUTERS)
    built = "_effective_candidates_version"
    assert all(getattr(route, built) is None for route in included)
    app.build_routes()
    assert all(getattr(route, built) is not None for route in included)


def test_the_apps_state_values_are_plain_attributes_kept_in_step_with_its_items() -> None:
    """Read per request (the service, whether auth is on): found without State.__getattr__,
    whichever way a value is set or removed."""
    service = cast(Service, object())
    app = create_app(service, auth_required=True)
    assert vars(app.state)["service"] is service and vars(app.state)["auth_required"] is True
    app.state["extra"] = 1
    assert vars(app.state)["extra"] == 1 and app.state.extra == 1
    app.state.extra = 2
    assert app.state["extra"] == 2
    del app.state["extra"]
    assert "extra" not in vars(app.state) and "extra" not in list(app.state)
    app.state.other = 3
    del app.state.other
    assert not hasattr(app.state, "other") and len(app.state) == 2
