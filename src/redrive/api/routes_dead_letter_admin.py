"""Dead-letter administration routes: retention policies, pruning, archives and replay rules.

Served under both dead-letter path families, and registered before the `/{job_id}` routes so
that `retention`, `rules`, `archives` and `prune` are never read as job ids.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of
from redrive.api.http import ojs, read_json
from redrive.api.routes_dead_letters import ADMIN, DATA_PLANE
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import timestamp
from redrive.domain.errors import InvalidRequest
from redrive.domain.replay import parse_rule_changes
from redrive.domain.retention import RetentionPolicy, parse_policy_changes


def policy_document(queue: str | None, policy: RetentionPolicy, source: str) -> dict[str, Any]:
    return {"queue": queue, "scope": source, **policy.to_document()}


def confirm_prune(body: object) -> None:
    """A prune needs `{"confirm": true}`; it has no dry run (read /stats and /retention)."""
    if body is not None and not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", {"field": "body"})
    values = body or {}
    unknown = sorted(set(values) - {"confirm", "dry_run"})
    if unknown:
        raise InvalidRequest(f"unknown key {unknown[0]!r}; send confirm", {"field": unknown[0]})
    if values.get("dry_run") is not None:
        raise InvalidRequest(
            "prune has no dry run; read /stats and /retention instead", {"field": "dry_run"}
        )
    if values.get("confirm") is not True:
        raise InvalidRequest(
            "this prunes the dead-letter queue by the retention policies: send confirm: true",
            {"field": "confirm"},
        )


def build_router(prefix: str) -> APIRouter:
    router = APIRouter(prefix=prefix, tags=["dead-letter administration"])

    @router.get(
        "/retention",
        summary="Retention policies: the global one and per-queue overrides",
        responses=openapi.outcomes(),
    )
    async def retention(request: Request) -> Response:
        service = service_of(request).retention
        policies = await service.policies(caller_of(request))
        return ojs(
            {
                "global": policy_document(None, policies.global_policy, "global"),
                "queues": [
                    policy_document(queue, policy, "queue")
                    for queue, policy in sorted(policies.queues.items())
                ],
                "next_prune_at": timestamp(service.next_prune_at()),
            }
        )

    @router.put(
        "/retention",
        summary="Change the global retention policy",
        openapi_extra=openapi.body("RetentionPolicyChanges"),
        responses=openapi.outcomes(400),
    )
    async def set_global(request: Request) -> Response:
        service = service_of(request).retention
        changes = parse_policy_changes(await read_json(request))
        policy = await service.set_policy(caller_of(request), None, changes)
        return ojs({"policy": policy_document(None, policy, "global")})

    @router.get(
        "/retention/{queue}",
        summary="The retention policy that applies to a queue",
        responses=openapi.outcomes(),
    )
    async def queue_policy(queue: str, request: Request) -> Response:
        policies = await service_of(request).retention.policies(caller_of(request))
        source = "queue" if queue in policies.queues else "global"
        return ojs({"policy": policy_document(queue, policies.for_queue(queue), source)})

    @router.put(
        "/retention/{queue}",
        summary="Set a queue's retention override",
        openapi_extra=openapi.body("RetentionPolicyChanges"),
        responses=openapi.outcomes(400),
    )
    async def set_queue(queue: str, request: Request) -> Response:
        service = service_of(request).retention
        changes = parse_policy_changes(await read_json(request))
        policy = await service.set_policy(caller_of(request), queue, changes)
        return ojs({"policy": policy_document(queue, policy, "queue")})

    @router.delete(
        "/retention/{queue}",
        summary="Remove a queue's override (back to global)",
        responses=openapi.outcomes(400, 404),
    )
    async def remove_queue(queue: str, request: Request) -> Response:
        await service_of(request).retention.remove_policy(caller_of(request), queue)
        return ojs({"deleted": True, "queue": queue})

    @router.post(
        "/prune",
        summary="Prune now by the retention policies (needs confirm: true)",
        openapi_extra=openapi.body("PruneRequest"),
        responses=openapi.outcomes(400),
    )
    async def prune(request: Request) -> Response:
        confirm_prune(await read_json(request, required=False))
        report = await service_of(request).retention.prune(caller_of(request))
        return ojs(
            {
                "deleted": report.deleted,
                "archived": report.archived,
                "dead_letters": sum(report.by_queue.values()),
                "by_queue": dict(report.by_queue),
                "archives": report.archives,
                "floor_holding": report.floor_holding,
            }
        )

    @router.get(
        "/archives",
        summary="Archive files written by pruning",
        responses=openapi.outcomes(),
    )
    async def archives(request: Request) -> Response:
        found = await service_of(request).retention.archives(caller_of(request))
        items = [
            {"name": archive.name, "entries": archive.entries,
             "created_at": timestamp(archive.created_at),
             "restored_at": timestamp(archive.restored_at)}
            for archive in found
        ]  # fmt: skip
        return ojs({"archives": items})

    @router.post(
        "/archives/{name}/restore",
        summary="Put an archive back in the dead-letter queue",
        responses=openapi.outcomes(400, 404),
    )
    async def restore(name: str, request: Request) -> Response:
        return ojs(await service_of(request).retention.restore(caller_of(request), name))

    return router


def build_rules_router(prefix: str) -> APIRouter:
    router = APIRouter(prefix=prefix, tags=["dead-letter administration"])

    @router.get(
        "/rules",
        summary="Automatic replay rules",
        responses=openapi.outcomes(400),
    )
    async def rules(request: Request) -> Response:
        found = await service_of(request).replay.list(caller_of(request))
        return ojs({"rules": [rule.to_document() for rule in found]})

    @router.post(
        "/rules",
        status_code=201,
        summary="Create a replay rule",
        openapi_extra=openapi.body("ReplayRule"),
        responses=openapi.outcomes(400, 409, ok=201),
    )
    async def create_rule(request: Request) -> Response:
        service = service_of(request)
        changes = parse_rule_changes(await read_json(request), service.now())
        rule = await service.replay.create(caller_of(request), changes)
        return ojs({"rule": rule.to_document()}, 201)

    @router.get(
        "/rules/{rule_id}",
        summary="One replay rule (by id or name)",
        responses=openapi.outcomes(400, 404),
    )
    async def get_rule(rule_id: str, request: Request) -> Response:
        rule = await service_of(request).replay.get(caller_of(request), rule_id)
        return ojs({"rule": rule.to_document()})

    @router.patch(
        "/rules/{rule_id}",
        summary="Change a replay rule",
        openapi_extra=openapi.body("ReplayRuleChanges"),
        responses=openapi.outcomes(400, 404),
    )
    async def update_rule(rule_id: str, request: Request) -> Response:
        service = service_of(request)
        changes = parse_rule_changes(await read_json(request), service.now())
        rule = await service.replay.update(caller_of(request), rule_id, changes)
        return ojs({"rule": rule.to_document()})

    @router.delete(
        "/rules/{rule_id}",
        summary="Delete a replay rule",
        responses=openapi.outcomes(400, 404),
    )
    async def delete_rule(rule_id: str, request: Request) -> Response:
        rule = await service_of(request).replay.delete(caller_of(request), rule_id)
        return ojs({"deleted": True, "rule": rule.to_document()})

    return router


routers = [
    build(prefix) for prefix in (DATA_PLANE, ADMIN) for build in (build_router, build_rules_router)
]
