"""Reading the event stream: filter by type, queue and job type, page with an event-id cursor."""

from __future__ import annotations

from redrive.domain.caller import Caller
from redrive.domain.errors import InvalidRequest
from redrive.ports import EventQuery, StoredEvent
from redrive.service.runtime import Runtime

MAX_EVENTS = 1000


def _list(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [item.strip() for item in value.split(",") if item.strip()] or None


class EventService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def list(
        self,
        caller: Caller,
        types: str | None,
        queues: str | None,
        job_types: str | None,
        after: str | None,
        limit: int,
    ) -> list[StoredEvent]:
        tenant = caller.tenant_scope
        if not 1 <= limit <= MAX_EVENTS:
            raise InvalidRequest(f"limit must be from 1 to {MAX_EVENTS}", {"field": "limit"})
        query = EventQuery(tenant, after, _list(types), _list(queues), _list(job_types), limit)
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_events(query)
