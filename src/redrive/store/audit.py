"""The audit log as stored: records appended to each tenant's chain, and the chain heads."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from redrive.ports import AuditStore
from redrive.store.base import SqlBase

# Imported where records are read or written: a producer that only enqueues audits nothing.
if TYPE_CHECKING:
    from redrive.domain.audit import AuditQuery, AuditRecord, ChainHead


def _record(row: dict[str, Any]) -> AuditRecord:
    from redrive.domain.audit import AuditRecord

    return AuditRecord(
        id=row["id"],
        tenant_id=row["tenant_id"],
        seq=int(row["seq"]),
        time=int(row["time"]),
        key_id=row["key_id"],
        actor=row["actor"],
        role=row["role"],
        action=row["action"],
        target=row["target"],
        affected=int(row["affected"]),
        request_id=row["request_id"],
        outcome=row["outcome"],
        previous_hash=row["previous_hash"],
        hash=row["hash"],
    )


def _head(row: dict[str, Any]) -> ChainHead:
    from redrive.domain.audit import ChainHead

    return ChainHead(row["tenant_id"], int(row["seq"]), row["hash"])


class SqlAudit(SqlBase, AuditStore):
    async def lock_audit_head(self, tenant_id: str) -> ChainHead:
        from redrive.domain.audit import GENESIS

        rows = await self._rows("lock_audit_head", tenant_id=tenant_id, genesis=GENESIS)
        return _head(rows[0])

    async def append_audit_record(self, record: AuditRecord) -> None:
        await self._run("append_audit_record", **asdict(record))

    async def list_audit_records(self, query: AuditQuery) -> list[AuditRecord]:
        rows = await self._rows(
            "select_audit_records",
            tenant_id=query.tenant_id,
            action=None if query.action is None else query.action.value,
            actor=query.actor,
            key_id=query.key_id,
            outcome=None if query.outcome is None else query.outcome.value,
            request_id=query.request_id,
            since=query.since,
            until=query.until,
            target=query.target,
            cursor_at=query.cursor_at,
            cursor_seq=query.cursor_seq,
            cursor_id=query.cursor_id,
            limit=query.limit,
        )
        return [_record(row) for row in rows]

    async def audit_chain(self, tenant_id: str, after_seq: int, limit: int) -> list[AuditRecord]:
        rows = await self._rows(
            "select_audit_chain", tenant_id=tenant_id, after_seq=after_seq, limit=limit
        )
        return [_record(row) for row in rows]

    async def audit_heads(self, tenant_id: str | None) -> list[ChainHead]:
        return [_head(row) for row in await self._rows("select_audit_heads", tenant_id=tenant_id)]

    async def audit_tenants(self, tenant_id: str | None) -> list[str]:
        rows = await self._rows("select_audit_tenants", tenant_id=tenant_id)
        return [row["tenant_id"] for row in rows]
