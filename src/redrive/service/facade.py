"""The service as the edges see it: one object holding every use-case."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from redrive.domain.caller import SYSTEM
from redrive.service.runtime import Metrics, Runtime

# Each use-case is built, and its module imported, when first used: a producer enqueuing and
# retrying dead letters in-process imports neither the webhook, alert, cron nor sweep code.
if TYPE_CHECKING:
    from redrive.service.alerts import AlertService
    from redrive.service.audit import AuditService
    from redrive.service.crons import CronService
    from redrive.service.dead_letters import DeadLetterService
    from redrive.service.events import EventService
    from redrive.service.incidents import IncidentService
    from redrive.service.jobs import JobService
    from redrive.service.keys import KeyService
    from redrive.service.legal_holds import LegalHoldService
    from redrive.service.metrics import MetricsService
    from redrive.service.queues import QueueService
    from redrive.service.redrives import RedriveService
    from redrive.service.replay import ReplayService
    from redrive.service.retention import RetentionService
    from redrive.service.schemas import SchemaService
    from redrive.service.sessions import SessionService
    from redrive.service.sweeper import Sweeper
    from redrive.service.webhooks import WebhookService
    from redrive.service.workers import WorkerService


class Service:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @cached_property
    def jobs(self) -> JobService:
        from redrive.service.jobs import JobService

        return JobService(self.runtime)

    @cached_property
    def workers(self) -> WorkerService:
        from redrive.service.workers import WorkerService

        return WorkerService(self.runtime)

    @cached_property
    def dead_letters(self) -> DeadLetterService:
        from redrive.service.dead_letters import DeadLetterService

        return DeadLetterService(self.runtime)

    @cached_property
    def incidents(self) -> IncidentService:
        from redrive.service.incidents import IncidentService

        return IncidentService(self.runtime)

    @cached_property
    def queues(self) -> QueueService:
        from redrive.service.queues import QueueService

        return QueueService(self.runtime)

    @cached_property
    def crons(self) -> CronService:
        from redrive.service.crons import CronService

        return CronService(self.runtime)

    @cached_property
    def events(self) -> EventService:
        from redrive.service.events import EventService

        return EventService(self.runtime)

    @cached_property
    def metrics(self) -> MetricsService:
        from redrive.service.metrics import MetricsService

        return MetricsService(self.runtime)

    @cached_property
    def keys(self) -> KeyService:
        from redrive.service.keys import KeyService

        return KeyService(self.runtime)

    @cached_property
    def audit(self) -> AuditService:
        from redrive.service.audit import AuditService

        return AuditService(self.runtime)

    @cached_property
    def sessions(self) -> SessionService:
        from redrive.service.sessions import SessionService

        return SessionService(self.runtime, self.keys)

    @cached_property
    def retention(self) -> RetentionService:
        from redrive.service.retention import RetentionService

        return RetentionService(self.runtime)

    @cached_property
    def legal_holds(self) -> LegalHoldService:
        from redrive.service.legal_holds import LegalHoldService

        return LegalHoldService(self.runtime)

    @cached_property
    def replay(self) -> ReplayService:
        from redrive.service.replay import ReplayService

        return ReplayService(self.runtime, self.dead_letters)

    @cached_property
    def redrives(self) -> RedriveService:
        from redrive.service.redrives import RedriveService

        return RedriveService(self.runtime, self.dead_letters)

    @cached_property
    def alerts(self) -> AlertService:
        from redrive.service.alerts import AlertService

        return AlertService(self.runtime)

    @cached_property
    def sweeper(self) -> Sweeper:
        from redrive.service.sweeper import Sweeper

        return Sweeper(
            self.runtime,
            self.crons,
            self.retention,
            self.replay,
            self.incidents,
            self.redrives,
            self.alerts,
        )

    @cached_property
    def webhooks(self) -> WebhookService:
        from redrive.service.webhooks import WebhookService

        return WebhookService(self.runtime, self.workers)

    @cached_property
    def schemas(self) -> SchemaService:
        from redrive.service.schemas import SchemaService

        return SchemaService(self.runtime)

    async def reset(self) -> None:
        """Wipe every table. Only reachable when test hooks are on."""
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            await transaction.reset()
        self.runtime.metrics = Metrics()
        self.workers.forget_visits()
        self.jobs.known_queues.clear()

    @property
    def test_hooks(self) -> bool:
        """Whether the test-only hooks (state reset, heartbeat directives) are on."""
        return self.runtime.options.test_hooks

    @property
    def max_batch_size(self) -> int:
        """The most entries one batch request (enqueue, ack, nack) may hold."""
        return self.runtime.options.max_batch_size

    def now(self) -> int:
        """The service clock, for edges that resolve relative times ("-PT1H") while parsing."""
        return self.runtime.now()

    async def healthy(self) -> bool:
        return await self.runtime.store.ping()
