"""The events outbox: appending events (and finding who listens), reading them, trimming."""

from __future__ import annotations

from redrive.domain.events import block_position
from redrive.domain.listeners import Listener
from redrive.ports import EventQuery, EventStore, StoredEvent
from redrive.store.base import SqlBase
from redrive.store.codec import event_from_row, event_rows, load


class SqlEvents(SqlBase, EventStore):
    async def add_events(
        self, events: list[StoredEvent], subjects: list[list[str | None]] | None = None
    ) -> list[Listener]:
        if not events:
            return []
        records = event_rows(events, subjects)
        rows = await self._rows(
            "insert_events",
            rows=self.executor.records_parameter(records),
            tenant_ids=self.executor.list_parameter(
                sorted({record["tenant_id"] for record in records})
            ),
        )
        return [Listener(row["id"], row["tenant_id"], tuple(load(row["events"]))) for row in rows]

    async def list_events(self, query: EventQuery) -> list[StoredEvent]:
        after_sequence = after_position = None
        if query.after_id:
            after_sequence, after_position = await self._event_place(query.after_id)
        rows = await self._rows(
            "select_events",
            tenant_id=query.tenant_id,
            after_sequence=after_sequence,
            after_position=after_position,
            types=self.executor.list_parameter(query.types),
            queues=self.executor.list_parameter(query.queues),
            job_types=self.executor.list_parameter(query.job_types),
            limit=query.limit,
        )
        return [event_from_row(row) for row in rows]

    async def _event_place(self, event_id: str) -> tuple[int | None, int | None]:
        """The sequence of the row that keeps the event `event_id` and, if that row keeps a
        block of them, the event's position in it; (None, None) for an event not kept."""
        block, position = block_position(event_id) or (None, 0)
        rows = await self._rows("select_event_sequence", id=event_id, block=block)
        for row in sorted(rows, key=lambda row: row["id"] != event_id):
            if row["size"] is None:
                if row["id"] == event_id:  # a row of its own
                    return row["sequence"], None
            elif row["id"] == block and position < row["size"]:
                return row["sequence"], position
        return None, None

    async def delete_events_before(self, before: int) -> int:
        """Deletes the events older than `before`; returns how many (a block's row is as many as
        it keeps)."""
        rows = await self._rows("delete_events_before", before=before)
        return sum(int(row["size"]) for row in rows)
