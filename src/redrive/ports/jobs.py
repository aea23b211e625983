"""What the job store's enqueue gives back, and an admin's job search."""

from __future__ import annotations

from typing import TYPE_CHECKING

from redrive.domain.frozen import frozen_dataclass

if TYPE_CHECKING:
    from redrive.domain.listeners import Listener


@frozen_dataclass
class Enqueued:
    """What an enqueue found: the ids of its jobs that exist already (then what it wrote must not
    stand: the caller reports them and rolls back) and the active webhook subscriptions of its
    events' tenants."""

    existing: set[str]
    listeners: list[Listener]


@frozen_dataclass
class JobFilter:
    """Which jobs an admin search means; None is any."""

    queue: str | None = None
    state: str | None = None
    type: str | None = None
