"""Cron use-cases: register, list, delete, enable, and firing the due ones."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from redrive.domain.audit import Action
from redrive.domain.caller import Caller
from redrive.domain.cron import (
    CronExpressionError,
    CronTimezoneError,
    next_run_after,
    parse_cron,
    validate_timezone,
)
from redrive.domain.envelope import EnqueueContext, validate_envelope
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.events import Event, job_event
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import TERMINAL_STATES
from redrive.domain.records import CronRecord
from redrive.ports import CronFiring
from redrive.service import visibility
from redrive.service.audit import AuditService
from redrive.service.runtime import Runtime


def next_run_ms(expression: str, timezone: str, after_ms: int) -> int:
    after = datetime.fromtimestamp(after_ms / 1000, tz=UTC)
    moment = next_run_after(parse_cron(expression), after, timezone)
    return int(moment.timestamp() * 1000)


@frozen_dataclass
class CronRegistration:
    """A cron entry as a request gives it, read at the edge (api/cron_requests.py); the job
    template is checked here, against the caller's tenant and the server's defaults."""

    name: str
    expression: str
    timezone: str
    overlap_policy: str
    enabled: bool
    job_template: dict[str, Any]
    description: str | None


class CronService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    def _check(self, caller: Caller, registration: CronRegistration, now: int) -> None:
        try:
            parse_cron(registration.expression)
            validate_timezone(registration.timezone)
        except CronExpressionError as error:
            raise InvalidRequest(str(error), {"field": "expression"}) from error
        except CronTimezoneError as error:
            raise InvalidRequest(str(error), {"field": "timezone"}) from error
        validate_envelope(
            registration.job_template,
            EnqueueContext(
                now,
                self.runtime.new_id(now),
                caller.tenant_scope,
                self.runtime.options.default_retry,
            ),
        )

    async def register(self, caller: Caller, registration: CronRegistration) -> CronRecord:
        now = self.runtime.now()
        self._check(caller, registration, now)
        async with self.runtime.store.transaction(caller) as transaction:
            existing = await transaction.get_cron(registration.name, caller.tenant_id)
            cron = CronRecord(
                tenant_id=caller.tenant_id,
                name=registration.name,
                expression=registration.expression,
                timezone=registration.timezone,
                overlap_policy=registration.overlap_policy,
                enabled=registration.enabled,
                job_template=registration.job_template,
                description=registration.description,
                next_run_at=next_run_ms(registration.expression, registration.timezone, now)
                if registration.enabled
                else None,
                last_run_at=existing.last_run_at if existing else None,
                last_job_id=existing.last_job_id if existing else None,
                run_count=existing.run_count if existing else 0,
                created_at=existing.created_at if existing else now,
            )
            await transaction.save_cron(cron)
            target = {"name": cron.name, "replaced": existing is not None}
            await self.audit.record(caller, transaction, Action.CRON_REGISTER, target, 1)
        return cron

    async def list(self, caller: Caller) -> list[CronRecord]:
        tenant = caller.tenant_id  # crons are keyed by (tenant, name): always one tenant's
        async with self.runtime.store.transaction(caller) as transaction:
            crons = await transaction.list_crons(tenant)
        return [visibility.cron_for(caller, cron, self.runtime.options.redactor) for cron in crons]

    async def get(self, caller: Caller, name: str) -> CronRecord:
        tenant = caller.tenant_id
        async with self.runtime.store.transaction(caller) as transaction:
            cron = await transaction.get_cron(name, tenant)
        if cron is None:
            raise NotFound("cron", name)
        return visibility.cron_for(caller, cron, self.runtime.options.redactor)

    async def delete(self, caller: Caller, name: str) -> CronRecord:
        tenant = caller.tenant_id
        async with self.runtime.store.transaction(caller) as transaction:
            cron = await transaction.get_cron(name, tenant)
            if cron is None or not await transaction.delete_cron(name, tenant):
                raise NotFound("cron", name)
            await self.audit.record(caller, transaction, Action.CRON_DELETE, {"name": name}, 1)
        return cron

    async def set_enabled(self, caller: Caller, name: str, enabled: bool) -> CronRecord:
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            cron = await transaction.get_cron(name, caller.tenant_id)
            if cron is None:
                raise NotFound("cron", name)
            next_run_at = next_run_ms(cron.expression, cron.timezone, now) if enabled else None
            cron = replace(cron, enabled=enabled, next_run_at=next_run_at)
            await transaction.save_cron(cron)
            target = {"name": name, "enabled": enabled}
            await self.audit.record(caller, transaction, Action.CRON_UPDATE, target, 1)
        return cron

    async def fire_due(self, transaction: CronFiring, now: int, limit: int = 100) -> int:
        """Enqueue one job for every due cron (skipping overlaps), then schedule its next run."""
        fired = 0
        for due in await transaction.due_crons(now, limit):
            cron = replace(due, next_run_at=next_run_ms(due.expression, due.timezone, now))
            previous = (
                await transaction.get_job(cron.last_job_id, None) if cron.last_job_id else None
            )
            overlapping = previous is not None and previous.state not in TERMINAL_STATES
            if overlapping and cron.overlap_policy == "skip":
                event = Event(
                    "cron.skipped", cron.tenant_id, None, None, cron.name,
                    {"cron_name": cron.name, "reason": "overlap",
                     "existing_job_id": cron.last_job_id},
                )  # fmt: skip
                await self.runtime.emit(transaction, [event], now)
                await transaction.save_cron(cron)
                continue
            job = validate_envelope(
                cron.job_template,
                EnqueueContext(
                    now, self.runtime.new_id(now), cron.tenant_id,
                    self.runtime.options.default_retry,
                ),
            )  # fmt: skip
            await transaction.ensure_queue(job.queue, job.tenant_id, now)
            await transaction.insert_job(job)
            await transaction.notify({job.queue})
            cron = replace(cron, last_run_at=now, last_job_id=job.id, run_count=cron.run_count + 1)
            await transaction.save_cron(cron)
            events = [
                job_event("enqueued", job, priority=job.priority),
                job_event("cron.triggered", job, cron_name=cron.name,
                          cron_expr=cron.expression, job_id=job.id),
            ]  # fmt: skip
            await self.runtime.emit(transaction, events, now)
            fired += 1
        return fired
