"""The dashboard's pages (GET, never changing anything) under /ui; actions live in actions.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends
from starlette.requests import Request
from starlette.responses import Response

from redrive.dashboard import bulk, views
from redrive.dashboard.access import access_check, caller_of
from redrive.dashboard.actions import add_action_routes, retry_form_page
from redrive.dashboard.alerts import add_alert_routes
from redrive.dashboard.filters import PAGE_SIZES, WITHIN_CHOICES, ListFilter, page_size
from redrive.dashboard.incidents import add_incident_routes
from redrive.dashboard.redrives import add_redrive_routes
from redrive.dashboard.rendering import PREFIX, error_page, render
from redrive.dashboard.sign_in import add_sign_in_routes
from redrive.domain.audit import Action, Outcome, encode_audit_cursor, parse_audit_query
from redrive.domain.caller import Permission
from redrive.domain.dead_letter import STATUSES
from redrive.domain.errors import OjsError
from redrive.domain.retention import PRUNING_POLICIES
from redrive.service.facade import Service

Handler = Callable[..., Awaitable[Response]]


def html_errors(handler: Handler) -> Handler:
    """Refusals the service raises become an HTML page with the message, never a traceback."""

    @wraps(handler)
    async def wrapped(*args: Any, **kwargs: Any) -> Response:
        try:
            return await handler(*args, **kwargs)
        except OjsError as error:
            request = kwargs.get("request") or next(a for a in args if isinstance(a, Request))
            return error_page(request, error)

    return wrapped


def is_htmx(request: Request) -> bool:
    """An htmx swap wants a fragment; a history restore (back button) wants the whole page."""
    headers = request.headers
    return headers.get("hx-request") == "true" and not headers.get("hx-history-restore-request")


def add_page_routes(router: APIRouter, service: Service) -> None:
    @router.get("", include_in_schema=False)
    @router.get("/", include_in_schema=False)
    @html_errors
    async def overview(request: Request) -> Response:
        context = await views.overview(service, caller_of(request))
        template = "_overview.html" if is_htmx(request) else "overview.html"
        return render(request, template, {"page": "overview", "title": "Overview", **context})

    @router.get("/dead-letters", include_in_schema=False)
    @html_errors
    async def dead_letters(request: Request) -> Response:
        query = request.query_params
        list_filter = ListFilter.from_query(query)
        context = await views.dead_letter_list(
            service, caller_of(request), list_filter, page_size(query), query.get("cursor")
        )
        context.update(
            page="dead-letters", title="Dead letters", statuses=STATUSES,
            within_choices=WITHIN_CHOICES, page_sizes=PAGE_SIZES,
        )  # fmt: skip
        template = "_results.html" if is_htmx(request) else "dead_letters.html"
        return render(request, template, context)

    @router.get("/dead-letters/count", include_in_schema=False)
    @html_errors
    async def dead_letter_count(request: Request) -> Response:
        list_filter = ListFilter.from_query(request.query_params)
        context = await views.dead_letter_list(service, caller_of(request), list_filter, 1, None)
        return render(request, "_count.html", context)

    @router.get("/dead-letters/bulk", include_in_schema=False)
    @html_errors
    async def bulk_confirmation(request: Request) -> Response:
        plan = bulk.BulkPlan.from_values(
            request.query_params.get("do", ""),
            request.query_params.getlist("id"),
            ListFilter.from_query(request.query_params),
        )
        context = await bulk.preview(service, caller_of(request), plan, pin=True)
        return render(request, "bulk_confirm.html", context)

    @router.get("/dead-letters/{job_id}", include_in_schema=False)
    @html_errors
    async def detail(job_id: str, request: Request) -> Response:
        found = await views.detail(service, caller_of(request), job_id, dict(request.query_params))
        context = {
            "page": "dead-letters",
            "title": f"Dead letter {views.row(found.episode)['type']}",
            "dead": found.episode,
            "job": found.episode.job,
            "history": found.history,
            "current": found.current,
            "now": service.now(),
        }
        return render(request, "detail.html", context)

    @router.get("/dead-letters/{job_id}/retry", include_in_schema=False)
    @html_errors
    async def retry_form(job_id: str, request: Request) -> Response:
        dead, _ = await service.dead_letters.get(caller_of(request), job_id)
        return await retry_form_page(request, dead, dict(request.query_params))

    @router.get("/dead-letters/{job_id}/delete", include_in_schema=False)
    @html_errors
    async def delete_confirmation(job_id: str, request: Request) -> Response:
        dead, _ = await service.dead_letters.get(caller_of(request), job_id)
        context = {"page": "dead-letters", "title": "Delete dead letter", "dead": dead}
        return render(request, "delete_confirm.html", {**context, "row": views.row(dead)})

    @router.get("/rules", include_in_schema=False)
    @html_errors
    async def rules(request: Request) -> Response:
        context = {
            "page": "rules",
            "title": "Replay rules",
            "rules": [rule.to_document() for rule in await service.replay.list(caller_of(request))],
        }
        return render(request, "rules.html", context)

    @router.get("/retention", include_in_schema=False)
    @html_errors
    async def retention(request: Request) -> Response:
        caller = caller_of(request)
        policies = await service.retention.policies(caller)
        # As the policy of changing them says (api/policies.py): they apply to every tenant.
        changeable = caller.all_tenants and caller.may(Permission.ADMINISTER)
        stats = await service.dead_letters.stats(caller)
        context = {
            "page": "retention",
            "title": "Retention",
            "global_policy": policies.global_policy.to_document(),
            "queue_policies": {
                queue: policy.to_document() for queue, policy in sorted(policies.queues.items())
            },
            "updated": policies.updated,
            "dead_by_queue": stats.by_queue,
            "next_prune_at": service.retention.next_prune_at(),
            "archives": await service.retention.archives(caller),
            "floor_holding": await service.retention.floor_holding(caller),
            "changeable": changeable,
            "pruning_policies": PRUNING_POLICIES,
            "now": service.now(),
        }
        return render(request, "retention.html", context)


def add_audit_routes(router: APIRouter, service: Service) -> None:
    async def audit_page(request: Request, verified: bool) -> Response:
        values = {key: value for key, value in request.query_params.items()}
        query = parse_audit_query(values, service.now())
        caller = caller_of(request)
        records = await service.audit.list(caller, query)
        checks = await service.audit.verify(caller) if verified else None
        next_cursor = encode_audit_cursor(records[-1]) if len(records) == query.limit else None
        context = {
            "page": "audit",
            "title": "Audit log",
            "records": records,
            "query": query,
            "values": values,
            "actions": [action.value for action in Action],
            "outcomes": [outcome.value for outcome in Outcome],
            "checks": checks,
            "intact": checks is not None and all(check.intact for check in checks),
            "next_cursor": next_cursor,
            "next_query": urlencode({**values, "cursor": next_cursor or ""}),
        }
        return render(request, "audit.html", context)

    @router.get("/audit", include_in_schema=False)
    @html_errors
    async def audit(request: Request) -> Response:
        return await audit_page(request, verified=False)

    @router.get("/audit/verify", include_in_schema=False)
    @html_errors
    async def audit_verify(request: Request) -> Response:
        return await audit_page(request, verified=True)


def dashboard_router(service: Service) -> APIRouter:
    """Every dashboard page and action, under /ui, each checked against its policy for the
    signed-in caller (dashboard/access.py)."""
    router = APIRouter(
        prefix=PREFIX, include_in_schema=False, dependencies=[Depends(access_check(service))]
    )
    add_sign_in_routes(router, service, html_errors)
    add_page_routes(router, service)
    add_audit_routes(router, service)
    add_incident_routes(router, service, html_errors)
    add_redrive_routes(router, service, html_errors)
    add_alert_routes(router, service, html_errors)
    add_action_routes(router, service, html_errors)
    return router
