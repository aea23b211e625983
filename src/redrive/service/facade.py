"""The service as the edges see it: one object holding every use-case."""

from __future__ import annotations

from redrive.domain.caller import SYSTEM
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
from redrive.service.runtime import Metrics, Runtime
from redrive.service.schemas import SchemaService
from redrive.service.sessions import SessionService
from redrive.service.sweeper import Sweeper
from redrive.service.webhooks import WebhookService
from redrive.service.workers import WorkerService


class Service:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.jobs = JobService(runtime)
        self.workers = WorkerService(runtime)
        self.dead_letters = DeadLetterService(runtime)
        self.incidents = IncidentService(runtime)
        self.queues = QueueService(runtime)
        self.crons = CronService(runtime)
        self.events = EventService(runtime)
        self.metrics = MetricsService(runtime)
        self.keys = KeyService(runtime)
        self.audit = AuditService(runtime)
        self.sessions = SessionService(runtime, self.keys)
        self.retention = RetentionService(runtime)
        self.legal_holds = LegalHoldService(runtime)
        self.replay = ReplayService(runtime, self.dead_letters)
        self.redrives = RedriveService(runtime, self.dead_letters)
        self.alerts = AlertService(runtime)
        self.sweeper = Sweeper(
            runtime,
            self.crons,
            self.retention,
            self.replay,
            self.incidents,
            self.redrives,
            self.alerts,
        )
        self.webhooks = WebhookService(runtime, self.workers)
        self.schemas = SchemaService(runtime)

    async def reset(self) -> None:
        """Wipe every table. Only reachable when test hooks are on."""
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            await transaction.reset()
        self.runtime.metrics = Metrics()

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
