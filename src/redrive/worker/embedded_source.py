"""The in-process JobSource: calls the service directly (no HTTP), for the lowest overhead."""

from __future__ import annotations

import time
from typing import Any

from redrive.domain.errors import OjsError
from redrive.domain.job import Job
from redrive.service.facade import Service
from redrive.worker.source import Completion, Failure, HeartbeatReply, Outcome, each_in_lanes

# One long-poll is split into waits this long, so `interrupt()` takes effect quickly.
WAIT_SLICE_MS = 1000


def job_payload(job: Job) -> dict[str, Any]:
    """The parts of the OJS job document the worker runtime reads (no full serialisation)."""
    return {
        "id": job.id,
        "type": job.type,
        "queue": job.queue,
        "args": job.args,
        "meta": job.meta,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "visibility_timeout_ms": job.visibility_timeout_ms,
        "lease_token": job.lease_token,
    }


class EmbeddedJobSource:
    """Reaches jobs through `service.workers` with the same bodies the HTTP routes pass."""

    def __init__(self, service: Service, tenant: str | None = None, lanes: int = 1) -> None:
        """`lanes`: how many acks/nacks of a batch run at once (1 on SQLite, whose store runs
        one transaction at a time; a few on PostgreSQL, below the pool size)."""
        self.service = service
        self.tenant = tenant
        self.lanes = lanes
        self._interrupted = False

    async def fetch(
        self, queues: list[str], count: int, wait_ms: int, worker_id: str
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait_ms / 1000
        body: dict[str, Any] = {"queues": queues, "count": count, "worker_id": worker_id}
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms > 0 and not self._interrupted:
                body["wait_ms"] = min(remaining_ms, WAIT_SLICE_MS)
            else:
                body.pop("wait_ms", None)
            jobs = await self.service.workers.fetch(body, self.tenant)
            if jobs or "wait_ms" not in body or self._interrupted:
                return [job_payload(job) for job in jobs]

    def interrupt(self) -> None:
        self._interrupted = True

    async def ack(self, completions: list[Completion], worker_id: str) -> list[Outcome]:
        async def one(completion: Completion) -> Outcome:
            body = {
                "job_id": completion.job_id,
                "lease_token": completion.lease_token,
                "worker_id": worker_id,
                "result": completion.result,
            }
            try:
                job = await self.service.workers.ack(body, self.tenant)
            except OjsError as error:
                return Outcome(completion.job_id, problem=error.code)
            return Outcome(job.id, state=job.state)

        return await each_in_lanes(completions, one, self.lanes)

    async def nack(self, failures: list[Failure], worker_id: str) -> list[Outcome]:
        async def one(failure: Failure) -> Outcome:
            body = {
                "job_id": failure.job_id,
                "lease_token": failure.lease_token,
                "worker_id": worker_id,
                "error": failure.error,
                "requeue": failure.requeue,
            }
            try:
                job = await self.service.workers.nack(body, self.tenant)
            except OjsError as error:
                return Outcome(failure.job_id, problem=error.code)
            return Outcome(job.id, state=job.state)

        return await each_in_lanes(failures, one, self.lanes)

    async def heartbeat(self, job_ids: list[str], worker_id: str) -> HeartbeatReply:
        beat = await self.service.workers.heartbeat(
            {"worker_id": worker_id, "active_jobs": job_ids}, self.tenant
        )
        directive = "" if beat.state == "running" else beat.state
        return HeartbeatReply(directive, beat.extended, beat.lost)

    async def close(self) -> None:
        self._interrupted = True
