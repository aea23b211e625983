"""The events outbox's rows and its query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redrive.domain.events import Event


@dataclass(frozen=True)
class StoredEvent:
    id: str
    sequence: int
    time: int
    event: Event


@dataclass(frozen=True)
class EventQuery:
    tenant_id: str | None
    after_id: str | None
    types: list[str] | None
    queues: list[str] | None
    job_types: list[str] | None
    limit: int
