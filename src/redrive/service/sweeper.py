"""Clock-driven work: promote due jobs, expire TTLs, reap lost leases, fire crons, trim events and
the webhook delivery log, prune dead letters, fingerprint dead letters from before incidents, and
advance running redrive tasks, and evaluate the alert rules.

Every task runs in its own transaction behind a lock, so with many replicas on one PostgreSQL
database each task runs in one replica at a time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from redrive.domain import lifecycle
from redrive.domain.caller import SYSTEM
from redrive.domain.events import job_event
from redrive.ports import (
    AttemptWrites,
    CronFiring,
    EventStore,
    JobStore,
    Transaction,
    WebhookStore,
)
from redrive.service import locks
from redrive.service.alerts import AlertService, Evaluation
from redrive.service.attempts import record_failures
from redrive.service.crons import CronService
from redrive.service.incidents import BACKFILL_BATCH, IncidentService
from redrive.service.redrives import RedriveService
from redrive.service.replay import ReplayService
from redrive.service.retention import RetentionService
from redrive.service.runtime import Runtime

BATCH = 200
LOCK_KEYS = {
    "promote": locks.PROMOTE,
    "expire": locks.EXPIRE,
    "reap": locks.REAP,
    "crons": locks.CRONS,
    "events": locks.EVENTS,
    "finished": locks.FINISHED_JOBS,
    "webhook_log": locks.WEBHOOK_LOG,
}

Task = Callable[[Transaction, int], Awaitable[int]]
# Retention trims that may wait: in a paced sweep (the loop's), one that found nothing waits
# twice as long before its next run, up to TRIM_BACKOFF_MS, and runs every sweep again once it
# trims something. Each is a transaction of four round trips five times a second; the sweep was
# 10 % of a busy server's CPU on the HTTP no-op path (N = 10,000, py-spy).
PACED_TASKS = frozenset({"events", "finished", "webhook_log"})
TRIM_BACKOFF_MS = 2_000
FIRST_BACKOFF_MS = 400
# Tasks a sweep runs only when its first read (`due_work`) finds them something to do, as do
# the replay rules and redrive tasks: each is a transaction of three round trips behind its own
# lock, and an idle server ran six of them five times a second (~18 round trips a tick): with
# one read instead, an idle `redrive serve` and its backends take 0.54 CPU-seconds a minute, not
# 1.08 (/proc, 5 interleaved pairs).
PROBED_TASKS = frozenset({"promote", "expire", "reap", "crons"})
# The longest an idle finished prune waits before it reads the jobs table again.
FINISHED_RECHECK_MS = 3_600_000


class Sweeper:
    def __init__(
        self,
        runtime: Runtime,
        crons: CronService,
        retention: RetentionService,
        replay: ReplayService,
        incidents: IncidentService,
        redrives: RedriveService,
        alerts: AlertService,
    ) -> None:
        self.runtime = runtime
        self.crons = crons
        self.retention = retention
        self.replay = replay
        self.incidents = incidents
        self.redrives = redrives
        self.alerts = alerts
        self.next_alerts_at = runtime.now()
        self.next_prune_at = retention.next_prune_at()
        self.next_backfill_at = runtime.now()
        self.backoff_ms: dict[str, int] = {}
        self.next_run_at: dict[str, int] = {}
        # A paced task's own lower bound on its next run (the finished prune's, when nothing
        # can be due before it), whatever its backoff says.
        self.due_at: dict[str, int] = {}
        self.tasks: dict[str, Task] = {
            "promote": self._promote,
            "expire": self._expire,
            "reap": self._reap,
            "crons": self._fire_crons,
            "events": self._trim_events,
            "finished": self._prune_finished_jobs,
            "webhook_log": self._trim_webhook_log,
        }

    async def sweep(self, paced: bool = False) -> dict[str, int]:
        """Run every task once: rows moved per task (-1 where another replica holds it).
        Dead-letter pruning runs only when its interval boundary has passed; `paced` (the
        sweep loop) also skips the trims of PACED_TASKS that are backing off."""
        moved: dict[str, int] = {}
        due = await self.due_work()
        for name in self.tasks:
            if paced and self.runtime.now() < self.next_run_at.get(name, 0):
                continue
            if name in PROBED_TASKS and name not in due:
                moved[name] = 0
                continue
            moved[name] = await self.run(name)
            if paced and name in PACED_TASKS:
                self._pace(name, moved[name])
        moved["replay"] = sum((await self.replay.replay_due()).values()) if "replay" in due else 0
        moved["redrives"] = await self.redrives.advance() if "redrives" in due else 0
        if self.runtime.now() >= self.next_prune_at:
            moved["prune"] = await self.prune()
        if self.runtime.now() >= self.next_backfill_at:
            moved["backfill"] = await self.backfill()
        if self.runtime.now() >= self.next_alerts_at:
            evaluation = await self.evaluate_alerts()
            moved["alerts"] = -1 if evaluation is None else len(evaluation.fired)
        return moved

    async def due_work(self) -> set[str]:
        """The PROBED_TASKS (and replay, redrives) with something to do now: one read. Work
        falling due after it waits for the next sweep, as work falling due after a task ran
        always has."""
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            return await transaction.due_work(self.runtime.now())

    def _pace(self, name: str, moved: int) -> None:
        backoff = self.backoff_ms.get(name, 0)
        backoff = 0 if moved > 0 else min(TRIM_BACKOFF_MS, max(FIRST_BACKOFF_MS, 2 * backoff))
        self.backoff_ms[name] = backoff
        self.next_run_at[name] = max(self.runtime.now() + backoff, self.due_at.get(name, 0))

    async def evaluate_alerts(self) -> Evaluation | None:
        """Evaluate the alert rules once (None where another replica holds the lock); the next
        evaluation after the alert interval."""
        self.next_alerts_at = self.runtime.now() + self.runtime.options.alert_interval_ms
        now = self.runtime.now()
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            if not await transaction.try_lock(locks.ALERTS):
                return None
            return await self.alerts.evaluate(transaction, now)

    async def backfill(self) -> int:
        """A batch of dead letters from before incidents; the next one at the next sweep while
        batches come back full, else after a prune interval (restoring an old archive brings
        some back)."""
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            locked = await transaction.try_lock(locks.INCIDENT_BACKFILL)
            read = await self.incidents.backfill_batch(transaction) if locked else -1
        if read < BACKFILL_BATCH:
            self.next_backfill_at = self.runtime.now() + self.runtime.options.prune_interval_ms
        return read

    async def prune(self) -> int:
        self.next_prune_at = self.retention.next_prune_at()
        return (await self.retention.prune(SYSTEM)).removed

    async def run(self, name: str) -> int:
        now = self.runtime.now()
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            if not await transaction.try_lock(LOCK_KEYS[name]):
                return -1
            return await self.tasks[name](transaction, now)

    async def _promote(self, transaction: JobStore, now: int) -> int:
        queues = await transaction.promote_due_jobs(now)
        await transaction.notify(queues)
        return len(queues)

    async def _expire(self, transaction: AttemptWrites, now: int) -> int:
        expired = 0
        for job in await transaction.expired_jobs(now, BATCH):
            outcome = lifecycle.expire(job, now)
            if await transaction.update_job(outcome, job.state, job.lease_token):
                await self.runtime.emit(transaction, [job_event("expired", outcome)], now)
                expired += 1
        return expired

    async def _reap(self, transaction: AttemptWrites, now: int) -> int:
        failures = [
            (job, lifecycle.reap(job, now, self.runtime.jitter_factor()))
            for job in await transaction.expired_leases(now, BATCH)
        ]
        return len(await record_failures(self.runtime, transaction, failures, now))

    async def _fire_crons(self, transaction: CronFiring, now: int) -> int:
        return await self.crons.fire_due(transaction, now)

    async def _prune_finished_jobs(self, transaction: JobStore, now: int) -> int:
        """Completed, cancelled and discarded jobs leave the hot table after their retention.
        A dead job's history stays in the dead-letter table, which answers GET for it. Finding
        them reads the whole table (an index for it would cost every ack), so once none is due
        the paced sweep leaves the prune until the oldest one left can be (`due_at`), at most
        FINISHED_RECHECK_MS on: a job finishes at its replica's now, so none finishing later
        is due sooner. Before, an idle prune read the table every 2 s."""
        retention = self.runtime.options.finished_job_retention_ms
        removed = await transaction.prune_finished_jobs(now - retention, BATCH)
        if removed == BATCH:  # more may be due: the next sweep goes on
            self.due_at["finished"] = now
            return removed
        # Caught up: read when the oldest left finished (a second scan, once per wake; a
        # backlog's sweeps pay only the prune, whose LIMIT stops at the first due rows).
        oldest = await transaction.oldest_finished_at()
        since = now if oldest is None else min(oldest, now)
        self.due_at["finished"] = min(since + retention, now + FINISHED_RECHECK_MS)
        return removed

    async def _trim_events(self, transaction: EventStore, now: int) -> int:
        return await transaction.delete_events_before(now - self.runtime.options.event_retention_ms)

    async def _trim_webhook_log(self, transaction: WebhookStore, now: int) -> int:
        cutoff = now - self.runtime.options.webhook_log_retention_ms
        return await transaction.delete_delivery_records_before(cutoff, BATCH)
