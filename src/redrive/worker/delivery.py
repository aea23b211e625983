"""Sending finished jobs back in batches: acks and nacks buffered, flushed as soon as the loop
is free, retried while the source is unreachable."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from redrive.worker.source import Completion, Failure, JobSource, Outcome

log = logging.getLogger("redrive.worker")

MAX_BATCH = 500
SEND_RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
CLOSE_TIMEOUT_SECONDS = 30.0

Item = TypeVar("Item", Completion, Failure)


class Delivery:
    """One flusher task for all jobs: no per-job sends, no per-job sleeps."""

    def __init__(self, source: JobSource, worker_id: str) -> None:
        self.source = source
        self.worker_id = worker_id
        self._completions: list[Completion] = []
        self._failures: list[Failure] = []
        self._wanted = asyncio.Event()
        self._closing = False

    # The flusher waits for `_wanted` only once both lists are empty: the item that makes a
    # list non-empty wakes it, the others join the batch it takes (no Event.set a job).
    def add_completion(self, completion: Completion) -> None:
        self._completions.append(completion)
        if len(self._completions) == 1:
            self._wanted.set()

    def add_failure(self, failure: Failure) -> None:
        self._failures.append(failure)
        if len(self._failures) == 1:
            self._wanted.set()

    @property
    def pending(self) -> int:
        return len(self._completions) + len(self._failures)

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            await asyncio.sleep(0)  # let handlers finishing in this same tick join the batch
            while self._completions or self._failures:
                completions = self._completions[:MAX_BATCH]
                del self._completions[:MAX_BATCH]
                failures = self._failures[:MAX_BATCH]
                del self._failures[:MAX_BATCH]
                if completions:
                    await self._send("ack", self.source.ack, completions)
                if failures:
                    await self._send("nack", self.source.nack, failures)
            if self._closing:
                return

    async def close(self, task: asyncio.Task[None]) -> None:
        """Flush what is buffered, then stop the flusher."""
        self._closing = True
        self._wanted.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_SECONDS)
        except TimeoutError:
            log.error("could not deliver %d results before exiting; their leases will expire "
                      "and the server will retry them", self.pending)  # fmt: skip
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _send(
        self,
        action: str,
        send: Callable[[list[Item], str], Awaitable[list[Outcome]]],
        items: list[Item],
    ) -> None:
        for pause in (*SEND_RETRY_SECONDS, None):
            try:
                outcomes = await send(items, self.worker_id)
            except Exception as error:
                if pause is None:
                    log.error("%s of %d jobs failed for good (%s: %s); their leases will expire "
                              "and the server will retry them",
                              action, len(items), type(error).__name__, error)  # fmt: skip
                    return
                log.warning("%s of %d jobs failed (%s: %s); retrying in %.1f s",
                            action, len(items), type(error).__name__, error, pause)  # fmt: skip
                await asyncio.sleep(pause)
            else:
                report_refusals(action, outcomes)
                return


def report_refusals(action: str, outcomes: Sequence[Outcome]) -> None:
    for outcome in outcomes:
        if outcome.problem is not None:  # (not `accepted`: a property's call a job)
            log.warning("job %s: %s refused (%s); the lease was lost, the server decides what "
                        "happens to the job", outcome.job_id, action, outcome.problem)  # fmt: skip
