"""Audit log routes: list records with filters (newest first, keyset pages) and verify chains."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from redrive.api import openapi
from redrive.api.callers import caller_of, chosen_tenant
from redrive.api.dead_letter_requests import query_values
from redrive.api.http import ojs
from redrive.api.routes_jobs import service_of
from redrive.api.serialise import timestamp
from redrive.domain.audit import AuditRecord, ChainCheck, encode_audit_cursor, parse_audit_query
from redrive.domain.caller import Caller

router = APIRouter(prefix="/ojs/v1/admin/audit", tags=["audit"])


def audit_reader(request: Request) -> Caller:
    """With auth on, the key decides whose log is read. With auth off (a loopback server, or
    the CLI's --database), whoever reaches the server owns it: every tenant's log, unless
    X-OJS-Tenant names one."""
    caller = caller_of(request)
    if request.app.state.auth_required or chosen_tenant(request) is not None:
        return caller
    return replace(caller, all_tenants=True)


def record_document(record: AuditRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "tenant_id": record.tenant_id,
        "seq": record.seq,
        "time": timestamp(record.time),
        "key_id": record.key_id,
        "actor": record.actor,
        "role": record.role,
        "action": record.action,
        "target": record.target_value(),
        "affected": record.affected,
        "request_id": record.request_id,
        "outcome": record.outcome,
        "previous_hash": record.previous_hash,
        "hash": record.hash,
    }


def check_document(check: ChainCheck) -> dict[str, Any]:
    return {
        "tenant_id": check.tenant_id,
        "intact": check.intact,
        "records": check.records,
        "head_seq": check.head_seq,
        "head_hash": check.head_hash,
        "broken_seq": check.broken_seq,
        "problem": None if check.problem is None else check.problem.value,
        "detail": check.detail,
    }


@router.get(
    "",
    summary="List audit records, newest first",
    openapi_extra=openapi.audit_query(),
    responses=openapi.outcomes(400),
)
async def list_audit(request: Request) -> Response:
    service = service_of(request)
    query = parse_audit_query(query_values(request), service.now())
    records = await service.audit.list(audit_reader(request), query)
    pagination: dict[str, Any] = {"limit": query.limit, "has_more": len(records) == query.limit}
    if records and len(records) == query.limit:
        pagination["next_cursor"] = encode_audit_cursor(records[-1])
    return ojs(
        {"records": [record_document(record) for record in records], "pagination": pagination}
    )


@router.get(
    "/verify",
    summary="Verify every audit chain the caller can see (intact: false names the first break)",
    responses=openapi.outcomes(400),
)
async def verify_audit(request: Request) -> Response:
    checks = await service_of(request).audit.verify(audit_reader(request))
    return ojs(
        {
            "intact": all(check.intact for check in checks),
            "chains": [check_document(check) for check in checks],
        }
    )
