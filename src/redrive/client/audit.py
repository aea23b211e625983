"""Audit log results as the client returns them: records, a page of them, chain checks."""

from __future__ import annotations

from typing import Any

from redrive.client.frozen import frozen_dataclass


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@frozen_dataclass
class AuditRecord:
    """One operator action (or the server's own) as the audit log holds it."""

    id: str
    tenant_id: str
    seq: int
    time: str
    key_id: str | None
    actor: str
    role: str
    action: str
    target: Any
    affected: int
    request_id: str | None
    outcome: str
    previous_hash: str
    hash: str

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> AuditRecord:
        return cls(
            id=str(document.get("id", "")),
            tenant_id=str(document.get("tenant_id", "")),
            seq=_number(document.get("seq")),
            time=str(document.get("time", "")),
            key_id=_text(document.get("key_id")),
            actor=str(document.get("actor", "")),
            role=str(document.get("role", "")),
            action=str(document.get("action", "")),
            target=document.get("target"),
            affected=_number(document.get("affected")),
            request_id=_text(document.get("request_id")),
            outcome=str(document.get("outcome", "")),
            previous_hash=str(document.get("previous_hash", "")),
            hash=str(document.get("hash", "")),
        )


@frozen_dataclass
class AuditPage:
    """Records, newest first; `next_cursor` fetches the page after (None on the last one)."""

    records: list[AuditRecord]
    next_cursor: str | None

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> AuditPage:
        pagination = document.get("pagination")
        cursor = pagination.get("next_cursor") if isinstance(pagination, dict) else None
        items = document.get("records") or []
        return cls([AuditRecord.from_document(item) for item in items], _text(cursor))


@frozen_dataclass
class ChainCheck:
    """One tenant's chain verified: intact, or the first broken record and why."""

    tenant_id: str
    intact: bool
    records: int
    head_seq: int
    head_hash: str
    broken_seq: int | None
    problem: str | None
    detail: str | None

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ChainCheck:
        broken = document.get("broken_seq")
        return cls(
            tenant_id=str(document.get("tenant_id", "")),
            intact=document.get("intact") is True,
            records=_number(document.get("records")),
            head_seq=_number(document.get("head_seq")),
            head_hash=str(document.get("head_hash", "")),
            broken_seq=broken if isinstance(broken, int) else None,
            problem=_text(document.get("problem")),
            detail=_text(document.get("detail")),
        )


@frozen_dataclass
class AuditVerification:
    """Every chain the caller can see; `intact` only when each one is."""

    intact: bool
    chains: list[ChainCheck]

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> AuditVerification:
        chains = [ChainCheck.from_document(item) for item in document.get("chains") or []]
        return cls(document.get("intact") is True and all(c.intact for c in chains), chains)
