"""Worker use-cases: fetch (claim with a lease), ack, nack (one or a batch), heartbeat, quiet."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from redrive.domain import lifecycle
from redrive.domain.caller import Caller
from redrive.domain.envelope import MAX_TIMEOUT_MS
from redrive.domain.errors import Conflict, NotFound
from redrive.domain.events import started_event
from redrive.domain.job import Job
from redrive.ports import Claim, JobChange
from redrive.service.attempts import (
    AckRequest,
    NackRequest,
    Outcome,
    acknowledge_all,
    batch_items,
    fail_all,
    parse_each,
    single,
)
from redrive.service.requests import (
    optional_positive_int,
    optional_string,
    queue_list,
    require_object,
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


class WorkerService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def fetch(self, caller: Caller, body: object) -> list[Job]:
        """Claim up to `count` jobs, queues in the order given. With `wait_ms`, an empty fetch
        waits (up to 30 s) for a wake-up from any replica instead of returning at once."""
        request = require_object(body)
        queues = queue_list(request)
        wait_ms = optional_positive_int(request, "wait_ms", MAX_WAIT_MS) or 0
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            claimed = await self._claim(caller, request, queues)
            remaining = deadline - time.monotonic()
            if claimed or remaining <= 0:
                return claimed
            await self.runtime.store.wait_for_work(queues, min(remaining, WAIT_SLICE_SECONDS))

    async def _claim(self, caller: Caller, request: dict[str, Any], queues: list[str]) -> list[Job]:
        tenant = caller.tenant_scope
        count = optional_positive_int(request, "count", self.runtime.options.max_fetch_count) or 1
        worker_id = optional_string(request, "worker_id")
        visibility = optional_positive_int(request, "visibility_timeout_ms", MAX_TIMEOUT_MS)
        now = self.runtime.now()
        token = self.runtime.new_token()
        claimed: list[Job] = []
        async with self.runtime.store.transaction() as transaction:
            await transaction.notify(await transaction.promote_due_jobs(now, queues))
            paused = await transaction.paused_queue_names()
            for queue in queues:
                if queue in paused or len(claimed) >= count:
                    continue
                claim = Claim(queue, count - len(claimed), worker_id, token, visibility, tenant)
                claimed.extend(await transaction.claim_jobs(claim, now))
            if worker_id is not None:
                await transaction.touch_worker(
                    worker_id, caller.tenant_id, queues, len(claimed), now
                )
            await self.runtime.emit(transaction, [started_event(job) for job in claimed], now)
        return claimed

    async def ack(self, caller: Caller, body: object) -> Job:
        tenant = caller.tenant_scope
        return single(await acknowledge_all(self.runtime, [AckRequest.parse(body)], tenant))

    async def ack_many(self, caller: Caller, body: object) -> list[Outcome]:
        """`{"acks": [ack, ...]}`: one transaction; each entry is the completed job or why
        that ack was refused (the others still land)."""
        tenant = caller.tenant_scope
        items = batch_items(body, "acks", self.runtime.options.max_batch_size)
        return await acknowledge_all(self.runtime, parse_each(items, AckRequest.parse), tenant)

    async def nack(self, caller: Caller, body: object) -> Job:
        tenant = caller.tenant_scope
        return single(await fail_all(self.runtime, [NackRequest.parse(body)], tenant))

    async def nack_many(self, caller: Caller, body: object) -> list[Outcome]:
        """`{"nacks": [nack, ...]}`: one transaction; each entry is the job as the failure left
        it or why that nack was refused."""
        tenant = caller.tenant_scope
        items = batch_items(body, "nacks", self.runtime.options.max_batch_size)
        return await fail_all(self.runtime, parse_each(items, NackRequest.parse), tenant)

    @staticmethod
    def _heartbeat_job_ids(request: dict[str, Any]) -> list[str]:
        listed = request.get("active_jobs")
        ids = string_list(listed, "active_jobs") if isinstance(listed, list) else []
        ids += string_list(request.get("active_job_ids"), "active_job_ids")
        single = optional_string(request, "job_id")
        if single is not None:
            ids.append(single)
        return list(dict.fromkeys(ids))

    async def heartbeat(self, caller: Caller, body: object) -> Heartbeat:
        tenant = caller.tenant_scope
        request = require_object(body)
        worker_id = optional_string(request, "worker_id")
        job_ids = self._heartbeat_job_ids(request)
        visibility = optional_positive_int(request, "visibility_timeout_ms", MAX_TIMEOUT_MS)
        now = self.runtime.now()
        lost: list[str] = []
        directive: str | None = None
        async with self.runtime.store.transaction() as transaction:
            jobs = await transaction.lock_jobs(job_ids, tenant)
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
                renewed = lifecycle.extend_lease(job, now, visibility)
                renewals.append(JobChange(renewed, job.state, job.lease_token))
            written = await transaction.update_jobs(renewals)
            extended = [change.job.id for change in renewals if change.job.id in written]
            if worker_id is not None:
                worker = await transaction.touch_worker(
                    worker_id, caller.tenant_id, [], len(job_ids), now
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

    async def list(self, caller: Caller) -> list[dict[str, Any]]:
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction() as transaction:
            return await transaction.list_workers(tenant)
