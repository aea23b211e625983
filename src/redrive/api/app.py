"""The FastAPI application factory: routes, error handlers and protocol middleware."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send

from redrive import __version__
from redrive.api import (
    openapi,
    routes_admin,
    routes_alerts,
    routes_audit,
    routes_cron,
    routes_dead_letter_admin,
    routes_dead_letters,
    routes_incidents,
    routes_jobs,
    routes_keys,
    routes_legal_holds,
    routes_queues,
    routes_redrives,
    routes_schemas,
    routes_system,
    routes_webhooks,
    routes_workers,
)
from redrive.api.authorization import authorize
from redrive.api.errors import install_error_handlers
from redrive.api.exact_routes import ExactRoutes, Key, exact_routes
from redrive.api.middleware import ProtocolHeaders
from redrive.service.facade import Service

Hook = Callable[[], Awaitable[None]]


class AppState(State):
    """Starlette's app state with its values as plain attributes too. State serves them from
    `__getattr__`, which Python calls only after its own lookup has failed, raising and
    formatting an AttributeError each time: every enqueue request read two (the service and
    whether auth is on), 4,000 instructions. Set here, they are found at once."""

    def __setattr__(self, key: str, value: Any) -> None:
        super().__setattr__(key, value)
        object.__setattr__(self, key, value)

    def __delattr__(self, key: str) -> None:
        super().__delattr__(key)
        object.__delattr__(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        delattr(self, key)


class RedriveApp(FastAPI):
    """FastAPI with redrive's two request layers outermost: ProtocolHeaders, then ExactRoutes,
    then FastAPI's own stack (its last-resort 500s, exception telemetry and body limit around
    the routes it serves). Added with `add_middleware` they ran inside those three layers, three
    calls per request that an exact route does without: ProtocolHeaders answers the last-resort
    500s and caps bodies itself, and ExactRoutes maps the errors of its routes itself."""

    max_body_bytes = 1_048_576
    exact: Mapping[Key, APIRoute] = {}
    # The server's proxy-header step (uvicorn's, set by `redrive serve`), put around the app
    # for the HTTP requests that name a forwarded client or scheme (`ProtocolHeaders`), and,
    # once started, around everything that does not take `untraced_stack` (`proxied`): traced
    # requests (FastAPI's telemetry reads the scheme before the middleware stack) and websockets.
    proxy_headers: Callable[[ASGIApp], ASGIApp] | None = None
    proxied: ASGIApp | None = None
    # Set once the app has started when FastAPI's native OpenTelemetry is off (no provider
    # configured): HTTP requests then go straight to the middleware stack. FastAPI asks on
    # every request (three provider lookups and environment reads: about 4% of the server's
    # CPU per enqueue request); a provider is configured before the app starts or in its
    # lifespan's start-up, so asking once then gives the same answer.
    untraced_stack: ASGIApp | None = None

    def build_middleware_stack(self) -> ASGIApp:
        routes = ExactRoutes(super().build_middleware_stack(), self.exact)
        forwarded = None if self.proxy_headers is None else self.proxy_headers(routes)
        return ProtocolHeaders(routes, self.max_body_bytes, forwarded)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stack = self.untraced_stack
        if stack is not None and scope["type"] == "http":
            scope["app"] = self
            await stack(scope, receive, send)
            return
        proxied = self.proxied
        if proxied is not None:
            await proxied(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def started(self) -> None:
        """Decide `untraced_stack` (kept off where FastAPI no longer has the attribute this
        reads, or an app-wide root path would have to be set on each request)."""
        native = getattr(self, "_native_telemetry", None)
        if native is not None and not native.enabled() and not self.root_path:
            self.untraced_stack = self.middleware_stack
        if self.proxy_headers is not None:
            self.proxied = self.proxy_headers(super().__call__)
        self.build_routes()

    def build_routes(self) -> None:
        """Build each included router's routes now. FastAPI (0.16x) builds them on the first
        request that reaches the router: 30-50 ms of CPU over redrive's routers, paid by the
        first requests after a start (a producer's first calls, a dashboard's first page)."""
        for route in self.router.routes:
            build = getattr(route, "effective_candidates", None)
            if build is not None:
                build()


def create_app(
    service: Service,
    max_body_bytes: int = 1_048_576,
    auth_required: bool = False,
    on_startup: Hook | None = None,
    on_shutdown: Hook | None = None,
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: RedriveApp) -> AsyncIterator[None]:
        if on_startup is not None:
            await on_startup()
        app.started()
        try:
            yield
        finally:
            if on_shutdown is not None:
                await on_shutdown()

    app = RedriveApp(
        title="redrive",
        version=__version__,
        description="An Open Job Spec job server built around the dead-letter queue.",
        lifespan=lifespan,
        dependencies=[Depends(authorize)],
    )
    app.state = AppState()
    app.state.service = service
    app.state.auth_required = auth_required
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    openapi.install(app)
    app.max_body_bytes = max_body_bytes
    app.exact = exact_routes(route for router in ROUTERS for route in router.routes)
    return app


ROUTERS = (
    routes_system.router,
    routes_jobs.router,
    routes_workers.job_router,
    routes_workers.router,
    routes_queues.router,
    routes_cron.router,
    routes_admin.router,
    *routes_dead_letter_admin.routers,
    routes_redrives.router,
    *routes_dead_letters.routers,
    routes_incidents.router,
    routes_legal_holds.router,
    routes_keys.router,
    routes_schemas.router,
    routes_audit.router,
    routes_webhooks.router,
    routes_alerts.router,
)
