"""The operators' web dashboard at /ui: server-rendered pages over the service, never SQL."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.responses import RedirectResponse
from starlette.staticfiles import StaticFiles

from redrive.dashboard.access import install_refusals
from redrive.dashboard.rendering import PREFIX, STATIC_DIRECTORY
from redrive.dashboard.routes import dashboard_router
from redrive.service.facade import Service

__all__ = ["dashboard_router", "install_dashboard"]


def install_dashboard(app: FastAPI, service: Service) -> None:
    """Mount the pages at /ui and their static files (CSS, app.js, vendored htmx) at /ui/static;
    refusals (sign in first, not allowed) become pages."""
    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC_DIRECTORY), name="dashboard-static")
    app.include_router(dashboard_router(service))
    install_refusals(app)

    async def home() -> RedirectResponse:
        return RedirectResponse(PREFIX, status_code=307)

    app.add_api_route("/", home, methods=["GET"], include_in_schema=False)
