"""Redrive tasks: the task rows, the dead letters each pinned, the queues each holds, the moves
of a batch, and the outcomes of the jobs they redrove."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from redrive.ports import RedriveTaskStore
from redrive.store.base import SqlBase
from redrive.store.codec import dead_letter_from_row, dump, load
from redrive.store.dead_letters import filter_parameters

# Imported where tasks are read or their outcomes counted: a producer never runs one.
if TYPE_CHECKING:
    from redrive.domain.dead_letter import DeadLetter
    from redrive.domain.dead_letter_filter import DeadLetterFilter
    from redrive.domain.redrive import ItemOutcome, RedriveFailure, RedriveOutcome, RedriveTask


def task_from_row(row: dict[str, Any]) -> RedriveTask:
    from redrive.domain.redrive import RedriveFailure, RedriveTask

    return RedriveTask(
        id=row["id"],
        tenant_id=row["tenant_id"],
        state=row["state"],
        filter=load(row["filter"]) or {},
        incident_id=row["incident_id"],
        rate_per_minute=int(row["rate_per_minute"]),
        critical=bool(row["critical"]),
        reason=row["reason"],
        created_by=row["created_by"],
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        updated_by=row["updated_by"],
        finished_at=row["finished_at"],
        paced_until=int(row["paced_until"]),
        to_move=int(row["to_move"]),
        moved=int(row["moved"]),
        skipped=int(row["skipped"]),
        succeeded=int(row["succeeded"]),
        dead_again=int(row["dead_again"]),
        queues=tuple(load(row["queues"]) or ()),
        failed=int(row["failed"]),
        failure=None
        if row["failure_code"] is None
        else RedriveFailure(row["failure_code"], row["failure_message"], row["failure_job_id"]),
    )


class SqlRedriveTasks(SqlBase, RedriveTaskStore):
    async def insert_redrive_task(self, task: RedriveTask) -> None:
        values = dict(vars(task))
        del values["failed"], values["failure"]  # a new task has neither
        values["filter"] = dump(task.filter)
        values["queues"] = dump(list(task.queues))
        await self._run("insert_redrive_task", **values)

    async def pin_redrive_items(
        self, task_id: str, filters: DeadLetterFilter, limit: int | None
    ) -> dict[tuple[str, str], int]:
        parameters = filter_parameters(filters)
        del parameters["status"]  # pinned dead letters are dead
        await self._rows("lock_redrive_pins")
        if limit is None:  # every match: nothing to choose, so nothing to sort (see the SQL)
            rows = await self._rows("pin_every_redrive_item", task_id=task_id, **parameters)
        else:
            rows = await self._rows("pin_redrive_items", task_id=task_id, limit=limit, **parameters)
        return {(row["tenant_id"], row["queue"]): int(row["count"]) for row in rows}

    async def claim_redrive_queues(
        self, task_id: str, queues: list[tuple[str, str]]
    ) -> dict[str, str]:
        pairs = dump([{"tenant_id": tenant_id, "queue": queue} for tenant_id, queue in queues])
        await self._run("claim_redrive_queues", task_id=task_id, queues=pairs)
        rows = await self._rows("select_redrive_queue_holders", task_id=task_id, queues=pairs)
        return {row["queue"]: row["task_id"] for row in rows}

    async def queue_redrive_holders(
        self, queues: list[str], tenant_id: str | None
    ) -> dict[str, str]:
        rows = await self._rows(
            "select_queue_redrive_holders", queues=self.executor.list_parameter(queues),
            tenant_id=tenant_id,
        )  # fmt: skip
        return {row["queue"]: row["task_id"] for row in rows}

    async def set_redrive_task_pins(self, task_id: str, to_move: int, queues: list[str]) -> None:
        await self._run("set_redrive_task_pins", id=task_id, to_move=to_move, queues=dump(queues))

    async def release_redrive_task(self, task_id: str) -> None:
        await self._run("release_redrive_queues", task_id=task_id)
        await self._run("unpin_redrive_items", task_id=task_id)

    async def get_redrive_task(self, task_id: str, tenant_id: str | None) -> RedriveTask | None:
        rows = await self._rows("select_redrive_task", id=task_id, tenant_id=tenant_id)
        return task_from_row(rows[0]) if rows else None

    async def list_redrive_tasks(
        self, tenant_id: str | None, state: str | None, limit: int
    ) -> list[RedriveTask]:
        rows = await self._rows(
            "select_redrive_tasks", tenant_id=tenant_id, state=state, limit=limit
        )
        return [task_from_row(row) for row in rows]

    async def running_redrive_tasks(self, limit: int) -> list[RedriveTask]:
        return [
            task_from_row(row)
            for row in await self._rows("select_running_redrive_tasks", limit=limit)
        ]

    async def change_redrive_task(
        self, task: RedriveTask, state: str, now: int, changed_by: str, paced_until: int
    ) -> RedriveTask | None:
        rows = await self._rows(
            "change_redrive_task", id=task.id, expected_state=task.state, state=state, now=now,
            changed_by=changed_by, paced_until=paced_until, tenant_id=None,
            finished_at=None if state in ("running", "paused") else now,
        )  # fmt: skip
        return task_from_row(rows[0]) if rows else None

    async def pending_redrive_items(
        self, task_id: str, limit: int, after: str = ""
    ) -> dict[str, str]:
        """The task's next pending dead letters after `after` (by id), each with its job's id."""
        (row,) = await self._rows(
            "select_pending_redrive_items", task_id=task_id, limit=limit, after=after
        )
        return items_of(row)

    async def claim_redrive_items(
        self, task_id: str, limit: int, after: str = ""
    ) -> dict[str, str]:
        """As pending_redrive_items, taken by this transaction to move (see the statement)."""
        (row,) = await self._rows(
            "claim_pending_redrive_items", task_id=task_id, limit=limit, after=after
        )
        return items_of(row)

    async def pending_redrive_dead_letters(
        self, task_id: str, job_types: list[str], after: str, limit: int
    ) -> list[DeadLetter]:
        rows = await self._rows(
            "select_pending_redrive_dead_letters", task_id=task_id, after=after, limit=limit,
            types=self.executor.list_parameter(job_types),
        )  # fmt: skip
        return [dead_letter_from_row(row) for row in rows]

    async def fail_redrive_items(self, task_id: str, failures: dict[str, RedriveFailure]) -> None:
        for dead_letter_id, failure in sorted(failures.items()):  # rare: one statement each
            await self._run(
                "fail_redrive_item", task_id=task_id, dead_letter_id=dead_letter_id,
                code=failure.code, message=failure.message,
            )  # fmt: skip

    async def fail_redrive_task(
        self, task: RedriveTask, failure: RedriveFailure, now: int
    ) -> RedriveTask | None:
        rows = await self._rows(
            "fail_redrive_task", id=task.id, expected_state=task.state, now=now,
            code=failure.code, message=failure.message, job_id=failure.job_id,
        )  # fmt: skip
        return task_from_row(rows[0]) if rows else None

    async def count_redrive_batch(
        self, task_id: str, moved: int, skipped: int, now: int, paced_until: int,
        failed: int = 0, through: str = "",
    ) -> RedriveTask:  # fmt: skip
        rows = await self._rows(
            "count_redrive_batch", id=task_id, moved=moved, skipped=skipped, failed=failed,
            now=now, paced_until=paced_until, through=through,
        )  # fmt: skip
        return task_from_row(rows[0])

    async def mark_redriven_jobs(self, task_id: str, job_ids: list[str]) -> None:
        if job_ids:
            await self._run(
                "mark_redriven_jobs", task_id=task_id, ids=self.executor.list_parameter(job_ids)
            )

    async def record_redrive_outcomes(
        self, outcomes: list[RedriveOutcome]
    ) -> tuple[list[ItemOutcome], list[RedriveTask]]:
        from redrive.domain.redrive import DEAD_AGAIN, SUCCEEDED, ItemOutcome

        if not outcomes:
            return [], []
        rows = await self._rows("record_redrive_outcomes", rows=dump([vars(o) for o in outcomes]))
        items = [
            ItemOutcome(row["task_id"], row["state"], row["incident_id"], row["died_incident_id"])
            for row in rows
        ]
        counts: dict[str, Counter[str]] = {}
        for item in items:
            counts.setdefault(item.task_id, Counter())[item.state] += 1
        if not counts:
            return items, []
        changes = [
            {"id": task_id, "succeeded": count[SUCCEEDED], "dead_again": count[DEAD_AGAIN]}
            for task_id, count in sorted(counts.items())
        ]
        tasks = await self._rows("count_redrive_outcomes", rows=dump(changes))
        return items, [task_from_row(row) for row in tasks]

    async def redrive_items(
        self, task_id: str, state: str | None, limit: int
    ) -> list[dict[str, Any]]:
        return await self._rows("select_redrive_items", task_id=task_id, state=state, limit=limit)


def items_of(row: dict[str, Any]) -> dict[str, str]:
    """A task's items as one row of two JSON arrays in step: job ids by dead letter id."""
    episodes, jobs = load(row["dead_letter_ids"]) or [], load(row["job_ids"]) or []
    return dict(zip(episodes, jobs, strict=True))
