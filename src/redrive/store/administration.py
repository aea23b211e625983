"""Queues, workers and crons (each keyed by tenant), periodic-task locks and the test-only wipe."""

from __future__ import annotations

from typing import Any

from redrive.domain.records import CronRecord, QueueRecord, WorkerRecord
from redrive.ports import CronStore, MaintenanceStore, QueueStore, WorkerStore
from redrive.store.base import SqlBase
from redrive.store.codec import dump, load


def _queue(row: dict[str, Any]) -> QueueRecord:
    return QueueRecord(
        tenant_id=row["tenant_id"],
        name=row["name"],
        paused=bool(row["paused"]),
        created_at=int(row["created_at"]),
        paused_at=row["paused_at"],
        resumed_at=row["resumed_at"],
    )


class SqlQueues(SqlBase, QueueStore):
    async def ensure_queue(self, name: str, tenant_id: str, now: int) -> None:
        await self._run("ensure_queue", name=name, tenant_id=tenant_id, now=now)

    async def set_queue_paused(
        self, name: str, tenant_id: str, paused: bool, now: int
    ) -> QueueRecord:
        rows = await self._rows(
            "set_queue_paused", name=name, tenant_id=tenant_id, paused=paused, now=now
        )
        return _queue(rows[0])

    async def list_queues(self, tenant_id: str | None) -> list[QueueRecord]:
        return [_queue(row) for row in await self._rows("select_queues", tenant_id=tenant_id)]

    async def paused_queue_names(self, tenant_id: str | None) -> set[str]:
        """The names of this tenant's paused queues; with None, of every tenant's."""
        rows = await self._rows("select_paused_queue_names", tenant_id=tenant_id)
        return {row["name"] for row in rows}


def _worker(row: dict[str, Any]) -> WorkerRecord:
    return WorkerRecord(
        tenant_id=row["tenant_id"],
        id=row["id"],
        state=row["state"],
        directive=row["directive"],
        queues=tuple(load(row["queues"])),
        active_jobs=int(row["active_jobs"]),
        first_seen_at=int(row["first_seen_at"]),
        last_heartbeat_at=int(row["last_heartbeat_at"]),
    )


class SqlWorkers(SqlBase, WorkerStore):
    async def touch_worker(
        self, worker_id: str, tenant_id: str, queues: list[str], active_jobs: int, now: int
    ) -> WorkerRecord:
        rows = await self._rows(
            "upsert_worker",
            id=worker_id,
            tenant_id=tenant_id,
            queues=dump(queues),
            active_jobs=active_jobs,
            now=now,
        )
        return _worker(rows[0])

    async def set_worker_directive(
        self, worker_id: str, tenant_id: str | None, directive: str | None
    ) -> int:
        state = directive or "running"
        return await self._run(
            "set_worker_directive",
            id=worker_id, tenant_id=tenant_id, directive=directive, state=state,
        )  # fmt: skip

    async def list_workers(self, tenant_id: str | None) -> list[WorkerRecord]:
        return [_worker(row) for row in await self._rows("select_workers", tenant_id=tenant_id)]


def _cron(row: dict[str, Any]) -> CronRecord:
    """A cron row: the `definition` JSON column holds what was registered; the columns beside
    it hold the schedule state (the `enabled` column is the one that counts)."""
    definition = load(row["definition"])
    return CronRecord(
        tenant_id=row["tenant_id"],
        name=row["name"],
        expression=definition["expression"],
        timezone=definition["timezone"],
        overlap_policy=definition["overlap_policy"],
        enabled=bool(row["enabled"]),
        job_template=definition["job_template"],
        description=definition.get("description"),
        next_run_at=row["next_run_at"],
        last_run_at=row["last_run_at"],
        last_job_id=row["last_job_id"],
        run_count=int(row["run_count"]),
        created_at=int(row["created_at"]),
    )


def _cron_definition(cron: CronRecord) -> dict[str, Any]:
    return {
        "name": cron.name,
        "expression": cron.expression,
        "timezone": cron.timezone,
        "overlap_policy": cron.overlap_policy,
        "enabled": cron.enabled,
        "job_template": cron.job_template,
        "description": cron.description,
    }


def _cron_tenant(tenant_id: str | None) -> str:
    """Crons are keyed by (tenant, name): a lookup names its tenant, never "all of them"."""
    if tenant_id is None:
        raise ValueError("a cron lookup needs a tenant (the default tenant for none)")
    return tenant_id


class SqlCrons(SqlBase, CronStore):
    async def save_cron(self, cron: CronRecord) -> None:
        await self._run(
            "upsert_cron",
            name=cron.name,
            tenant_id=cron.tenant_id,
            definition=dump(_cron_definition(cron)),
            enabled=cron.enabled,
            next_run_at=cron.next_run_at,
            last_run_at=cron.last_run_at,
            last_job_id=cron.last_job_id,
            run_count=cron.run_count,
            created_at=cron.created_at,
        )

    async def list_crons(self, tenant_id: str | None) -> list[CronRecord]:
        rows = await self._rows("select_crons", tenant_id=_cron_tenant(tenant_id))
        return [_cron(row) for row in rows]

    async def get_cron(self, name: str, tenant_id: str | None) -> CronRecord | None:
        rows = await self._rows("select_cron", name=name, tenant_id=_cron_tenant(tenant_id))
        return _cron(rows[0]) if rows else None

    async def delete_cron(self, name: str, tenant_id: str | None) -> bool:
        tenant = _cron_tenant(tenant_id)
        return await self._run("delete_cron", name=name, tenant_id=tenant) > 0

    async def due_crons(self, now: int, limit: int) -> list[CronRecord]:
        return [_cron(row) for row in await self._rows("select_due_crons", now=now, limit=limit)]


class SqlMaintenance(SqlBase, MaintenanceStore):
    async def try_lock(self, key: int) -> bool:
        rows = await self._rows("try_lock", key=key)
        return bool(rows[0]["locked"])

    async def reset(self) -> None:
        await self._run("reset_all")
