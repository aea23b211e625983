"""Job use-cases for producers: enqueue (one or a batch), look up, cancel, activate."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from redrive.domain import job as states
from redrive.domain import lifecycle
from redrive.domain.caller import Caller
from redrive.domain.envelope import EnqueueContext, JobRequest, new_job, new_jobs
from redrive.domain.errors import Duplicate, InvalidRequest, NotFound
from redrive.domain.events import enqueued_event, job_event
from redrive.domain.job import Job
from redrive.ports import JobFilter, StoredEvent, Transaction
from redrive.service import visibility
from redrive.service.runtime import Runtime

if TYPE_CHECKING:
    from redrive.service.audit import AuditService

# The operator's job changes the audit log records, by the lifecycle action's name (the Action
# member's): the audit modules are imported when one is recorded, not by a producer enqueuing.
AUDITED = {"cancel": "JOB_CANCEL", "activate": "JOB_ACTIVATE"}
# At most this many known queues are kept (then forgotten all at once, to be written again):
# a producer of ever new queue names must not grow the set without end.
KNOWN_QUEUES_LIMIT = 4_096


class JobService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        # The tenants (None: a caller spanning them) whose last enqueue found a webhook
        # subscription: their enqueues go straight to a transaction.
        self.listened: set[str | None] = set()
        # The (tenant, queue) pairs whose queue row an enqueue of this process saw committed:
        # a queue row is never deleted (but by the test hooks' reset, which empties this), so a
        # job of one of these need not write it again (a tenth of the server's work per job).
        self.known_queues: set[tuple[str, str]] = set()

    @cached_property
    def audit(self) -> AuditService:
        from redrive.service.audit import AuditService

        return AuditService(self.runtime)

    def _context(self, caller: Caller, now: int) -> EnqueueContext:
        # Positional, in the fields' order (now_ms, generated_id, tenant, default_retry).
        return EnqueueContext(
            now, self.runtime.new_id(now), caller.tenant_scope, self.runtime.options.default_retry
        )

    async def _insert(
        self,
        transaction: Transaction,
        jobs: list[Job],
        now: int,
        alone: bool = False,
        queue_known: bool = False,
    ) -> bool:
        """The jobs, their queues and events in one statement; then, if any, webhook deliveries
        (an id that exists already fails the whole enqueue: the transaction rolls back). The
        store writes each job's event from the job (`enqueued_event`) under the id given here;
        the events themselves are built only for a webhook subscription that may want them.
        Their ids are blocks, one a run of alike jobs (`enqueued_runs`): one outbox row each.
        Whether a subscription listens to the events: `alone` (the statement is its unit's
        only one, see `JobStore.enqueue_jobs`), that means nothing was written."""
        event_ids = self.runtime.enqueued_event_ids(jobs, now)
        written = await transaction.enqueue_jobs(jobs, event_ids, now, alone, queue_known)
        if alone and written.listeners:
            return True
        if written.existing:
            job_id = next(job.id for job in jobs if job.id in written.existing)
            raise Duplicate(f"job {job_id} already exists", {"job_id": job_id})
        await transaction.notify({job.queue for job in jobs if job.state == states.AVAILABLE})
        if written.listeners:
            stored = [
                StoredEvent(event_id, 0, now, enqueued_event(job))
                for event_id, job in zip(event_ids, jobs, strict=True)
            ]
            await self.runtime.queue_deliveries(transaction, written.listeners, stored, now)
        enqueued = self.runtime.metrics.enqueued
        if len(jobs) == 1:  # a producer's one job a call: no generator to count from
            enqueued[jobs[0].queue, jobs[0].type] += 1
        else:
            enqueued.update((job.queue, job.type) for job in jobs)
        return bool(written.listeners)

    async def enqueue(self, caller: Caller, request: JobRequest) -> Job:
        """One statement that commits by itself (on PostgreSQL one round trip), as
        `_insert_alone_first` tells."""
        now = self.runtime.now()
        job = new_job(request, self._context(caller, now))
        queue = (job.tenant_id, job.queue)
        known = self.known_queues
        await self._insert_alone_first(caller, [job], now, queue in known)
        if len(known) >= KNOWN_QUEUES_LIMIT:
            known.clear()
        known.add(queue)  # committed: the statement wrote it, or it was there
        return job

    async def _insert_alone_first(
        self, caller: Caller, jobs: list[Job], now: int, queue_known: bool = False
    ) -> None:
        """The jobs in a unit of one statement (on PostgreSQL one round trip, no BEGIN or
        COMMIT), unless the tenant's last enqueue found a webhook subscription: then, or when
        this one finds one (it wrote nothing), in a transaction that queues the deliveries; so
        do the tenant's next ones until one finds no subscription (`listened` is only a hint:
        either way is safe)."""
        tenant = caller.tenant_scope
        if tenant not in self.listened:
            async with self.runtime.store.transaction(caller, one_statement=True) as transaction:
                if not await self._insert(transaction, jobs, now, True, queue_known):
                    return
            self.listened.add(tenant)
        async with self.runtime.store.transaction(caller) as transaction:
            if not await self._insert(transaction, jobs, now, queue_known=queue_known):
                self.listened.discard(tenant)

    async def enqueue_batch(self, caller: Caller, requests: list[JobRequest]) -> list[Job]:
        """All jobs or none: the first one that cannot be made is reported with its index."""
        if not requests:
            raise InvalidRequest("jobs must be a non-empty array", {"field": "jobs"})
        limit = self.runtime.options.max_batch_size
        if len(requests) > limit:
            raise InvalidRequest(f"a batch holds at most {limit} jobs", {"field": "jobs"})
        now = self.runtime.now()
        fresh = iter(self.runtime.new_ids(len(requests), now))
        jobs = new_jobs(requests, self._context(caller, now), fresh.__next__)
        ids = {job.id for job in jobs}
        if len(ids) != len(jobs):
            raise Duplicate("the batch repeats a job id", {"field": "jobs"})
        try:
            await self._insert_alone_first(caller, jobs, now)
        except Duplicate as duplicate:
            if "job_id" in duplicate.details:
                raise
            raise await self._named(caller, jobs, duplicate) from None
        return jobs

    async def _named(self, caller: Caller, jobs: list[Job], duplicate: Duplicate) -> Duplicate:
        """A batch's Duplicate naming the first of its jobs whose id exists (the store may name
        none); as it was when none of them is the caller's to see (another tenant's)."""
        async with self.runtime.store.transaction(caller) as transaction:
            existing = await transaction.existing_job_ids(
                [job.id for job in jobs], caller.tenant_scope
            )
        for job in jobs:
            if job.id in existing:
                return Duplicate(f"job {job.id} already exists", {"job_id": job.id})
        return duplicate

    async def get(self, caller: Caller, job_id: str) -> Job:
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            job = await transaction.get_job(job_id, tenant)
            if job is None:
                dead = await transaction.get_dead_letter(job_id, tenant)
                job = None if dead is None else dead.job
        if job is None:
            raise NotFound("job", job_id)
        return visibility.job_for(caller, job, self.runtime.options.redactor)

    async def _transition(
        self, caller: Caller, job_id: str, action: str, decide: Callable[[Job, int], Job]
    ) -> tuple[Job, Job]:
        """Lock the job, let the domain decide, write the outcome guarded; (before, after)."""
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
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
            target = {"job_id": job_id, "state_before": job.state}
            from redrive.domain.audit import Action

            await self.audit.record(caller, transaction, Action[AUDITED[action]], target, 1)
        return job, changed

    async def cancel(self, caller: Caller, job_id: str) -> tuple[Job, str]:
        before, cancelled = await self._transition(caller, job_id, "cancel", lifecycle.cancel)
        return cancelled, before.state

    async def activate(self, caller: Caller, job_id: str) -> Job:
        return (await self._transition(caller, job_id, "activate", lifecycle.activate))[1]

    async def list(
        self, caller: Caller, filters: JobFilter, limit: int, offset: int
    ) -> tuple[list[Job], int]:
        async with self.runtime.store.transaction(caller) as transaction:
            jobs, total = await transaction.list_jobs(caller.tenant_scope, filters, limit, offset)
        return visibility.jobs_for(caller, jobs, self.runtime.options.redactor), total
