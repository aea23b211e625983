"""The events outbox's rows and its query."""

from __future__ import annotations

from typing import TYPE_CHECKING

from redrive.domain.frozen import frozen_dataclass

if TYPE_CHECKING:
    from redrive.domain.events import Event


@frozen_dataclass
class StoredEvent:
    id: str
    sequence: int
    time: int
    event: Event


@frozen_dataclass
class EventQuery:
    tenant_id: str | None
    after_id: str | None
    types: list[str] | None
    queues: list[str] | None
    job_types: list[str] | None
    limit: int
