"""Worker use-cases: fetch (claim with a lease), ack, nack (one or a batch), heartbeat, quiet."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from redrive.domain import lifecycle
from redrive.domain.caller import Caller
from redrive.domain.errors import Conflict, InvalidRequest, NotFound, OjsError
from redrive.domain.events import started_event
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.records import WorkerRecord
from redrive.ports import Claim, Claimed, JobChange
from redrive.service.attempts import (
    Acknowledgement,
    AckRequest,
    NackRequest,
    Outcome,
    acknowledge_all,
    acknowledge_one,
    check_batch,
    fail_all,
    single,
    without_repeats,
)
from redrive.service.runtime import Runtime

DIRECTIVES = ("quiet", "terminate")
MAX_WAIT_MS = 30_000
# Re-check now and then even without a wake-up (a retry may come due between sweeps).
WAIT_SLICE_SECONDS = 1.0
# A claim that takes nothing records the worker's visit (its last heartbeat, its count of jobs
# claimed) only when that count changes or the last record made here is this old: an idle
# worker's long-poll re-claims every second, and each record is a write (on SQLite an fsync).
# Well inside the minute after which a worker is listed as stale.
IDLE_VISIT_MS = 10_000
MAX_VISITS = 10_000


@frozen_dataclass
class FetchRequest:
    """Claim up to `count` jobs of `queues` (in that order); `wait_ms` > 0 long-polls."""

    queues: list[str]
    count: int = 1
    worker_id: str | None = None
    visibility_timeout_ms: int | None = None
    wait_ms: int = 0


@frozen_dataclass
class HeartbeatRequest:
    worker_id: str | None
    job_ids: list[str]
    visibility_timeout_ms: int | None = None


@frozen_dataclass
class Heartbeat:
    state: str
    extended: list[str]
    lost: list[str]
    server_time: int


class WorkerService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        # (tenant, worker) -> when this service last recorded its visit, and the count then.
        self._visits: dict[tuple[str, str], tuple[int, int]] = {}

    async def fetch(
        self,
        caller: Caller,
        request: FetchRequest,
        abandoned: Callable[[], Awaitable[bool]] | None = None,
    ) -> list[Job]:
        """Claim up to `count` jobs, queues in the order given. With `wait_ms`, an empty fetch
        waits (up to 30 s) for a wake-up from any replica instead of returning at once. A
        waiting fetch asks `abandoned` (the HTTP route: has the worker hung up?) after each
        wait, before it claims again: a long poll whose worker is gone claims nothing, where it
        went on claiming every second until its deadline and leased what it took to no one (the
        job then waited for its lease to expire)."""
        limit = self.runtime.options.max_fetch_count
        if request.count > limit:
            raise InvalidRequest(f"count must be at most {limit}", {"field": "count"})
        deadline = time.monotonic() + request.wait_ms / 1000
        while True:
            claimed = await self._claim(caller, request)
            remaining = deadline - time.monotonic()
            if claimed or remaining <= 0:
                return claimed
            await self.runtime.store.wait_for_work(
                request.queues, min(remaining, WAIT_SLICE_SECONDS)
            )
            if abandoned is not None and await abandoned():
                return []

    async def _claim(self, caller: Caller, request: FetchRequest) -> list[Job]:
        queues, count, worker_id = request.queues, request.count, request.worker_id
        now = self.runtime.now()
        token = self.runtime.new_token()
        # Each queue's claim; its jobs are read once the unit is done (see Claimed).
        takes: list[Claimed] = []
        taken_count = 0
        unannounced: list[Job] = []  # the claim wrote the others' job.started events
        async with self.runtime.store.transaction(caller) as transaction:
            await transaction.notify(await transaction.promote_due_jobs(now, queues))
            # A claim takes nothing from a queue the caller's tenant paused (a caller spanning
            # every tenant: one any tenant paused, as its claim would take that tenant's jobs).
            for queue in queues:
                if taken_count >= count:
                    break
                claim = Claim(
                    queue, count - taken_count, worker_id, token,
                    request.visibility_timeout_ms, caller.tenant_scope,
                )  # fmt: skip
                # Block heads: the claim's events are a row a run of alike jobs, named by the
                # head at its first job's place (claim_jobs), kept as their parts: made as a
                # list of `claim.limit` ids, ~4.8k instructions a job, of which a claim used one
                # or two.
                heads = self.runtime.block_head_parts(claim.limit, now)
                taken = await transaction.claim_jobs(claim, now, heads)
                takes.append(taken)
                taken_count += taken.count
                unannounced.extend(taken.unannounced)
            visit = (caller.tenant_id, worker_id or "")
            recorded = worker_id is not None and self._visit_due(visit, taken_count, now)
            if recorded:
                await transaction.touch_worker(visit[1], caller.tenant_id, queues, taken_count, now)
            await self.runtime.emit(transaction, [started_event(job) for job in unannounced], now)
        if recorded:
            self._record_visit(visit, taken_count, now)
        if len(takes) == 1:
            return takes[0].jobs
        return [job for taken in takes for job in taken.jobs]

    def forget_visits(self) -> None:
        """The workers table was wiped: record each worker's next visit."""
        self._visits.clear()

    def _visit_due(self, visit: tuple[str, str], claimed: int, now: int) -> bool:
        last = self._visits.get(visit)
        return claimed > 0 or last is None or last[1] != claimed or now - last[0] >= IDLE_VISIT_MS

    def _record_visit(self, visit: tuple[str, str], claimed: int, now: int) -> None:
        self._visits[visit] = (now, claimed)
        if len(self._visits) > MAX_VISITS:  # workers come and go: forget those gone quiet
            self._visits = {
                key: last for key, last in self._visits.items() if now - last[0] < IDLE_VISIT_MS
            }

    async def ack(self, caller: Caller, request: AckRequest) -> Job:
        return await acknowledge_one(self.runtime, request, caller)

    async def ack_many(
        self, caller: Caller, requests: list[AckRequest | OjsError]
    ) -> list[Acknowledgement]:
        """One transaction; each entry is the completed job or why that ack was refused (the
        others still land). Entries the edge could not read arrive as their refusal."""
        check_batch(requests, "acks", self.runtime.options.max_batch_size)
        return await acknowledge_all(self.runtime, requests, caller)

    async def nack(self, caller: Caller, request: NackRequest) -> Job:
        return single(await fail_all(self.runtime, [request], caller))

    async def nack_many(
        self, caller: Caller, requests: list[NackRequest | OjsError]
    ) -> list[Outcome]:
        """One transaction; each entry is the job as the failure left it or why that nack was
        refused."""
        check_batch(requests, "nacks", self.runtime.options.max_batch_size)
        return await fail_all(self.runtime, without_repeats(requests), caller)

    async def heartbeat(self, caller: Caller, request: HeartbeatRequest) -> Heartbeat:
        worker_id, job_ids = request.worker_id, request.job_ids
        now = self.runtime.now()
        lost: list[str] = []
        directive: str | None = None
        async with self.runtime.store.transaction(caller) as transaction:
            jobs = await transaction.lock_jobs(job_ids, caller.tenant_scope)
            renewals: list[JobChange] = []
            for job_id in job_ids:
                job = jobs.get(job_id)
                if job is None:
                    lost.append(job_id)
                    continue
                directive = directive or self._test_directive(job)
                try:
                    lifecycle.check_lease(job, now, "heartbeat", worker_id, None)
                except Conflict:
                    lost.append(job_id)
                    continue
                renewed = lifecycle.extend_lease(job, now, request.visibility_timeout_ms)
                renewals.append(JobChange(renewed, job.state, job.lease_token))
            written = await transaction.update_jobs(renewals)
            extended = [change.job.id for change in renewals if change.job.id in written]
            if worker_id is not None:
                worker = await transaction.touch_worker(
                    worker_id, caller.tenant_id, [], len(job_ids), now
                )
                directive = directive or worker.directive
        return Heartbeat(directive or "running", extended, lost, now)

    def _test_directive(self, job: Job) -> str | None:
        if not self.runtime.options.test_hooks:
            return None
        directive = job.test_directive
        return directive if directive in DIRECTIVES else None

    async def set_directive(self, caller: Caller, worker_id: str, directive: str | None) -> None:
        """Tell the caller's tenant's worker of this id to go quiet, terminate or run again."""
        # The audit is imported here, by an operator's act: a worker claiming and acking never
        # records one.
        from redrive.domain.audit import Action
        from redrive.service.audit import AuditService

        async with self.runtime.store.transaction(caller) as transaction:
            changed = await transaction.set_worker_directive(
                worker_id, caller.tenant_scope, directive
            )
            if not changed:
                raise NotFound("worker", worker_id)
            target = {"worker_id": worker_id, "directive": directive}
            await AuditService(self.runtime).record(
                caller, transaction, Action.WORKER_DIRECTIVE, target, changed
            )

    async def list(self, caller: Caller) -> list[WorkerRecord]:
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_workers(tenant)
