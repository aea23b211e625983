"""Incidents: lists, reads, their arrivals per bucket (trends), guarded state changes, classes,
root-cause records, which incidents a redrive touches that lack one, and the backfill of episodes
from before incidents (entering dead letters add to their incidents in store/dead_letters.py)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from redrive.ports import IncidentStore
from redrive.store.base import SqlBase
from redrive.store.codec import (
    dead_letter_from_row,
    dump,
    incident_entry_record,
    incident_from_row,
    root_cause_from_row,
)
from redrive.store.dead_letters import filter_parameters

# Named for the types only (the rows become records in store/codec.py): a producer that only
# enqueues loads no incident module.
if TYPE_CHECKING:
    from redrive.domain.dead_letter import DeadLetter
    from redrive.domain.dead_letter_filter import DeadLetterFilter
    from redrive.domain.incident import Incident, IncidentEntry, IncidentQuery, StateChange
    from redrive.domain.root_cause import RootCause, Unexplained
    from redrive.domain.trend import Buckets


class SqlIncidents(SqlBase, IncidentStore):
    async def upsert_incidents(self, entries: list[IncidentEntry], regress: bool) -> list[Incident]:
        """One statement for the whole batch; the incidents as they are after it."""
        if not entries:
            return []
        incidents = [incident_entry_record(entry) for entry in entries]
        found = await self._rows("upsert_incidents", incidents=dump(incidents), regress=regress)
        return [incident_from_row(row) for row in found]

    async def list_incidents(self, query: IncidentQuery) -> list[Incident]:
        from redrive.domain.incident import Sort

        states = None if query.states is None else list(query.states)
        ordered = (
            "select_incidents_by_count" if query.sort == Sort.COUNT else "select_incidents_recent"
        )
        rows = await self._rows(
            ordered,
            tenant_id=query.tenant_id,
            states=self.executor.list_parameter(states),
            type=query.type,
            type_prefix=query.type_prefix,
            queue=query.queue,
            error_type=query.error_type,
            cursor_value=query.cursor_value,
            cursor_id=query.cursor_id,
            limit=query.limit,
        )
        return [incident_from_row(row) for row in rows]

    async def get_incident(self, incident_id: str, tenant_id: str | None) -> Incident | None:
        rows = await self._rows("select_incident", id=incident_id, tenant_id=tenant_id)
        return incident_from_row(rows[0]) if rows else None

    async def count_incident_arrivals(
        self, incident_ids: list[str], tenant_id: str | None, buckets: Buckets
    ) -> dict[str, dict[int, int]]:
        if not incident_ids:
            return {}
        rows = await self._rows(
            "count_incident_arrivals",
            ids=self.executor.list_parameter(incident_ids),
            tenant_id=tenant_id,
            start=buckets.start,
            end=buckets.end,
            width=buckets.width,
        )
        found: dict[str, dict[int, int]] = {}
        for row in rows:
            found.setdefault(row["incident_id"], {})[int(row["bucket"])] = int(row["count"])
        return found

    async def change_incident_state(
        self, change: StateChange, tenant_id: str | None
    ) -> Incident | None:
        rows = await self._rows(
            "change_incident_state",
            id=change.incident_id,
            expected_state=change.expected_state,
            state=change.state,
            fix_reference=change.fix_reference,
            changed_at=change.changed_at,
            changed_by=change.changed_by,
            tenant_id=tenant_id,
        )
        return incident_from_row(rows[0]) if rows else None

    async def unfingerprinted_dead_letters(self, limit: int) -> list[DeadLetter]:
        rows = await self._rows("select_unfingerprinted_dead_letters", limit=limit)
        return [dead_letter_from_row(row) for row in rows]

    async def fingerprint_dead_letters(self, dead_letters: list[DeadLetter]) -> set[str]:
        if not dead_letters:
            return set()
        rows = [
            {"id": dead.id, "fingerprint": dead.fingerprint,
             "fingerprint_version": dead.fingerprint_version, "incident_id": dead.incident_id}
            for dead in dead_letters
        ]  # fmt: skip
        return {row["id"] for row in await self._rows("fingerprint_dead_letters", rows=dump(rows))}

    async def classify_incident(
        self, incident_id: str, classification: str, classified_by: str, tenant_id: str | None
    ) -> Incident | None:
        rows = await self._rows(
            "classify_incident",
            id=incident_id,
            classification=classification,
            classified_by=classified_by,
            tenant_id=tenant_id,
        )
        return incident_from_row(rows[0]) if rows else None

    async def get_root_cause(self, incident_id: str, tenant_id: str | None) -> RootCause | None:
        rows = await self._rows("select_root_cause", incident_id=incident_id, tenant_id=tenant_id)
        return root_cause_from_row(rows[0]) if rows else None

    async def save_root_cause(self, root_cause: RootCause) -> RootCause | None:
        rows = await self._rows("save_root_cause", **asdict(root_cause))
        return root_cause_from_row(rows[0]) if rows else None

    async def unexplained_incidents(
        self, filters: DeadLetterFilter, limit: int
    ) -> list[Unexplained]:
        # An error type alone: read the few incidents from its index rather than probe each.
        by_error = filters.error_type is not None and all(
            value is None
            for value in (filters.incident_id, filters.queue, filters.type,
                          filters.type_prefix, filters.fingerprint)
        )  # fmt: skip
        from redrive.domain.root_cause import Unexplained

        named = (
            "select_unexplained_incidents_by_error" if by_error else "select_unexplained_incidents"
        )
        rows = await self._rows(named, limit=limit, **filter_parameters(filters))
        return [Unexplained(row["id"], row["message"], row["classification"]) for row in rows]

    async def unexplained_among(
        self, incident_ids: list[str], tenant_id: str | None
    ) -> list[Unexplained]:
        from redrive.domain.root_cause import Unexplained

        if not incident_ids:
            return []
        rows = await self._rows(
            "select_unexplained_among",
            ids=self.executor.list_parameter(incident_ids),
            tenant_id=tenant_id,
        )
        return [Unexplained(row["id"], row["message"], row["classification"]) for row in rows]

    async def dead_letters_by_class(self) -> dict[str, int]:
        rows = await self._rows("count_dead_by_incident_class")
        return {row["classification"]: int(row["count"]) for row in rows}
