"""The one transaction implementation both dialects share, over their named statements."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace
from typing import Any, Protocol

from redrive.domain.dead_letter import DEAD, DeadLetter, MovedEpisode
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.job import Job
from redrive.domain.replay import ReplayRule
from redrive.ports import (
    Claim,
    EventQuery,
    JobChange,
    JobFilter,
    Page,
    PruneScope,
    StoredEvent,
)
from redrive.store.codec import (
    dead_letter_from_row,
    dead_letter_record,
    dump,
    event_from_row,
    event_record,
    job_from_row,
    job_parameters,
    job_records,
    lifecycle_record,
    load,
    replay_rule_from_row,
    replay_rule_parameters,
)


class Executor(Protocol):
    """Runs a named statement inside the open transaction."""

    async def rows(self, name: str, parameters: dict[str, Any]) -> list[dict[str, Any]]: ...
    async def run(self, name: str, parameters: dict[str, Any]) -> int: ...
    def list_parameter(self, values: list[str] | None) -> Any: ...
    async def notify(self, queues: set[str]) -> None: ...


def _filter_parameters(filters: DeadLetterFilter) -> dict[str, Any]:
    """Every filter attribute, bound by its own name (the SQL fragment names each one)."""
    return {item.name: getattr(filters, item.name) for item in fields(DeadLetterFilter)}


TALLY_DIMENSIONS = ("queue", "type", "error_type")


def _present(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its null fields: the JSON `rows` statements read an absent key as NULL,
    and half of a job's columns are null most of the time (less JSON to write and parse)."""
    return {key: value for key, value in record.items() if value is not None}


def _tally_row(dead: DeadLetter) -> dict[str, Any]:
    job = dead.job
    return {
        "tenant_id": job.tenant_id,
        "queue": job.queue,
        "type": job.type,
        "error_type": dead.error_type,
        "status": DEAD,
    }


class SqlTransaction:
    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.notified: set[str] = set()
        # Tally changes wait for finish(): the tally rows are the hottest in the dead-letter
        # tables, so they are locked for the last moment of a transaction, not the whole of it.
        self.tally_changes: Counter[tuple[str, str, str, str]] = Counter()

    async def finish(self) -> None:
        """Write what waited for the end of the transaction; the store calls it before COMMIT
        (so tallies read inside a transaction do not yet count that transaction's changes)."""
        for (tenant_id, queue, job_type, error_type), delta in sorted(self.tally_changes.items()):
            if delta:
                await self._run(
                    "adjust_dead_letter_tally", tenant_id=tenant_id, queue=queue, type=job_type,
                    error_type=error_type, delta=delta,
                )  # fmt: skip
        self.tally_changes.clear()

    async def notify(self, queues: set[str]) -> None:
        """Tell waiting fetches (in every replica) that these queues have work, on commit."""
        fresh = queues - self.notified
        if fresh:
            self.notified |= fresh
            await self.executor.notify(fresh)

    async def _rows(self, statement: str, /, **parameters: Any) -> list[dict[str, Any]]:
        return await self.executor.rows(statement, parameters)

    async def _run(self, statement: str, /, **parameters: Any) -> int:
        return await self.executor.run(statement, parameters)

    # jobs

    async def insert_jobs(self, jobs: list[Job]) -> set[str]:
        """Insert many jobs in one statement; ids that exist already are left as they are.
        Returns the ids actually inserted."""
        if not jobs:
            return set()
        rows = await self._rows("insert_jobs", rows=dump(job_records(jobs)))
        return {row["id"] for row in rows}

    async def insert_job(self, job: Job) -> bool:
        return bool(await self.insert_jobs([job]))

    async def upsert_job(self, job: Job) -> None:
        await self.executor.run("upsert_job", job_parameters(job))

    async def update_jobs(self, changes: list[JobChange]) -> set[str]:
        """Write the lifecycle (state, attempt, timestamps, lease, errors, result) of many decided
        jobs in one statement, each guarded by the state and lease it was decided from; returns
        the ids written (a missing id lost a race). A job's definition is never changed here."""
        if not changes:
            return set()
        records = [
            _present(
                {
                    **lifecycle_record(change.job),
                    "expected_state": change.expected_state,
                    "expected_lease_token": change.expected_lease_token,
                }
            )
            for change in changes
        ]
        ids = self.executor.list_parameter([change.job.id for change in changes])
        return {row["id"] for row in await self._rows("update_jobs", rows=dump(records), ids=ids)}

    async def update_job(self, job: Job, expected_state: str, expected_lease: str | None) -> bool:
        return bool(await self.update_jobs([JobChange(job, expected_state, expected_lease)]))

    async def get_job(self, job_id: str, tenant_id: str | None, lock: bool = False) -> Job | None:
        name = "select_job_for_update" if lock else "select_job"
        rows = await self._rows(name, id=job_id, tenant_id=tenant_id)
        return job_from_row(rows[0]) if rows else None

    async def lock_jobs(self, job_ids: list[str], tenant_id: str | None) -> dict[str, Job]:
        """Read and lock many jobs in one statement (in id order); missing ids are absent."""
        if not job_ids:
            return {}
        rows = await self._rows(
            "select_jobs_for_update", ids=self.executor.list_parameter(job_ids), tenant_id=tenant_id
        )
        return {row["id"]: job_from_row(row) for row in rows}

    async def list_jobs(
        self, tenant_id: str | None, filters: JobFilter, limit: int, offset: int
    ) -> tuple[list[Job], int]:
        keys = {"tenant_id": tenant_id, "queue": filters.queue, "state": filters.state,
                "type": filters.type}  # fmt: skip
        rows = await self._rows("select_jobs", limit=limit, offset=offset, **keys)
        total = await self._rows("count_jobs", **keys)
        return [job_from_row(row) for row in rows], int(total[0]["count"])

    async def claim_jobs(self, claim: Claim, now: int) -> list[Job]:
        rows = await self._rows(
            "claim_jobs",
            queue=claim.queue,
            limit=claim.limit,
            worker_id=claim.worker_id,
            lease_token=claim.lease_token,
            visibility_timeout_ms=claim.visibility_timeout_ms,
            tenant_id=claim.tenant_id,
            now=now,
        )
        jobs = [job_from_row(row) for row in rows]
        return sorted(jobs, key=lambda job: (-job.priority, job.sequence or 0))

    async def promote_due_jobs(self, now: int, queues: list[str] | None = None) -> set[str]:
        """Make every due job (of these queues; of all without) available, waiting for one
        another transaction is promoting: a fetch never misses a job due before it."""
        rows = await self._rows(
            "promote_due_jobs", queues=self.executor.list_parameter(queues), now=now
        )
        return {row["queue"] for row in rows}

    async def expired_jobs(self, now: int, limit: int) -> list[Job]:
        return [
            job_from_row(row)
            for row in await self._rows("select_expired_jobs", now=now, limit=limit)
        ]

    async def expired_leases(self, now: int, limit: int) -> list[Job]:
        rows = await self._rows("select_expired_leases", now=now, limit=limit)
        return [job_from_row(row) for row in rows]

    async def count_jobs(
        self, tenant_id: str | None, queue: str | None
    ) -> dict[tuple[str, str], int]:
        rows = await self._rows("count_jobs_by_queue_and_state", tenant_id=tenant_id, queue=queue)
        return {(row["queue"], row["state"]): int(row["count"]) for row in rows}

    async def count_finished_since(self, tenant_id: str | None, since: int) -> dict[str, int]:
        rows = await self._rows("count_finished_since", tenant_id=tenant_id, since=since)
        return {row["state"]: int(row["count"]) for row in rows}

    async def prune_finished_jobs(self, before: int, limit: int) -> int:
        return await self._run("prune_finished_jobs", before=before, limit=limit)

    # queues

    async def ensure_queue(self, name: str, tenant_id: str, now: int) -> None:
        await self._run("ensure_queue", name=name, tenant_id=tenant_id, now=now)

    async def set_queue_paused(
        self, name: str, tenant_id: str, paused: bool, now: int
    ) -> dict[str, Any]:
        rows = await self._rows(
            "set_queue_paused", name=name, tenant_id=tenant_id, paused=paused, now=now
        )
        return self._queue(rows[0])

    @staticmethod
    def _queue(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "paused": bool(row["paused"])}

    async def list_queues(self) -> list[dict[str, Any]]:
        return [self._queue(row) for row in await self._rows("select_queues")]

    async def paused_queue_names(self) -> set[str]:
        return {row["name"] for row in await self._rows("select_paused_queue_names")}

    # dead letters

    def _tally(self, rows: list[dict[str, Any]], sign: int) -> None:
        """Add (sign 1) or take off (sign -1) dead episodes from the tallies when the transaction
        finishes, one statement per distinct group."""
        for row in rows:
            if row["status"] == DEAD:
                group = (row["tenant_id"], row["queue"], row["type"], row["error_type"] or "")
                self.tally_changes[group] += sign

    async def insert_dead_letters(self, dead_letters: list[DeadLetter]) -> None:
        """Insert many episodes in one statement and count them in the tallies."""
        if dead_letters:
            rows = [dead_letter_record(dead_letter) for dead_letter in dead_letters]
            await self._run("insert_dead_letters", rows=dump(rows))
            self._tally(rows, 1)

    async def list_dead_letters(self, filters: DeadLetterFilter, page: Page) -> list[DeadLetter]:
        rows = await self._rows(
            "select_dead_letters",
            limit=page.limit,
            offset=page.offset,
            cursor_at=page.cursor_at,
            cursor_id=page.cursor_id,
            **_filter_parameters(filters),
        )
        return [dead_letter_from_row(row) for row in rows]

    async def count_dead_letters(self, filters: DeadLetterFilter) -> int:
        if filters.counted_by_tallies:
            return sum((await self.count_dead_letters_by_queue(filters)).values())
        rows = await self._rows("count_dead_letters", **_filter_parameters(filters))
        return int(rows[0]["count"])

    async def count_dead_letters_by_queue(self, filters: DeadLetterFilter) -> dict[str, int]:
        """From the tallies when they count the set exactly, else by counting rows."""
        if not filters.counted_by_tallies:
            rows = await self._rows("count_dead_letters_by_queue", **_filter_parameters(filters))
            return {row["queue"]: int(row["count"]) for row in rows}
        rows = await self._rows("select_dead_letter_tallies", tenant_id=filters.tenant_id)
        wanted = {"queue": filters.queue, "type": filters.type, "error_type": filters.error_type}
        prefix = filters.type_prefix or ""
        counts: Counter[str] = Counter()
        for row in rows:
            if row["type"].startswith(prefix) and all(
                value is None or (row[key] or "") == value for key, value in wanted.items()
            ):
                counts[row["queue"]] += int(row["count"])
        return {queue: count for queue, count in counts.items() if count}

    async def move_dead_letters(
        self, filters: DeadLetterFilter, limit: int, status: str, now: int, moved_by: str
    ) -> list[MovedEpisode]:
        """Flip up to `limit` dead episodes matching the filter (newest first) to `status` in
        one statement and take them off the tallies; returns those this call moved."""
        parameters = _filter_parameters(filters)
        del parameters["status"]  # the filter selects dead episodes; :moved_to is where they go
        rows = await self._rows(
            "move_dead_letters", limit=limit, moved_to=status, now=now, moved_by=moved_by,
            **parameters,
        )  # fmt: skip
        moved = [MovedEpisode(**row) for row in rows]
        self._tally([{**row, "status": DEAD} for row in rows], -1)
        return moved

    async def dead_letters_by_id(self, episode_ids: list[str]) -> list[DeadLetter]:
        if not episode_ids:
            return []
        ids = self.executor.list_parameter(episode_ids)
        return [
            dead_letter_from_row(row)
            for row in await self._rows("select_dead_letters_by_id", ids=ids)
        ]

    async def redrive_jobs(self, job_ids: list[str], now: int) -> set[str]:
        """Put dead jobs whose rows are still in the jobs table back in their queues."""
        if not job_ids:
            return set()
        rows = await self._rows("redrive_jobs", ids=self.executor.list_parameter(job_ids), now=now)
        return {row["id"] for row in rows}

    async def delete_dead_jobs(self, job_ids: list[str]) -> None:
        if job_ids:
            await self._run("delete_dead_jobs", ids=self.executor.list_parameter(job_ids))

    async def get_dead_letter(self, job_id: str, tenant_id: str | None) -> DeadLetter | None:
        rows = await self._rows("select_dead_letter", job_id=job_id, tenant_id=tenant_id)
        return dead_letter_from_row(rows[0]) if rows else None

    async def dead_letter_episodes(self, job_id: str, tenant_id: str | None) -> list[DeadLetter]:
        rows = await self._rows("select_dead_letter_episodes", job_id=job_id, tenant_id=tenant_id)
        return [dead_letter_from_row(row) for row in rows]

    async def move_dead_letter(
        self, dead_letter: DeadLetter, status: str, now: int, moved_by: str
    ) -> bool:
        """Flip an episode out of `dead`; False when someone else already moved it."""
        changed = await self._run(
            "move_dead_letter", id=dead_letter.id, status=status, now=now, moved_by=moved_by
        )
        if changed == 1:
            self._tally([_tally_row(dead_letter)], -1)
        return changed == 1

    async def dead_letter_stats(self, tenant_id: str | None) -> dict[str, Any]:
        rows = await self._rows("select_dead_letter_tallies", tenant_id=tenant_id)
        stats: dict[str, Any] = {"total": sum(int(row["count"]) for row in rows)}
        for key in TALLY_DIMENSIONS:
            totals: Counter[str] = Counter()
            for row in rows:
                totals[row[key] or "unknown"] += int(row["count"])
            stats[f"by_{key}"] = {name: count for name, count in sorted(totals.items()) if count}
        times = (await self._rows("dead_letter_time_range", tenant_id=tenant_id))[0]
        stats.update(oldest_at=times["oldest_at"], newest_at=times["newest_at"])
        return stats

    async def prune_dead_letters(self, scope: PruneScope, limit: int) -> list[dict[str, Any]]:
        """Delete one batch (by age when `scope.before` is set, else the oldest dead ones) and
        return the removed rows: whole rows when archiving, the tally columns otherwise."""
        by_age = scope.before is not None
        prefix = "archive" if scope.archive else "prune"
        name = f"{prefix}_dead_letters_by_age" if by_age else f"{prefix}_oldest_dead_letters"
        parameters: dict[str, Any] = {
            "queue": scope.queue,
            "excluded_queues": self.executor.list_parameter(scope.excluded_queues),
            "limit": limit,
        }
        if by_age:
            parameters["before"] = scope.before
        rows = await self.executor.rows(name, parameters)
        self._tally(rows, -1)
        return rows

    async def restore_dead_letter(self, row: dict[str, Any]) -> bool:
        restored = await self.executor.rows("restore_dead_letter", row)
        if restored:
            self._tally([row], 1)
        return bool(restored)

    async def dead_letter_policies(self, tenant_id: str) -> list[dict[str, Any]]:
        return await self._rows("select_dead_letter_policies", tenant_id=tenant_id)

    async def save_dead_letter_policy(self, policy: dict[str, Any]) -> None:
        await self.executor.run("upsert_dead_letter_policy", policy)

    async def delete_dead_letter_policy(self, tenant_id: str, queue: str) -> bool:
        return await self._run("delete_dead_letter_policy", tenant_id=tenant_id, queue=queue) > 0

    async def replay_rules(self, tenant_id: str | None) -> list[ReplayRule]:
        rows = await self._rows("select_replay_rules", tenant_id=tenant_id)
        return [replay_rule_from_row(row) for row in rows]

    async def save_replay_rule(self, rule: ReplayRule) -> None:
        await self.executor.run("upsert_replay_rule", replay_rule_parameters(rule))

    async def delete_replay_rule(self, rule_id: str) -> bool:
        return await self._run("delete_replay_rule", id=rule_id) > 0

    async def count_replays(self, rule_id: str, count: int) -> None:
        await self._run("count_replays", id=rule_id, count=count)

    async def add_dead_letter_archive(self, archive: dict[str, Any]) -> None:
        await self.executor.run("insert_dead_letter_archive", archive)

    async def dead_letter_archives(self) -> list[dict[str, Any]]:
        return await self._rows("select_dead_letter_archives")

    async def mark_archive_restored(self, name: str, now: int) -> None:
        await self._run("mark_archive_restored", name=name, now=now)

    # workers

    async def touch_worker(
        self, worker_id: str, tenant_id: str, queues: list[str], active_jobs: int, now: int
    ) -> dict[str, Any]:
        rows = await self._rows(
            "upsert_worker",
            id=worker_id,
            tenant_id=tenant_id,
            queues=dump(queues),
            active_jobs=active_jobs,
            now=now,
        )
        return self._worker(rows[0])

    @staticmethod
    def _worker(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "queues": load(row["queues"])}

    async def set_worker_directive(self, worker_id: str, directive: str | None) -> None:
        state = directive or "running"
        await self._run("set_worker_directive", id=worker_id, directive=directive, state=state)

    async def list_workers(self, tenant_id: str | None) -> list[dict[str, Any]]:
        return [
            self._worker(row) for row in await self._rows("select_workers", tenant_id=tenant_id)
        ]

    # crons

    @staticmethod
    def _cron(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "definition": load(row["definition"]), "enabled": bool(row["enabled"])}

    async def save_cron(self, cron: dict[str, Any]) -> None:
        await self.executor.run("upsert_cron", {**cron, "definition": dump(cron["definition"])})

    @staticmethod
    def _cron_tenant(tenant_id: str | None) -> str:
        """Crons are keyed by (tenant, name): a lookup names its tenant, never "all of them"."""
        if tenant_id is None:
            raise ValueError("a cron lookup needs a tenant (the default tenant for none)")
        return tenant_id

    async def list_crons(self, tenant_id: str | None) -> list[dict[str, Any]]:
        rows = await self._rows("select_crons", tenant_id=self._cron_tenant(tenant_id))
        return [self._cron(row) for row in rows]

    async def get_cron(self, name: str, tenant_id: str | None) -> dict[str, Any] | None:
        rows = await self._rows("select_cron", name=name, tenant_id=self._cron_tenant(tenant_id))
        return self._cron(rows[0]) if rows else None

    async def delete_cron(self, name: str, tenant_id: str | None) -> bool:
        tenant = self._cron_tenant(tenant_id)
        return await self._run("delete_cron", name=name, tenant_id=tenant) > 0

    async def due_crons(self, now: int, limit: int) -> list[dict[str, Any]]:
        return [
            self._cron(row) for row in await self._rows("select_due_crons", now=now, limit=limit)
        ]

    # events

    async def add_events(self, events: list[StoredEvent]) -> None:
        if events:
            await self._run("insert_events", rows=dump([event_record(e) for e in events]))

    async def list_events(self, query: EventQuery) -> list[StoredEvent]:
        after_sequence = None
        if query.after_id:
            found = await self._rows("select_event_sequence", id=query.after_id)
            after_sequence = found[0]["sequence"] if found else None
        rows = await self._rows(
            "select_events",
            tenant_id=query.tenant_id,
            after_sequence=after_sequence,
            types=self.executor.list_parameter(query.types),
            queues=self.executor.list_parameter(query.queues),
            job_types=self.executor.list_parameter(query.job_types),
            limit=query.limit,
        )
        return [event_from_row(row) for row in rows]

    async def delete_events_before(self, before: int) -> int:
        return await self._run("delete_events_before", before=before)

    # maintenance

    async def try_lock(self, key: int) -> bool:
        rows = await self._rows("try_lock", key=key)
        return bool(rows[0]["locked"])

    async def reset(self) -> None:
        await self._run("reset_all")


__all__ = ["Executor", "SqlTransaction", "replace"]
