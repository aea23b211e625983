"""Worker use-cases: fetch (claim with a lease), ack, nack, heartbeat, quiet."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from redrive.domain import lifecycle
from redrive.domain.dead_letter import new_dead_letter
from redrive.domain.envelope import MAX_TIMEOUT_MS
from redrive.domain.errors import Conflict, InvalidRequest, NotFound
from redrive.domain.events import completed_event, failure_events, started_event
from redrive.domain.job import AVAILABLE, DEFAULT_TENANT, Job
from redrive.ports import Claim, Transaction
from redrive.service.requests import (
    optional_positive_int,
    optional_string,
    queue_list,
    require_object,
    required_string,
    string_list,
)
from redrive.service.runtime import Runtime

DIRECTIVES = ("quiet", "terminate")
MAX_WAIT_MS = 30_000
# Re-check now and then even without a wake-up (a retry may come due between sweeps).
WAIT_SLICE_SECONDS = 1.0


@dataclass(frozen=True)
class Heartbeat:
    state: str
    extended: list[str]
    lost: list[str]
    server_time: int


async def record_failure(
    runtime: Runtime,
    transaction: Transaction,
    job: Job,
    outcome: lifecycle.FailureOutcome,
    now: int,
) -> bool:
    """Write a failed attempt, its dead letter if it died, and the events, in one transaction."""
    if not await transaction.update_job(outcome.job, job.state, job.lease_token):
        return False
    if outcome.job.state == AVAILABLE:
        await transaction.notify({outcome.job.queue})
    if outcome.dead_letter_reason is not None:
        episode = new_dead_letter(runtime.new_id(now), outcome.job, outcome.dead_letter_reason, now)
        await transaction.insert_dead_letter(episode)
        runtime.metrics.dead_letter_added[(job.queue, job.type)] += 1
    await runtime.emit(transaction, failure_events(outcome.job, outcome.dead_letter_reason), now)
    runtime.metrics.failed[(job.queue, job.type)] += 1
    return True


class WorkerService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def fetch(self, body: object, tenant: str | None) -> list[Job]:
        """Claim up to `count` jobs, queues in the order given. With `wait_ms`, an empty fetch
        waits (up to 30 s) for a wake-up from any replica instead of returning at once."""
        request = require_object(body)
        queues = queue_list(request)
        wait_ms = optional_positive_int(request, "wait_ms", MAX_WAIT_MS) or 0
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            claimed = await self._claim(request, queues, tenant)
            remaining = deadline - time.monotonic()
            if claimed or remaining <= 0:
                return claimed
            await self.runtime.store.wait_for_work(queues, min(remaining, WAIT_SLICE_SECONDS))

    async def _claim(
        self, request: dict[str, Any], queues: list[str], tenant: str | None
    ) -> list[Job]:
        count = optional_positive_int(request, "count", self.runtime.options.max_fetch_count) or 1
        worker_id = optional_string(request, "worker_id")
        visibility = optional_positive_int(request, "visibility_timeout_ms", MAX_TIMEOUT_MS)
        now = self.runtime.now()
        token = self.runtime.new_token()
        claimed: list[Job] = []
        async with self.runtime.store.transaction() as transaction:
            await transaction.notify(await transaction.promote_due_jobs(now))
            paused = await transaction.paused_queue_names()
            for queue in queues:
                if queue in paused or len(claimed) >= count:
                    continue
                claim = Claim(queue, count - len(claimed), worker_id, token, visibility, tenant)
                claimed.extend(await transaction.claim_jobs(claim, now))
            if worker_id is not None:
                await transaction.touch_worker(
                    worker_id, tenant or DEFAULT_TENANT, queues, len(claimed), now
                )
            await self.runtime.emit(transaction, [started_event(job) for job in claimed], now)
        return claimed

    async def _locked_job(self, transaction: Transaction, job_id: str, tenant: str | None) -> Job:
        job = await transaction.get_job(job_id, tenant, lock=True)
        if job is None:
            raise NotFound("job", job_id)
        return job

    async def ack(self, body: object, tenant: str | None) -> Job:
        request = require_object(body)
        job_id = required_string(request, "job_id")
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            job = await self._locked_job(transaction, job_id, tenant)
            lifecycle.check_lease(
                job, now, "ack", optional_string(request, "worker_id"),
                optional_string(request, "lease_token"),
            )  # fmt: skip
            done = lifecycle.acknowledge(job, now, request.get("result"))
            if not await transaction.update_job(done, job.state, job.lease_token):
                raise lifecycle.conflict(job, "ack")
            await self.runtime.emit(transaction, [completed_event(done)], now)
        self.runtime.metrics.completed[(job.queue, job.type)] += 1
        self.runtime.metrics.duration_sum_seconds += (now - (job.started_at or now)) / 1000
        self.runtime.metrics.duration_count += 1
        return done

    async def nack(self, body: object, tenant: str | None) -> Job:
        request = require_object(body)
        job_id = required_string(request, "job_id")
        failure = lifecycle.parse_failure(request.get("error"))
        requeue = request.get("requeue", False)
        if not isinstance(requeue, bool):
            raise InvalidRequest("requeue must be a boolean", {"field": "requeue"})
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            job = await self._locked_job(transaction, job_id, tenant)
            lifecycle.check_lease(
                job, now, "nack", optional_string(request, "worker_id"),
                optional_string(request, "lease_token"),
            )  # fmt: skip
            outcome = lifecycle.fail(job, now, failure, self.runtime.jitter_factor(), requeue)
            if not await record_failure(self.runtime, transaction, job, outcome, now):
                raise lifecycle.conflict(job, "nack")
        return outcome.job

    @staticmethod
    def _heartbeat_job_ids(request: dict[str, Any]) -> list[str]:
        listed = request.get("active_jobs")
        ids = string_list(listed, "active_jobs") if isinstance(listed, list) else []
        ids += string_list(request.get("active_job_ids"), "active_job_ids")
        single = optional_string(request, "job_id")
        if single is not None:
            ids.append(single)
        return list(dict.fromkeys(ids))

    async def heartbeat(self, body: object, tenant: str | None) -> Heartbeat:
        request = require_object(body)
        worker_id = optional_string(request, "worker_id")
        job_ids = self._heartbeat_job_ids(request)
        visibility = optional_positive_int(request, "visibility_timeout_ms", MAX_TIMEOUT_MS)
        now = self.runtime.now()
        extended: list[str] = []
        lost: list[str] = []
        directive: str | None = None
        async with self.runtime.store.transaction() as transaction:
            for job_id in job_ids:
                job = await transaction.get_job(job_id, tenant, lock=True)
                if job is None:
                    lost.append(job_id)
                    continue
                directive = directive or self._test_directive(job)
                try:
                    lifecycle.check_lease(job, now, "heartbeat", worker_id, None)
                except Conflict:
                    lost.append(job_id)
                    continue
                renewed = lifecycle.extend_lease(job, now, visibility)
                if await transaction.update_job(renewed, job.state, job.lease_token):
                    extended.append(job_id)
            if worker_id is not None:
                worker = await transaction.touch_worker(
                    worker_id, tenant or DEFAULT_TENANT, [], len(job_ids), now
                )
                directive = directive or worker.get("directive")
        return Heartbeat(directive or "running", extended, lost, now)

    def _test_directive(self, job: Job) -> str | None:
        if not self.runtime.options.test_hooks:
            return None
        directive = job.test_directive
        return directive if directive in DIRECTIVES else None

    async def set_directive(self, worker_id: str, directive: str | None) -> None:
        async with self.runtime.store.transaction() as transaction:
            workers = {worker["id"] for worker in await transaction.list_workers(None)}
            if worker_id not in workers:
                raise NotFound("worker", worker_id)
            await transaction.set_worker_directive(worker_id, directive)

    async def list(self, tenant: str | None) -> list[dict[str, Any]]:
        async with self.runtime.store.transaction() as transaction:
            return await transaction.list_workers(tenant)
