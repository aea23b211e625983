"""Legal holds as stored, and counting the dead letters they keep."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from redrive.ports import LegalHoldStore
from redrive.store.base import SqlBase
from redrive.store.dead_letters import filter_parameters

# Imported where holds are read: a producer or worker never reads one.
if TYPE_CHECKING:
    from redrive.domain.dead_letter_filter import DeadLetterFilter
    from redrive.domain.legal_hold import LegalHold


def _hold(row: dict[str, Any]) -> LegalHold:
    from redrive.domain.legal_hold import LegalHold

    return LegalHold(
        id=row["id"],
        tenant_id=row["tenant_id"],
        scope=row["scope"],
        reason=row["reason"],
        created_at=int(row["created_at"]),
        created_by=row["created_by"],
        job_id=row["job_id"],
        incident_id=row["incident_id"],
        queue=row["queue"],
        type=row["type"],
        error_type=row["error_type"],
        released_at=None if row["released_at"] is None else int(row["released_at"]),
        released_by=row["released_by"],
    )


class SqlLegalHolds(SqlBase, LegalHoldStore):
    async def insert_legal_hold(self, hold: LegalHold) -> None:
        parameters = asdict(hold)
        del parameters["released_at"], parameters["released_by"]
        await self.executor.run("insert_legal_hold", parameters)

    async def list_legal_holds(
        self, tenant_id: str | None, include_released: bool, limit: int
    ) -> list[LegalHold]:
        rows = await self._rows(
            "select_legal_holds", tenant_id=tenant_id, all=include_released, limit=limit
        )
        return [_hold(row) for row in rows]

    async def get_legal_hold(self, hold_id: str, tenant_id: str | None) -> LegalHold | None:
        rows = await self._rows("select_legal_hold", id=hold_id, tenant_id=tenant_id)
        return _hold(rows[0]) if rows else None

    async def release_legal_hold(
        self, hold_id: str, tenant_id: str | None, now: int, released_by: str
    ) -> LegalHold | None:
        rows = await self._rows(
            "release_legal_hold", id=hold_id, tenant_id=tenant_id, now=now,
            released_by=released_by,
        )  # fmt: skip
        return _hold(rows[0]) if rows else None

    async def count_held_dead_letters(self, filters: DeadLetterFilter) -> int:
        rows = await self._rows("count_held_dead_letters", **filter_parameters(filters))
        return int(rows[0]["count"])
