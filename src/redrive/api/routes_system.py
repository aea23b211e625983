"""System routes: manifest, health, readiness, Prometheus metrics and the event stream."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive import __version__
from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.http import ojs
from redrive.api.metrics import render_metrics
from redrive.api.query import integer
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import event_document

router = APIRouter(tags=["system"])


@router.get("/ojs/manifest", summary="What this server implements", responses=openapi.outcomes())
async def manifest(request: Request) -> Response:
    backend = service_of(request).metrics.backend
    return ojs(
        {
            "specversion": "1.0",
            "ojs_version": "1.0",
            "implementation": {"name": "redrive", "version": __version__, "language": "python"},
            "conformance_level": 2,
            "conformance_tier": "runtime",
            "protocols": ["http"],
            "backend": backend,
            "capabilities": {
                "dead_letter": True,
                "delayed_jobs": True,
                "cron_jobs": True,
                "job_ttl": True,
                "batch_enqueue": True,
                "batch_ack": True,
                "multi_tenancy": True,
                "priority": True,
            },
            "extensions": {
                "official": [
                    {"name": "dead-letter", "uri": "urn:ojs:ext:dead-letter", "version": "1.0.0"},
                    {"name": "admin-api", "uri": "urn:ojs:ext:admin-api", "version": "1.0.0"},
                    {
                        "name": "multi-tenancy",
                        "uri": "urn:ojs:ext:multi-tenancy",
                        "version": "1.0.0",
                    },
                    {
                        "name": "observability",
                        "uri": "urn:ojs:ext:observability",
                        "version": "1.0.0",
                    },
                    {"name": "webhooks", "uri": "urn:ojs:ext:webhooks", "version": "1.0.0"},
                ]
            },
            "endpoints": {
                "manifest": "/ojs/manifest",
                "health": "/ojs/v1/health",
                "ack_batch": "/ojs/v1/workers/ack/batch",
                "nack_batch": "/ojs/v1/workers/nack/batch",
            },
        }
    )


async def _health(request: Request) -> Response:
    status = await service_of(request).metrics.health()
    body = {
        "status": "ok" if status.healthy else "degraded",
        "version": "1.0",
        "server_version": __version__,
        "uptime_seconds": status.uptime_seconds,
        "backend": {"type": status.backend, "status": "ok" if status.healthy else "unhealthy"},
    }
    return ojs(body, 200 if status.healthy else 503)


@router.get("/ojs/v1/health", summary="Health", responses=openapi.outcomes(503))
async def health(request: Request) -> Response:
    return await _health(request)


@router.get("/health", summary="Health", responses=openapi.outcomes(503))
async def root_health(request: Request) -> Response:
    return await _health(request)


@router.get("/ready", summary="Readiness: the database answers", responses=openapi.outcomes(503))
async def ready(request: Request) -> Response:
    if await service_of(request).healthy():
        return ojs({"status": "ready"})
    return ojs({"status": "not_ready"}, 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    responses=openapi.outcomes(media_type="text/plain"),
)
async def metrics(request: Request) -> Response:
    text = render_metrics(await service_of(request).metrics.snapshot())
    return Response(text, headers={"content-type": "text/plain"})


@router.get(
    "/ojs/v1/events",
    summary="Lifecycle events, oldest first",
    openapi_extra=openapi.events_query(),
    responses=openapi.outcomes(400),
)
async def events(request: Request) -> Response:
    query = request.query_params
    limit = integer(request, "limit", 100, 1, 1000)
    found = await service_of(request).events.list(
        caller_of(request), query.get("types"), query.get("queues"), query.get("job_types"),
        query.get("after"), limit,
    )  # fmt: skip
    cursor = found[-1].id if found else query.get("after")
    return ojs({"events": [event_document(event) for event in found], "cursor": cursor,
                "has_more": len(found) == limit})  # fmt: skip
