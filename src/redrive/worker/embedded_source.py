"""The in-process JobSource: calls the service directly (no HTTP), for the lowest overhead."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from redrive.domain import lifecycle
from redrive.domain.caller import Caller, Role
from redrive.domain.errors import OjsError
from redrive.domain.frozen import Assembler
from redrive.domain.job import DEFAULT_TENANT, Job
from redrive.service.attempts import AckRequest, NackRequest
from redrive.service.facade import Service
from redrive.service.workers import FetchRequest, HeartbeatRequest
from redrive.worker.source import Completion, Failure, HeartbeatReply, Outcome

# Each ack's and nack's request, assembled (a frozen `__init__` set a nack's six fields one by
# one: 1.0 -> 0.6 us a failed job).
assemble_ack = Assembler(AckRequest)
assemble_nack = Assembler(NackRequest)
# An embedded worker works the default tenant unless it is given another caller.
DEFAULT_TENANT_WORKER = Caller.for_tenant(DEFAULT_TENANT, "embedded-worker", Role.WORKER)
Request = TypeVar("Request", AckRequest, NackRequest)
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
    """Reaches jobs through `service.workers` with the typed requests the HTTP edge builds."""

    def __init__(self, service: Service, caller: Caller = DEFAULT_TENANT_WORKER) -> None:
        self.service = service
        self.caller = caller
        self._interrupted = False
        # The jobs claimed and not yet reported, as their claim returned them: a nack decides
        # from them instead of reading each row again (see NackRequest.held).
        self._held: dict[str, Job] = {}

    async def fetch(
        self, queues: list[str], count: int, wait_ms: int, worker_id: str
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            waiting = remaining_ms > 0 and not self._interrupted
            request = FetchRequest(
                queues=queues,
                count=count,
                worker_id=worker_id,
                wait_ms=min(remaining_ms, WAIT_SLICE_MS) if waiting else 0,
            )
            jobs = await self.service.workers.fetch(self.caller, request)
            if jobs or not waiting or self._interrupted:
                held = self._held
                payloads = []
                for job in jobs:
                    held[job.id] = job
                    payloads.append(job_payload(job))
                return payloads

    def interrupt(self) -> None:
        self._interrupted = True

    async def ack(self, completions: list[Completion], worker_id: str) -> list[Outcome]:
        # Each request assembled (no frozen __init__ setting its four fields one by one).
        held = self._held
        requests: list[AckRequest] = []
        for job_id, lease_token, result in completions:
            held.pop(job_id, None)
            requests.append(
                assemble_ack.adopt(
                    {
                        "job_id": job_id,
                        "worker_id": worker_id,
                        "lease_token": lease_token,
                        "result": result,
                    }
                )
            )
        return await self._in_batches(requests, self.service.workers.ack_many)

    async def nack(self, failures: list[Failure], worker_id: str) -> list[Outcome]:
        requests: list[NackRequest | OjsError] = []
        # Each document parsed once: the jobs that failed alike share theirs (error_document).
        parsed_by_document: dict[int, lifecycle.Failure | OjsError] = {}
        for failure in failures:
            held = self._held.pop(failure.job_id, None)
            parsed = parsed_by_document.get(id(failure.error))
            if parsed is None:
                try:
                    parsed = lifecycle.parse_failure(failure.error)
                except OjsError as error:  # the runtime built an error the server would refuse
                    parsed = error
                parsed_by_document[id(failure.error)] = parsed
            if isinstance(parsed, OjsError):
                requests.append(parsed)
                continue
            requests.append(
                assemble_nack.adopt(
                    {
                        "job_id": failure.job_id,
                        "worker_id": worker_id,
                        "lease_token": failure.lease_token,
                        "failure": parsed,
                        "requeue": failure.requeue,
                        "held": held,
                    }
                )
            )
        return await self._in_batches(requests, self.service.workers.nack_many)

    async def _in_batches(
        self,
        requests: Sequence[Request | OjsError],
        send: Callable[
            [Caller, list[Request | OjsError]],
            Awaitable[Sequence[Job | lifecycle.Completed | OjsError]],
        ],
    ) -> list[Outcome]:
        """One service call (one transaction) per batch the service accepts."""
        outcomes: list[Outcome] = []
        size = self.service.max_batch_size
        for offset in range(0, len(requests), size):
            chunk = list(requests[offset : offset + size])
            for request, result in zip(chunk, await send(self.caller, chunk), strict=True):
                if isinstance(result, OjsError):
                    job_id = "" if isinstance(request, OjsError) else request.job_id
                    outcomes.append(Outcome(job_id, problem=result.code))
                else:
                    outcomes.append(Outcome(result.id, result.state))
        return outcomes

    async def heartbeat(self, job_ids: list[str], worker_id: str) -> HeartbeatReply:
        beat = await self.service.workers.heartbeat(
            self.caller, HeartbeatRequest(worker_id=worker_id, job_ids=job_ids)
        )
        for job_id in beat.lost:
            self._held.pop(job_id, None)
        directive = "" if beat.state == "running" else beat.state
        return HeartbeatReply(directive, beat.extended, beat.lost)

    async def close(self) -> None:
        self._interrupted = True
        self._held.clear()
