"""The FastAPI application factory: routes, error handlers and protocol middleware."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

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
from redrive.api.exact_routes import ExactRoutes, exact_routes
from redrive.api.middleware import ProtocolHeaders
from redrive.service.facade import Service

Hook = Callable[[], Awaitable[None]]


def create_app(
    service: Service,
    max_body_bytes: int = 1_048_576,
    auth_required: bool = False,
    on_startup: Hook | None = None,
    on_shutdown: Hook | None = None,
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if on_startup is not None:
            await on_startup()
        try:
            yield
        finally:
            if on_shutdown is not None:
                await on_shutdown()

    app = FastAPI(
        title="redrive",
        version=__version__,
        description="An Open Job Spec job server built around the dead-letter queue.",
        lifespan=lifespan,
        dependencies=[Depends(authorize)],
    )
    app.state.service = service
    app.state.auth_required = auth_required
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    openapi.install(app)
    # The last added runs first: ProtocolHeaders wraps every request, ExactRoutes included.
    api_routes = (route for router in ROUTERS for route in router.routes)
    app.add_middleware(ExactRoutes, routes=exact_routes(api_routes))
    app.add_middleware(ProtocolHeaders, max_body_bytes=max_body_bytes)
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
