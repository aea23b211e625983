"""The events outbox: appending events (and finding who listens), reading them, trimming."""

from __future__ import annotations

from redrive.domain.webhooks import Listener
from redrive.ports import EventQuery, EventStore, StoredEvent
from redrive.store.base import SqlBase
from redrive.store.codec import event_from_row, event_record, load


class SqlEvents(SqlBase, EventStore):
    async def add_events(self, events: list[StoredEvent]) -> list[Listener]:
        if not events:
            return []
        records = [event_record(event) for event in events]
        rows = await self._rows(
            "insert_events",
            rows=self.executor.records_parameter(records),
            tenant_ids=self.executor.list_parameter(
                sorted({record["tenant_id"] for record in records})
            ),
        )
        return [Listener(row["id"], row["tenant_id"], tuple(load(row["events"]))) for row in rows]

    async def list_events(self, query: EventQuery) -> list[StoredEvent]:
        after_sequence = None
        if query.after_id:
            found = await self._rows("select_event_sequence", id=query.after_id)
            after_sequence = found[0]["sequence"] if found else None
        rows = await self._rows(
            "select_events",
            tenant_id=query.tenant_id,
            after_sequence=after_sequence,
            types=self.executor.list_parameter(query.types),
            queues=self.executor.list_parameter(query.queues),
            job_types=self.executor.list_parameter(query.job_types),
            limit=query.limit,
        )
        return [event_from_row(row) for row in rows]

    async def delete_events_before(self, before: int) -> int:
        return await self._run("delete_events_before", before=before)
