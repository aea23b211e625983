"""Job use-cases for producers: enqueue (one or a batch), look up, cancel, activate."""

from __future__ import annotations

from collections.abc import Callable

from redrive.domain import job as states
from redrive.domain import lifecycle
from redrive.domain.caller import Caller
from redrive.domain.envelope import EnqueueContext, validate_envelope
from redrive.domain.errors import Duplicate, InvalidRequest, NotFound, OjsError
from redrive.domain.events import job_event
from redrive.domain.job import Job
from redrive.ports import JobFilter, Transaction
from redrive.service.runtime import Runtime


class JobService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _validate(self, caller: Caller, body: object, now: int) -> Job:
        context = EnqueueContext(
            now_ms=now,
            generated_id=self.runtime.new_id(now),
            tenant=caller.tenant_scope,
            default_retry=self.runtime.options.default_retry,
        )
        return validate_envelope(body, context)

    async def _insert(self, transaction: Transaction, jobs: list[Job], now: int) -> None:
        for queue in sorted({(job.queue, job.tenant_id) for job in jobs}):
            await transaction.ensure_queue(queue[0], queue[1], now)
        inserted = await transaction.insert_jobs(jobs)
        for job in jobs:
            if job.id not in inserted:
                raise Duplicate(f"job {job.id} already exists", {"job_id": job.id})
        await transaction.notify({job.queue for job in jobs if job.state == states.AVAILABLE})
        events = [
            job_event(
                "scheduled" if job.state == states.SCHEDULED else "enqueued",
                job,
                priority=job.priority,
            )
            for job in jobs
        ]
        await self.runtime.emit(transaction, events, now)
        for job in jobs:
            self.runtime.metrics.enqueued[(job.queue, job.type)] += 1

    async def enqueue(self, caller: Caller, body: object) -> Job:
        now = self.runtime.now()
        job = self._validate(caller, body, now)
        async with self.runtime.store.transaction() as transaction:
            await self._insert(transaction, [job], now)
        return job

    async def enqueue_batch(self, caller: Caller, body: object) -> list[Job]:
        """All jobs or none: the first invalid one is reported with its index."""
        raw_jobs = body.get("jobs") if isinstance(body, dict) else body
        if not isinstance(raw_jobs, list) or not raw_jobs:
            raise InvalidRequest("jobs must be a non-empty array", {"field": "jobs"})
        limit = self.runtime.options.max_batch_size
        if len(raw_jobs) > limit:
            raise InvalidRequest(f"a batch holds at most {limit} jobs", {"field": "jobs"})
        now = self.runtime.now()
        jobs = []
        for index, raw in enumerate(raw_jobs):
            try:
                jobs.append(self._validate(caller, raw, now))
            except OjsError as error:
                error.details = {**error.details, "index": index}
                error.message = f"jobs[{index}]: {error.message}"
                raise
        ids = [job.id for job in jobs]
        if len(set(ids)) != len(ids):
            raise Duplicate("the batch repeats a job id", {"field": "jobs"})
        async with self.runtime.store.transaction() as transaction:
            await self._insert(transaction, jobs, now)
        return jobs

    async def get(self, caller: Caller, job_id: str) -> Job:
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction() as transaction:
            job = await transaction.get_job(job_id, tenant)
            if job is None:
                dead = await transaction.get_dead_letter(job_id, tenant)
                if dead is not None:
                    return dead.job
        if job is None:
            raise NotFound("job", job_id)
        return job

    async def _transition(
        self, caller: Caller, job_id: str, action: str, decide: Callable[[Job, int], Job]
    ) -> tuple[Job, Job]:
        """Lock the job, let the domain decide, write the outcome guarded; (before, after)."""
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            job = await transaction.get_job(job_id, caller.tenant_scope, lock=True)
            if job is None:
                raise NotFound("job", job_id)
            changed = decide(job, now)
            if not await transaction.update_job(changed, job.state, job.lease_token):
                raise lifecycle.conflict(job, action)
            if changed.state == states.CANCELLED:
                await self.runtime.emit(transaction, [job_event("cancelled", changed)], now)
            if changed.state == states.AVAILABLE:
                await transaction.notify({changed.queue})
        return job, changed

    async def cancel(self, caller: Caller, job_id: str) -> tuple[Job, str]:
        before, cancelled = await self._transition(caller, job_id, "cancel", lifecycle.cancel)
        return cancelled, before.state

    async def activate(self, caller: Caller, job_id: str) -> Job:
        return (await self._transition(caller, job_id, "activate", lifecycle.activate))[1]

    async def list(
        self, caller: Caller, filters: JobFilter, limit: int, offset: int
    ) -> tuple[list[Job], int]:
        async with self.runtime.store.transaction() as transaction:
            return await transaction.list_jobs(caller.tenant_scope, filters, limit, offset)
