"""Dead-letter retention use-cases: read and change policies, prune (delete or archive), restore."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from redrive.domain.audit import Action
from redrive.domain.caller import SYSTEM, Caller
from redrive.domain.dead_letter import ARCHIVED, DEAD, PRUNED
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.durations import format_timestamp
from redrive.domain.envelope import validate_queue_name
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.events import Event
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.retention import (
    GLOBAL,
    MAX_COUNT_LIMIT,
    ArchiveRecord,
    PolicyChanges,
    PolicyRecord,
    RetentionPolicy,
    next_prune_at,
    plan_prune,
)
from redrive.ports import Archive, DeadLetterStore, PruneScope, RetentionStore
from redrive.service import locks
from redrive.service.audit import AuditService
from redrive.service.runtime import Runtime

# Retention policies apply across tenants; they are stored under the default tenant. They, and
# the archives pruning writes (each holding dead letters of every tenant), are global data: the
# use-cases below read and write them in SYSTEM transactions, whichever caller asks (on
# PostgreSQL a tenant's transaction could neither see nor write the default tenant's rows).
POLICY_TENANT = DEFAULT_TENANT
FLOOR_HOLDING = "dead_letter.retention_floor_holding"
WEEK_MS = 7 * 86_400_000
# Every tenant's dead letters: counted per queue from the tallies alone (the time range the
# stats add costs a scan of the dead-letter index right after a prune has emptied it).
EVERY_DEAD_LETTER = DeadLetterFilter()
log = logging.getLogger("redrive.retention")


@dataclass
class PruneReport:
    deleted: int = 0
    archived: int = 0
    by_queue: Counter[str] = field(default_factory=Counter)
    by_tenant: Counter[str] = field(default_factory=Counter)
    # Dead letters removed per (queue, "age" or "count", "deleted" or "archived"): the log line.
    removals: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    archives: list[str] = field(default_factory=list)
    # Per scope (a queue, or GLOBAL): dead letters over max_count the prune kept because they
    # are younger than the floor (min_age) or under a legal hold.
    floor_holding: dict[str, int] = field(default_factory=dict)
    # Tombstones of dead letters pruned longer ago than the policy keeps dead letters, deleted.
    tombstones_removed: int = 0

    @property
    def removed(self) -> int:
        return self.deleted + self.archived


@frozen_dataclass
class Policies:
    global_policy: RetentionPolicy
    queues: dict[str, RetentionPolicy]
    updated: dict[str, dict[str, Any]]

    def for_queue(self, queue: str) -> RetentionPolicy:
        return self.queues.get(queue, self.global_policy)


class RetentionService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    async def policies(self, caller: Caller) -> Policies:
        async with self.runtime.store.transaction(SYSTEM) as transaction:  # global data
            stored = await transaction.dead_letter_policies(POLICY_TENANT)
        global_policy = self.runtime.retention_policy
        queues: dict[str, RetentionPolicy] = {}
        for record in stored:
            if record.queue == GLOBAL:
                global_policy = record.policy
            else:
                queues[record.queue] = record.policy
        updated = {
            record.queue: {
                "updated_at": format_timestamp(record.updated_at),
                "updated_by": record.updated_by,
            }
            for record in stored
        }
        return Policies(global_policy, queues, updated)

    def next_prune_at(self) -> int:
        return next_prune_at(self.runtime.now(), self.runtime.options.prune_interval_ms)

    async def set_policy(
        self, caller: Caller, queue: str | None, changes: PolicyChanges
    ) -> RetentionPolicy:
        """Change the global policy (queue None) or one queue's override; fields not sent keep
        their current values."""
        if queue is not None:
            validate_queue_name(queue, "queue")
        current = await self.policies(caller)
        base = current.global_policy if queue is None else current.for_queue(queue)
        policy = changes.applied_to(base)
        async with self.runtime.store.transaction(SYSTEM) as transaction:  # global data
            await transaction.save_dead_letter_policy(
                PolicyRecord(
                    POLICY_TENANT, queue or GLOBAL, policy, self.runtime.now(), caller.actor
                )
            )
            target = {"queue": queue or GLOBAL, "policy": policy.to_document()}
            await self.audit.record(caller, transaction, Action.RETENTION_POLICY_CHANGE, target, 1)
        return policy

    async def remove_policy(self, caller: Caller, queue: str) -> None:
        async with self.runtime.store.transaction(SYSTEM) as transaction:  # global data
            if not await transaction.delete_dead_letter_policy(POLICY_TENANT, queue):
                raise NotFound("retention policy", queue)
            target = {"queue": queue, "policy": None}
            await self.audit.record(caller, transaction, Action.RETENTION_POLICY_CHANGE, target, 1)

    async def prune(self, caller: Caller) -> PruneReport:
        """Age first, then count, in short batches. Every batch takes the prune lock: when
        another replica holds it, this run stops and leaves the work to that one."""
        policies = await self.policies(caller)
        report = PruneReport()
        overridden = sorted(policies.queues) or None
        scopes: list[tuple[str, list[str] | None, RetentionPolicy]] = [
            (queue, None, policy) for queue, policy in sorted(policies.queues.items())
        ]
        scopes.append((GLOBAL, overridden, policies.global_policy))
        now = self.runtime.now()
        for queue, excluded, policy in scopes:
            target = None if queue == GLOBAL else queue
            # The floor wins: deleted by age only past the longer of max_age and min_age, by
            # count only those older than min_age (archived ones are kept, so any of them).
            archive = policy.archives
            by_age = PruneScope(target, excluded, policy.age_cutoff(now), archive)
            by_count = PruneScope(target, excluded, policy.count_cutoff(now), archive, True)
            if not (
                await self._drain(by_age, policies, report, now, caller.actor)
                and await self._drain(by_count, policies, report, now, caller.actor)
                and await self._drain_episodes(by_age, report)
            ):
                break
            async with self.runtime.store.transaction(SYSTEM) as transaction:
                holding = await self._excess(transaction, by_count, policies, now)
            if holding:
                report.floor_holding[queue] = holding
        if report.removed or report.floor_holding:
            await self._announce(caller, report)
        return report

    async def floor_holding(self, caller: Caller) -> dict[str, int]:
        """Per scope (a queue, or GLOBAL for the queues without their own policy): how many dead
        letters over max_count the retention floor and legal holds keep now, 0 where none."""
        policies = await self.policies(caller)
        now = self.runtime.now()
        overridden = sorted(policies.queues) or None
        holding: dict[str, int] = {}
        async with self.runtime.store.transaction(SYSTEM) as transaction:  # every tenant's
            by_queue = await transaction.count_dead_letters_by_queue(EVERY_DEAD_LETTER)
            for plan in plan_prune(policies.global_policy, policies.queues, by_queue, now):
                scope = PruneScope(
                    None if plan.queue == GLOBAL else plan.queue,
                    overridden if plan.queue == GLOBAL else None,
                    plan.policy.count_cutoff(now),
                    plan.policy.archives,
                    True,
                )
                prunable = (
                    await transaction.count_prunable_dead_letters(scope, plan.excess)
                    if plan.excess
                    else 0
                )
                holding[plan.queue] = plan.excess - prunable
        return holding

    async def young_at_next_prune(self, caller: Caller) -> int:
        """How many dead letters younger than a week the next prune would remove, as things are
        now (the overview warns before it does): by age where the policy keeps less than a
        week, by count where the oldest removable ones are that young."""
        policies = await self.policies(caller)
        now = self.runtime.now()
        week_ago = now - WEEK_MS
        overridden = sorted(policies.queues) or None
        young = 0
        async with self.runtime.store.transaction(SYSTEM) as transaction:  # every tenant's
            by_queue = await transaction.count_dead_letters_by_queue(EVERY_DEAD_LETTER)
            for plan in plan_prune(policies.global_policy, policies.queues, by_queue, now):
                policy = plan.policy
                scope = PruneScope(
                    None if plan.queue == GLOBAL else plan.queue,
                    overridden if plan.queue == GLOBAL else None,
                    None,
                    policy.archives,
                    True,
                )
                by_age = 0
                cutoff = policy.age_cutoff(now)
                if cutoff > week_ago:  # the age prune itself reaches into the last week
                    by_age = await _count(transaction, scope, cutoff) - await _count(
                        transaction, scope, week_ago
                    )
                excess = max(plan.excess - by_age, 0)
                young += by_age
                floor = policy.count_cutoff(now)
                if excess and (floor is None or floor > week_ago):  # else none younger goes
                    # The count takes the oldest first: young ones go only when fewer than
                    # `excess` older than a week are removable (each count stops at `excess`).
                    older = await _count(transaction, scope, week_ago, excess)
                    if older < excess:
                        removable = await _count(transaction, scope, floor, excess)
                        young += max(removable - older, 0)
        return young

    async def _drain(
        self, scope: PruneScope, policies: Policies, report: PruneReport, now: int, actor: str
    ) -> bool:
        """Batches until the scope is done; False when another replica holds the prune lock."""
        batch_size = self.runtime.options.prune_batch_size
        while True:
            removed = await self._prune_batch(scope, batch_size, policies, report, now, actor)
            if removed is None:
                return False
            if removed < batch_size:
                return True

    async def _drain_episodes(self, scope: PruneScope, report: PruneReport) -> bool:
        """Delete, in batches, the history episodes and tombstones past the scope's age."""
        batch_size = self.runtime.options.prune_batch_size
        while True:
            async with self.runtime.store.transaction(SYSTEM) as transaction:
                if not await transaction.try_lock(locks.PRUNE):
                    return False
                rows = await transaction.delete_old_episodes(scope, batch_size)
            tombstones = [row for row in rows if row["status"] in (PRUNED, ARCHIVED)]
            report.tombstones_removed += len(tombstones)
            report.deleted += len(rows) - len(tombstones)
            report.by_tenant.update(row["tenant_id"] for row in rows if row not in tombstones)
            if len(rows) < batch_size:
                return True

    async def _excess(
        self, transaction: DeadLetterStore, scope: PruneScope, policies: Policies, now: int
    ) -> int:
        """How many of the oldest dead letters the scope holds beyond its max_count, counted
        inside the batch's transaction so that concurrent prunes never remove too many."""
        by_queue = await transaction.count_dead_letters_by_queue(EVERY_DEAD_LETTER)
        plans = plan_prune(policies.global_policy, policies.queues, by_queue, now)
        wanted = scope.queue or GLOBAL
        return next(plan.excess for plan in plans if plan.queue == wanted)

    async def _prune_batch(
        self,
        scope: PruneScope,
        batch: int,
        policies: Policies,
        report: PruneReport,
        now: int,
        actor: str,
    ) -> int | None:
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            if not await transaction.try_lock(locks.PRUNE):
                return None
            if scope.by_count:
                excess = await self._excess(transaction, scope, policies, now)
                if excess == 0:
                    return 0
                batch = min(batch, excess)
            rows = await transaction.prune_dead_letters(scope, batch, now, actor)
            if rows and scope.archive:
                stamp = format_timestamp(now).replace(":", "")
                name = f"dead-letters-{stamp}-{self.runtime.new_token()[:8]}.jsonl.gz"
                path = await self._archive().write(name, rows)
                await transaction.add_dead_letter_archive(
                    ArchiveRecord(name, POLICY_TENANT, path, len(rows), now)
                )
                report.archives.append(name)
        report.by_queue.update(row["queue"] for row in rows if row["status"] == DEAD)
        how = ("count" if scope.by_count else "age", "archived" if scope.archive else "deleted")
        report.removals.update((row["queue"], *how) for row in rows if row["status"] == DEAD)
        report.by_tenant.update(row["tenant_id"] for row in rows)
        if scope.archive:
            report.archived += len(rows)
        else:
            report.deleted += len(rows)
        return len(rows)

    def _archive(self) -> Archive:
        if self.runtime.archive is None:
            raise InvalidRequest("archiving needs an archive directory (REDRIVE_ARCHIVE_DIR)", {})
        return self.runtime.archive

    async def _announce(self, caller: Caller, report: PruneReport) -> None:
        """The events, and one audit record per tenant whose dead letters were pruned (in that
        tenant's chain, in the name of whoever pruned: the sweeper is `system`)."""
        now = self.runtime.now()
        events = [
            Event("dead_letter.pruned", POLICY_TENANT, queue, None, None,
                  {"queue": queue, "count": count, "archives": report.archives})
            for queue, count in sorted(report.by_queue.items())
        ] + [
            Event(FLOOR_HOLDING, POLICY_TENANT, None if scope == GLOBAL else scope, None, None,
                  {"scope": scope, "count": count})
            for scope, count in sorted(report.floor_holding.items())
        ]  # fmt: skip
        for (queue, reason, action), count in sorted(report.removals.items()):
            log.warning(
                "pruned %d dead letters of queue %s by %s (%s)", count, queue, reason, action
            )
        if report.archives:
            log.warning("pruning archived dead letters to %s", ", ".join(report.archives))
        if report.tombstones_removed:
            log.info(
                "deleted %d tombstones of dead letters pruned earlier", report.tombstones_removed
            )
        for scope, count in sorted(report.floor_holding.items()):
            log.warning(
                "the retention floor (or a legal hold) keeps %d dead letters over the max_count "
                "of %s", count, "the global policy" if scope == GLOBAL else f"queue {scope}",
            )  # fmt: skip
        # The whole run's totals; each tenant's record counts its own dead letters.
        target = {
            "deleted": report.deleted,
            "archived": report.archived,
            "archives": report.archives,
        }
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            await self.runtime.emit(transaction, events, now)
            for tenant, count in sorted(report.by_tenant.items()):  # heads locked in one order
                await self.audit.record(
                    caller, transaction, Action.RETENTION_PRUNE, target, count, tenant_id=tenant
                )
        self.runtime.metrics.dead_letter_pruned.update(report.by_queue)

    async def archives(self, caller: Caller) -> list[ArchiveRecord]:
        async with self.runtime.store.transaction(SYSTEM) as transaction:  # global data
            return await transaction.dead_letter_archives()

    async def restore(self, caller: Caller, name: str) -> dict[str, int]:
        """Put an archive's entries back in the dead-letter queue, skipping any whose job is
        dead again already. Restoring twice adds nothing the second time."""
        known = {archive.name for archive in await self.archives(caller)}
        if name not in known:
            raise NotFound("archive", name)
        try:
            rows = await self._archive().read(name)
        except LookupError as error:
            raise NotFound("archive file", name) from error
        restored = 0
        now = self.runtime.now()
        # An archive holds dead letters of every tenant: they go back each under its own.
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            for row in rows:
                values = {key: row[key] for key in RESTORED_COLUMNS}
                # Archives from before incidents lack these: the backfill fingerprints those.
                values.update({key: row.get(key) for key in FINGERPRINT_COLUMNS})
                if await transaction.restore_dead_letter(values):
                    restored += 1
            await transaction.mark_archive_restored(name, now)
            target = {"archive": name}
            await self.audit.record(caller, transaction, Action.RETENTION_RESTORE, target, restored)
        return {"entries": len(rows), "restored": restored, "skipped": len(rows) - restored}


async def _count(
    transaction: RetentionStore, scope: PruneScope, before: int | None, limit: int = MAX_COUNT_LIMIT
) -> int:
    """Dead letters of the scope that died before `before` (None: any) and no hold keeps."""
    return await transaction.count_prunable_dead_letters(replace(scope, before=before), limit)


RESTORED_COLUMNS = (
    "id", "job_id", "tenant_id", "queue", "type", "error_type", "reason", "discarded_at", "job",
    "args", "replay_count", "status", "moved_at", "moved_by",
)  # fmt: skip
FINGERPRINT_COLUMNS = ("fingerprint", "fingerprint_version", "incident_id")
