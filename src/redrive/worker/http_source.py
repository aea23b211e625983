"""The JobSource over the OJS HTTP worker protocol (any OJS server), through redrive.Client."""

from __future__ import annotations

import time
from typing import Any

from redrive.client import Client
from redrive.client.errors import ConflictError, InvalidRequestError, NotFoundError
from redrive.worker.source import Completion, Failure, HeartbeatReply, Outcome, each_in_lanes

# One long-poll is split into server waits this long, so `interrupt()` takes effect quickly.
WAIT_SLICE_MS = 1000
DEFAULT_LANES = 4
REFUSALS = (ConflictError, NotFoundError, InvalidRequestError)


class HttpJobSource:
    """Fetch, ack, nack and heartbeat over HTTP; a batch goes as single-job calls for now."""

    def __init__(self, client: Client, lanes: int = DEFAULT_LANES) -> None:
        """`lanes`: how many acks/nacks of a batch are in flight at once."""
        self.client = client
        self.lanes = lanes
        self._interrupted = False

    @classmethod
    def connect(cls, url: str, tenant: str | None = None) -> HttpJobSource:
        return cls(Client(url, tenant=tenant))

    async def fetch(
        self, queues: list[str], count: int, wait_ms: int, worker_id: str
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            wait = min(remaining_ms, WAIT_SLICE_MS) if not self._interrupted else 0
            jobs = await self.client.fetch(
                queues, count=count, worker_id=worker_id, wait_ms=wait if wait > 0 else None
            )
            if jobs or wait <= 0 or self._interrupted:
                return [job.raw for job in jobs]

    def interrupt(self) -> None:
        self._interrupted = True

    async def ack(self, completions: list[Completion], worker_id: str) -> list[Outcome]:
        async def one(completion: Completion) -> Outcome:
            try:
                done = await self.client.ack(
                    completion.job_id, result=completion.result, worker_id=worker_id,
                    lease_token=completion.lease_token,
                )  # fmt: skip
            except REFUSALS as error:
                return Outcome(completion.job_id, problem=error.code)
            return Outcome(completion.job_id, state=done.state)

        return await each_in_lanes(completions, one, self.lanes)

    async def nack(self, failures: list[Failure], worker_id: str) -> list[Outcome]:
        async def one(failure: Failure) -> Outcome:
            try:
                done = await self.client.nack(
                    failure.job_id, error=failure.error, requeue=failure.requeue,
                    worker_id=worker_id, lease_token=failure.lease_token,
                )  # fmt: skip
            except REFUSALS as error:
                return Outcome(failure.job_id, problem=error.code)
            return Outcome(failure.job_id, state=done.state)

        return await each_in_lanes(failures, one, self.lanes)

    async def heartbeat(self, job_ids: list[str], worker_id: str) -> HeartbeatReply:
        beat = await self.client.heartbeat(worker_id=worker_id, job_ids=job_ids)
        return HeartbeatReply(beat.directive, beat.extended, beat.lost)

    async def close(self) -> None:
        self._interrupted = True
        await self.client.aclose()
