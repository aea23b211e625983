"""Dead-letter use-cases: list, inspect, retry (one, modified, in bulk), delete, purge, stats."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

from redrive.domain import dead_letter as episodes
from redrive.domain.dead_letter import (
    DeadLetter,
    DeadLetterFilter,
    MovedEpisode,
    apply_override,
    parse_filter,
)
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.events import episode_event, job_event
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


def bulk_limit(body: dict[str, Any]) -> int | None:
    """`limit`: move at most this many (the newest first); absent means every match."""
    value = body.get("limit")
    if isinstance(value, str) and value.isdigit():
        value = int(value)  # from a query string
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest("limit must be a positive integer", {"field": "limit"})
    return value


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
            await self._forget(transaction, [MovedEpisode.of(dead)], moved_by, now)

    async def _preview(
        self, filters: DeadLetterFilter, result: BulkResult, limit: int | None
    ) -> BulkResult:
        async with self.runtime.store.transaction() as transaction:
            result.matched = await transaction.count_dead_letters(filters)
            sample = await transaction.list_dead_letters(filters, Page(limit=SAMPLE_SIZE))
            stats = await transaction.dead_letter_stats(filters.tenant_id)
        if limit is not None:
            result.matched = min(result.matched, limit)
        result.sample = [dead.job_id for dead in sample][: result.matched]
        result.queues = sorted(stats["by_queue"]) if filters.queue is None else [filters.queue]
        return result

    async def _bulk(
        self, filters: DeadLetterFilter, action: str, body: dict[str, Any], moved_by: str
    ) -> BulkResult:
        """Set-based, in chunks of one transaction each, spread over the store's write lanes: a
        failure half-way leaves every job either back in its queue or still dead, and the status
        flip makes each episode move once even when several operators or replicas run the same
        bulk operation (each sees only what it moved). `limit` in the body caps how many move."""
        limit = bulk_limit(body)
        result = BulkResult(action=action, dry_run=require_confirmation(body, filters))
        if result.dry_run:
            return await self._preview(filters, result, limit)
        queues: set[str] = set()
        budget = sys.maxsize if limit is None else limit  # what the lanes may still take

        async def lane() -> None:
            nonlocal budget
            while (take := min(BULK_CHUNK, budget)) > 0:
                budget -= take
                moved = await self._move_chunk(filters, action, moved_by, take)
                budget += take - len(moved)
                if not moved:
                    return
                result.matched += len(moved)
                result.succeeded += len(moved)
                queues.update(episode.queue for episode in moved)

        async with asyncio.TaskGroup() as lanes:
            for _ in range(self.runtime.store.write_lanes):
                lanes.create_task(lane())
        result.queues = sorted(queues)
        return result

    async def _move_chunk(
        self, filters: DeadLetterFilter, action: str, moved_by: str, limit: int
    ) -> list[MovedEpisode]:
        now = self.runtime.now()
        status = episodes.RETRIED if action == "retry" else episodes.DELETED
        async with self.runtime.store.transaction() as transaction:
            moved = await transaction.move_dead_letters(filters, limit, status, now, moved_by)
            if action == "retry":
                await self._revive(transaction, moved, moved_by, now)
            else:
                await self._forget(transaction, moved, moved_by, now)
        return moved

    async def _revive(
        self, transaction: Transaction, moved: list[MovedEpisode], moved_by: str, now: int
    ) -> None:
        """Requeue the jobs of moved episodes: in place where the dead job's row is still in the
        jobs table, from the episode's snapshot where it was pruned from there."""
        if not moved:
            return
        revived = await transaction.redrive_jobs([episode.job_id for episode in moved], now)
        pruned = [episode.id for episode in moved if episode.job_id not in revived]
        await transaction.insert_jobs(
            [
                episodes.redrive(dead.job, now)
                for dead in await transaction.dead_letters_by_id(pruned)
            ]
        )
        for queue, tenant in sorted({(episode.queue, episode.tenant_id) for episode in moved}):
            await transaction.ensure_queue(queue, tenant, now)
        await transaction.notify({episode.queue for episode in moved})
        events = [
            episode_event("dead_letter.retried", episode, moved_by=moved_by, episode_id=episode.id)
            for episode in moved
        ]
        await self.runtime.emit(transaction, events, now)
        self.runtime.metrics.dead_letter_retried.update(episode.queue for episode in moved)

    async def _forget(
        self, transaction: Transaction, moved: list[MovedEpisode], moved_by: str, now: int
    ) -> None:
        if not moved:
            return
        await transaction.delete_dead_jobs([episode.job_id for episode in moved])
        events = [
            episode_event("dead_letter.deleted", episode, deleted_by=moved_by) for episode in moved
        ]
        await self.runtime.emit(transaction, events, now)
        self.runtime.metrics.dead_letter_deleted.update(episode.queue for episode in moved)

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
