"""Dead-letter use-cases: list, inspect, retry (one, modified, in bulk), delete, purge, stats."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redrive.domain import dead_letter as episodes
from redrive.domain.dead_letter import DeadLetter, DeadLetterFilter, apply_override, parse_filter
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.events import job_event
from redrive.domain.job import Job
from redrive.ports import Page, Transaction
from redrive.service.runtime import Runtime

BULK_CHUNK = 1000
SAMPLE_SIZE = 10


@dataclass
class BulkResult:
    action: str
    matched: int = 0
    succeeded: int = 0
    failed: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False
    sample: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)


def require_confirmation(body: dict[str, Any], filters: DeadLetterFilter) -> bool:
    """Bulk changes need `confirm: true`; `dry_run: true` only counts. Returns dry_run."""
    dry_run = body.get("dry_run") is True or str(body.get("dry_run")).lower() == "true"
    confirm = body.get("confirm") is True or str(body.get("confirm")).lower() == "true"
    if not dry_run and not confirm:
        scope = "everything in the dead-letter queue" if filters.is_empty else "the filtered set"
        raise InvalidRequest(
            f"this changes {scope}: send confirm: true (or dry_run: true to see the count first)",
            {"field": "confirm"},
        )
    return dry_run


class DeadLetterService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def filter(self, raw: dict[str, Any], tenant: str | None) -> DeadLetterFilter:
        return parse_filter(raw, self.runtime.now(), tenant)

    async def search(self, filters: DeadLetterFilter, page: Page) -> tuple[list[DeadLetter], int]:
        async with self.runtime.store.transaction() as transaction:
            items = await transaction.list_dead_letters(filters, page)
            total = await transaction.count_dead_letters(filters)
        return items, total

    async def get(self, job_id: str, tenant: str | None) -> tuple[DeadLetter, list[DeadLetter]]:
        """The job's current dead episode, and every episode it has had, oldest first."""
        async with self.runtime.store.transaction() as transaction:
            dead = await transaction.get_dead_letter(job_id, tenant)
            history = await transaction.dead_letter_episodes(job_id, tenant) if dead else []
        if dead is None:
            raise NotFound("dead letter", job_id)
        return dead, history

    async def episodes(self, job_id: str, tenant: str | None) -> list[DeadLetter]:
        """Every episode the job has had, oldest first, whether or not one is dead now."""
        async with self.runtime.store.transaction() as transaction:
            history = await transaction.dead_letter_episodes(job_id, tenant)
        if not history:
            raise NotFound("dead letter", job_id)
        return history

    async def redrive(
        self,
        transaction: Transaction,
        dead: DeadLetter,
        job: Job,
        status: str,
        moved_by: str,
        now: int,
    ) -> bool:
        """Flip the episode out of `dead` (the exactly-once guard), then requeue `job` (the dead
        job, possibly modified). Both happen in the caller's transaction or neither does."""
        if not await transaction.move_dead_letter(dead, status, now, moved_by):
            return False
        revived = episodes.redrive(job, now)
        await transaction.ensure_queue(revived.queue, revived.tenant_id, now)
        await transaction.upsert_job(revived)
        await transaction.notify({revived.queue})
        kind = "dead_letter.replayed" if status == episodes.REPLAYED else "dead_letter.retried"
        event = job_event(kind, revived, moved_by=moved_by, episode_id=dead.id)
        await self.runtime.emit(transaction, [event], now)
        counter = (
            self.runtime.metrics.dead_letter_replayed
            if status == episodes.REPLAYED
            else self.runtime.metrics.dead_letter_retried
        )
        counter[revived.queue] += 1
        return True

    async def retry(
        self, job_id: str, tenant: str | None, override: dict[str, Any], moved_by: str
    ) -> Job:
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            dead = await transaction.get_dead_letter(job_id, tenant)
            if dead is None:
                raise NotFound("dead letter", job_id)
            modified = apply_override(dead.job, override)
            if not await self.redrive(transaction, dead, modified, episodes.RETRIED, moved_by, now):
                raise NotFound("dead letter", job_id)
        return episodes.redrive(modified, now)

    async def delete(self, job_id: str, tenant: str | None, moved_by: str) -> None:
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            dead = await transaction.get_dead_letter(job_id, tenant)
            if dead is None or not await transaction.move_dead_letter(
                dead, episodes.DELETED, now, moved_by
            ):
                raise NotFound("dead letter", job_id)
            await self._forget(transaction, [dead], moved_by, now)

    async def _preview(self, filters: DeadLetterFilter, result: BulkResult) -> BulkResult:
        async with self.runtime.store.transaction() as transaction:
            result.matched = await transaction.count_dead_letters(filters)
            sample = await transaction.list_dead_letters(filters, Page(limit=SAMPLE_SIZE))
            stats = await transaction.dead_letter_stats(filters.tenant_id)
        result.sample = [dead.job_id for dead in sample]
        result.queues = sorted(stats["by_queue"]) if filters.queue is None else [filters.queue]
        return result

    async def _bulk(
        self, filters: DeadLetterFilter, action: str, body: dict[str, Any], moved_by: str
    ) -> BulkResult:
        """Set-based, in chunks of one transaction each: a failure half-way leaves every job
        either back in its queue or still dead, and the status flip makes each episode move once
        even when several operators or replicas run the same bulk operation."""
        result = BulkResult(action=action, dry_run=require_confirmation(body, filters))
        if result.dry_run:
            return await self._preview(filters, result)
        status = episodes.RETRIED if action == "retry" else episodes.DELETED
        queues: set[str] = set()
        while True:
            now = self.runtime.now()
            async with self.runtime.store.transaction() as transaction:
                chunk = await transaction.list_dead_letters(filters, Page(limit=BULK_CHUNK))
                moved = await transaction.move_dead_letters(chunk, status, now, moved_by)
                if action == "retry":
                    await self._revive(transaction, moved, moved_by, now)
                else:
                    await self._forget(transaction, moved, moved_by, now)
            moved_ids = {dead.id for dead in moved}
            result.matched += len(chunk)
            result.succeeded += len(moved)
            result.failed += len(chunk) - len(moved)
            result.errors += [
                {"job_id": dead.job_id, "error": "moved by someone else meanwhile"}
                for dead in chunk
                if dead.id not in moved_ids
            ][: SAMPLE_SIZE - len(result.errors)]
            queues |= {dead.job.queue for dead in moved}
            if len(chunk) < BULK_CHUNK:
                break
        result.queues = sorted(queues)
        return result

    async def _revive(
        self, transaction: Transaction, moved: list[DeadLetter], moved_by: str, now: int
    ) -> None:
        """Requeue the jobs of moved episodes: in place where the dead job's row is still in the
        jobs table, from the episode's snapshot where it was pruned from there."""
        revived = await transaction.redrive_jobs([dead.job_id for dead in moved], now)
        await transaction.insert_jobs(
            [episodes.redrive(dead.job, now) for dead in moved if dead.job_id not in revived]
        )
        for queue, tenant in sorted({(dead.job.queue, dead.job.tenant_id) for dead in moved}):
            await transaction.ensure_queue(queue, tenant, now)
        await transaction.notify({dead.job.queue for dead in moved})
        events = [
            job_event("dead_letter.retried", dead.job, moved_by=moved_by, episode_id=dead.id)
            for dead in moved
        ]
        await self.runtime.emit(transaction, events, now)
        self.runtime.metrics.dead_letter_retried.update(dead.job.queue for dead in moved)

    async def _forget(
        self, transaction: Transaction, moved: list[DeadLetter], moved_by: str, now: int
    ) -> None:
        await transaction.delete_dead_jobs([dead.job_id for dead in moved])
        events = [job_event("dead_letter.deleted", dead.job, deleted_by=moved_by) for dead in moved]
        await self.runtime.emit(transaction, events, now)
        self.runtime.metrics.dead_letter_deleted.update(dead.job.queue for dead in moved)

    async def bulk_retry(
        self, filters: DeadLetterFilter, body: dict[str, Any], moved_by: str
    ) -> BulkResult:
        return await self._bulk(filters, "retry", body, moved_by)

    async def purge(
        self, filters: DeadLetterFilter, body: dict[str, Any], moved_by: str
    ) -> BulkResult:
        return await self._bulk(filters, "purge", body, moved_by)

    async def stats(self, tenant: str | None) -> dict[str, Any]:
        async with self.runtime.store.transaction() as transaction:
            return await transaction.dead_letter_stats(tenant)
