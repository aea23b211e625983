"""The JobSource over the OJS HTTP worker protocol (any OJS server), through redrive.Client."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from redrive.client import Client
from redrive.client.errors import ConflictError, InvalidRequestError, NotFoundError, RedriveError
from redrive.client.models import Outcome as ClientOutcome
from redrive.worker.source import Completion, Failure, HeartbeatReply, Outcome, each_in_lanes

# One long-poll is split into server waits this long, so `interrupt()` takes effect quickly.
WAIT_SLICE_MS = 1000
DEFAULT_LANES = 4
REFUSALS = (ConflictError, NotFoundError, InvalidRequestError)
# The server's default batch limit (REDRIVE_MAX_BATCH_SIZE).
BATCH_SIZE = 1000


class HttpJobSource:
    """Fetch, ack, nack and heartbeat over HTTP; a batch of acks or nacks is one request when
    the server takes batches."""

    def __init__(self, client: Client, lanes: int = DEFAULT_LANES) -> None:
        """`lanes`: how many acks/nacks of a batch are in flight at once."""
        self.client = client
        self.lanes = lanes
        self._interrupted = False
        self._batch_ack: bool | None = None

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
            jobs = await self.client.fetch_documents(
                queues, count=count, worker_id=worker_id, wait_ms=wait if wait > 0 else None
            )
            if jobs or wait <= 0 or self._interrupted:
                return jobs

    def interrupt(self) -> None:
        self._interrupted = True

    async def _batches_supported(self) -> bool:
        """Whether the server takes batch acks/nacks (redrive's `batch_ack` capability); other
        OJS servers get single-job calls, `lanes` at a time."""
        if self._batch_ack is None:
            try:
                manifest = await self.client.manifest()
            except RedriveError:
                manifest = {}
            capabilities = manifest.get("capabilities")
            self._batch_ack = (
                isinstance(capabilities, dict) and capabilities.get("batch_ack") is True
            )
        return self._batch_ack

    async def ack(self, completions: list[Completion], worker_id: str) -> list[Outcome]:
        if await self._batches_supported():
            bodies = [
                {
                    "job_id": completion.job_id,
                    "result": completion.result,
                    "worker_id": worker_id,
                    "lease_token": completion.lease_token,
                }
                for completion in completions
            ]
            return await self._in_batches(bodies, self.client.ack_many)

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
        if await self._batches_supported():
            bodies = [
                {
                    "job_id": failure.job_id,
                    "error": failure.error,
                    "requeue": failure.requeue,
                    "worker_id": worker_id,
                    "lease_token": failure.lease_token,
                }
                for failure in failures
            ]
            return await self._in_batches(bodies, self.client.nack_many)

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

    async def _in_batches(
        self,
        bodies: list[dict[str, Any]],
        send: Callable[[list[dict[str, Any]]], Awaitable[list[ClientOutcome | RedriveError]]],
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for offset in range(0, len(bodies), BATCH_SIZE):
            chunk = bodies[offset : offset + BATCH_SIZE]
            for body, result in zip(chunk, await send(chunk), strict=True):
                if isinstance(result, RedriveError):
                    outcomes.append(Outcome(str(body["job_id"]), problem=result.code))
                else:
                    outcomes.append(Outcome(result.job_id, state=result.state))
        return outcomes

    async def heartbeat(self, job_ids: list[str], worker_id: str) -> HeartbeatReply:
        beat = await self.client.heartbeat(worker_id=worker_id, job_ids=job_ids)
        return HeartbeatReply(beat.directive, beat.extended, beat.lost)

    async def close(self) -> None:
        self._interrupted = True
        await self.client.aclose()
