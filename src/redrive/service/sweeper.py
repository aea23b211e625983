"""Clock-driven work: promote due jobs, expire TTLs, reap lost leases, fire crons, trim events.

Every task runs in its own transaction behind a lock, so with many replicas on one PostgreSQL
database each task runs in one replica at a time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from redrive.domain import lifecycle
from redrive.domain.events import job_event
from redrive.ports import Transaction
from redrive.service.crons import CronService
from redrive.service.runtime import Runtime
from redrive.service.workers import record_failure

BATCH = 200
LOCK_KEYS = {
    "promote": 0x72640001,
    "expire": 0x72640002,
    "reap": 0x72640003,
    "crons": 0x72640004,
    "events": 0x72640005,
    "finished": 0x72640006,
}

Task = Callable[[Transaction, int], Awaitable[int]]


class Sweeper:
    def __init__(self, runtime: Runtime, crons: CronService) -> None:
        self.runtime = runtime
        self.crons = crons
        self.tasks: dict[str, Task] = {
            "promote": self._promote,
            "expire": self._expire,
            "reap": self._reap,
            "crons": self._fire_crons,
            "events": self._trim_events,
            "finished": self._prune_finished_jobs,
        }

    async def sweep(self) -> dict[str, int]:
        """Run every task once: rows moved per task (-1 where another replica holds it)."""
        return {name: await self.run(name) for name in self.tasks}

    async def run(self, name: str) -> int:
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            if not await transaction.try_lock(LOCK_KEYS[name]):
                return -1
            return await self.tasks[name](transaction, now)

    async def _promote(self, transaction: Transaction, now: int) -> int:
        queues = await transaction.promote_due_jobs(now)
        await transaction.notify(queues)
        return len(queues)

    async def _expire(self, transaction: Transaction, now: int) -> int:
        expired = 0
        for job in await transaction.expired_jobs(now, BATCH):
            outcome = lifecycle.expire(job, now)
            if await transaction.update_job(outcome, job.state, job.lease_token):
                await self.runtime.emit(transaction, [job_event("expired", outcome)], now)
                expired += 1
        return expired

    async def _reap(self, transaction: Transaction, now: int) -> int:
        reaped = 0
        for job in await transaction.expired_leases(now, BATCH):
            outcome = lifecycle.reap(job, now, self.runtime.jitter_factor())
            if await record_failure(self.runtime, transaction, job, outcome, now):
                reaped += 1
        return reaped

    async def _fire_crons(self, transaction: Transaction, now: int) -> int:
        return await self.crons.fire_due(transaction, now)

    async def _prune_finished_jobs(self, transaction: Transaction, now: int) -> int:
        """Completed, cancelled and discarded jobs leave the hot table after their retention.
        A dead job's history stays in the dead-letter table, which answers GET for it."""
        cutoff = now - self.runtime.options.finished_job_retention_ms
        return await transaction.prune_finished_jobs(cutoff, BATCH)

    async def _trim_events(self, transaction: Transaction, now: int) -> int:
        return await transaction.delete_events_before(now - self.runtime.options.event_retention_ms)
