"""Dead-letter policies: retention (prune batches, archives, restoring) and replay rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redrive.ports import ReplayRuleStore, RetentionStore
from redrive.store.base import SqlBase
from redrive.store.codec import replay_rule_from_row, replay_rule_parameters

# Imported where policies and archives are read: a producer reads neither.
if TYPE_CHECKING:
    from redrive.domain.replay import ReplayRule
    from redrive.domain.retention import ArchiveRecord, PolicyRecord
    from redrive.ports.dead_letters import PruneScope


def _policy(row: dict[str, Any]) -> PolicyRecord:
    from redrive.domain.retention import PolicyRecord, RetentionPolicy

    return PolicyRecord(
        tenant_id=row["tenant_id"],
        queue=row["queue"],
        policy=RetentionPolicy(
            int(row["max_age_ms"]),
            int(row["max_count"]),
            row["pruning_policy"],
            int(row["min_age_ms"]),
        ),
        updated_at=int(row["updated_at"]),
        updated_by=row["updated_by"],
    )


def _archive(row: dict[str, Any]) -> ArchiveRecord:
    from redrive.domain.retention import ArchiveRecord

    return ArchiveRecord(
        name=row["name"],
        tenant_id=row["tenant_id"],
        path=row["path"],
        entries=int(row["entries"]),
        created_at=int(row["created_at"]),
        restored_at=row["restored_at"],
    )


class SqlRetention(SqlBase, RetentionStore):
    async def prune_dead_letters(
        self, scope: PruneScope, limit: int, now: int, moved_by: str
    ) -> list[dict[str, Any]]:
        """Prune one batch (by age, or the oldest dead ones by count), leaving a tombstone of
        each dead letter (status pruned, or archived); the rows as they were: whole rows when
        archiving (the history rows an age prune archives are deleted), the tally columns
        otherwise."""
        from redrive.domain.dead_letter import ARCHIVED, PRUNED  # here: a producer prunes none

        kind = "oldest_dead_letters" if scope.by_count else "dead_letters_by_age"
        parameters = {**self._scope(scope), "limit": limit, "now": now, "moved_by": moved_by}
        if not scope.archive:
            rows = await self.executor.rows(f"prune_{kind}", {**parameters, "status": PRUNED})
        else:
            rows = await self.executor.rows(f"archive_{kind}", parameters)
            if rows:
                ids = self.executor.list_parameter([row["id"] for row in rows])
                await self.executor.run(
                    "tombstone_dead_letters",
                    {"ids": ids, "status": ARCHIVED, "now": now, "moved_by": moved_by},
                )
        self._tally(rows, -1)
        return rows

    async def delete_old_episodes(self, scope: PruneScope, limit: int) -> list[dict[str, Any]]:
        return await self.executor.rows(
            "delete_old_episodes", {**self._scope(scope), "limit": limit}
        )

    async def count_prunable_dead_letters(self, scope: PruneScope, limit: int) -> int:
        parameters = {**self._scope(scope), "limit": limit}
        rows = await self.executor.rows("count_prunable_dead_letters", parameters)
        return int(rows[0]["count"])

    def _scope(self, scope: PruneScope) -> dict[str, Any]:
        return {
            "queue": scope.queue,
            "excluded_queues": self.executor.list_parameter(scope.excluded_queues),
            "before": scope.before,
        }

    async def restore_dead_letter(self, row: dict[str, Any]) -> bool:
        await self._run("delete_archived_tombstone", id=row["id"])
        # An archive written before migration 0014 has no aggregate key.
        restored = await self.executor.rows("restore_dead_letter", {"aggregate_key": None, **row})
        if restored:
            self._tally([row], 1)
        return bool(restored)

    async def dead_letter_policies(self, tenant_id: str) -> list[PolicyRecord]:
        rows = await self._rows("select_dead_letter_policies", tenant_id=tenant_id)
        return [_policy(row) for row in rows]

    async def save_dead_letter_policy(self, policy: PolicyRecord) -> None:
        await self._run(
            "upsert_dead_letter_policy",
            tenant_id=policy.tenant_id,
            queue=policy.queue,
            max_age_ms=policy.policy.max_age_ms,
            max_count=policy.policy.max_count,
            pruning_policy=policy.policy.pruning_policy,
            min_age_ms=policy.policy.min_age_ms,
            updated_at=policy.updated_at,
            updated_by=policy.updated_by,
        )

    async def delete_dead_letter_policy(self, tenant_id: str, queue: str) -> bool:
        return await self._run("delete_dead_letter_policy", tenant_id=tenant_id, queue=queue) > 0

    async def add_dead_letter_archive(self, archive: ArchiveRecord) -> None:
        await self._run(
            "insert_dead_letter_archive",
            name=archive.name,
            tenant_id=archive.tenant_id,
            path=archive.path,
            entries=archive.entries,
            created_at=archive.created_at,
        )

    async def dead_letter_archives(self) -> list[ArchiveRecord]:
        return [_archive(row) for row in await self._rows("select_dead_letter_archives")]

    async def mark_archive_restored(self, name: str, now: int) -> None:
        await self._run("mark_archive_restored", name=name, now=now)


class SqlReplayRules(SqlBase, ReplayRuleStore):
    async def replay_rules(self, tenant_id: str | None) -> list[ReplayRule]:
        rows = await self._rows("select_replay_rules", tenant_id=tenant_id)
        return [replay_rule_from_row(row) for row in rows]

    async def save_replay_rule(self, rule: ReplayRule) -> None:
        await self.executor.run("upsert_replay_rule", replay_rule_parameters(rule))

    async def delete_replay_rule(self, rule_id: str) -> bool:
        return await self._run("delete_replay_rule", id=rule_id) > 0

    async def count_replays(self, rule_id: str, count: int) -> None:
        await self._run("count_replays", id=rule_id, count=count)
