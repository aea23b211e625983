"""What the server reports about itself: the /metrics snapshot, health with uptime, its backend."""

from __future__ import annotations

import copy
from dataclasses import field

from redrive.domain.caller import SYSTEM
from redrive.domain.frozen import frozen_dataclass
from redrive.service.runtime import Metrics, Runtime


@frozen_dataclass
class MetricsSnapshot:
    """This process's counters and the database's gauges, read at one moment, across tenants."""

    counters: Metrics
    # (queue, state) -> jobs in that state now
    queue_depth: dict[tuple[str, str], int]
    # queue -> dead letters held now (status `dead`)
    dead_letters_by_queue: dict[str, int]
    # (rule, severity, state) -> open alerts (firing or acknowledged) now
    open_alerts: dict[tuple[str, str, str], int]
    # incident class -> dead letters held now in incidents of that class
    dead_letters_by_class: dict[str, int] = field(default_factory=dict)


@frozen_dataclass
class HealthStatus:
    healthy: bool
    backend: str
    uptime_seconds: int


class MetricsService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def backend(self) -> str:
        """The store this server runs on: "sqlite" or "postgres"."""
        return self.runtime.store.backend

    async def snapshot(self) -> MetricsSnapshot:
        """Server-wide: the counters belong to the process and /metrics is for its operators."""
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            depth = await transaction.count_jobs(None, None)
            dead = await transaction.dead_letter_stats(None)
            alerts = await transaction.count_open_alerts(None)
            by_class = await transaction.dead_letters_by_class()
        return MetricsSnapshot(
            counters=copy.deepcopy(self.runtime.metrics),
            queue_depth=dict(depth),
            dead_letters_by_queue=dict(dead.by_queue),
            open_alerts=alerts,
            dead_letters_by_class=by_class,
        )

    async def health(self) -> HealthStatus:
        """Whether the database answers, and how long this process has been up."""
        healthy = await self.runtime.store.ping()
        uptime_seconds = (self.runtime.now() - self.runtime.started_at) // 1000
        return HealthStatus(healthy=healthy, backend=self.backend, uptime_seconds=uptime_seconds)
