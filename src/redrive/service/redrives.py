"""Redrive tasks: start one (the one way a task begins), bulk retry that becomes one when the set
is larger than a burst, list and read them, pause, resume and cancel them, and advance the
running ones by the batch due at each maintenance tick."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

from redrive.domain import dead_letter as episodes
from redrive.domain import redrive
from redrive.domain.audit import Action
from redrive.domain.caller import SYSTEM, Caller
from redrive.domain.errors import Conflict, NotFound
from redrive.domain.redrive import RedriveRequest, RedriveTask, task_event
from redrive.ports import Transaction
from redrive.service import locks
from redrive.service.audit import AuditService
from redrive.service.dead_letters import BulkRequest, BulkResult, DeadLetterService
from redrive.service.redrive_policy import refuse_unfiltered, require_root_causes
from redrive.service.runtime import Runtime

RUNNING_BATCH = 100  # running tasks advanced per tick
ITEMS_PAGE = 100
AUDITED = {
    redrive.Change.PAUSE: Action.REDRIVE_PAUSE,
    redrive.Change.RESUME: Action.REDRIVE_RESUME,
    redrive.Change.CANCEL: Action.REDRIVE_CANCEL,
}


def moved_by(task: RedriveTask) -> str:
    """Who the dead letters a task moves name as their mover."""
    return f"redrive:{task.id}"


class RedriveService:
    def __init__(self, runtime: Runtime, dead_letters: DeadLetterService) -> None:
        self.runtime = runtime
        self.dead_letters = dead_letters
        self.audit = AuditService(runtime)

    async def start(self, caller: Caller, request: RedriveRequest) -> RedriveTask:
        """Start a task: pin the dead letters the filter (or incident) matches now, hold their
        queues, and let the maintenance loop move them at the task's rate. Every redrive task
        begins here (the HTTP route, bulk retry past a burst, the dashboard, the CLI)."""
        refuse_unfiltered(request.filters)
        rate = redrive.check_rate(request, caller, self.runtime.options.redrive_max_rate)
        filters = request.filters.scoped(caller.tenant_scope)
        now = self.runtime.now()
        task = RedriveTask(
            id=f"rdt_{self.runtime.new_id(now)}", tenant_id=caller.tenant_id,
            state=redrive.RUNNING,
            filter={k: v for k, v in asdict(request.filters).items() if v is not None},
            incident_id=request.filters.incident_id, rate_per_minute=rate,
            critical=request.critical, reason=request.reason, created_by=caller.actor,
            created_at=now, updated_at=now, updated_by=caller.actor, finished_at=None,
            paced_until=now, to_move=0, moved=0, skipped=0, succeeded=0, dead_again=0, queues=(),
        )  # fmt: skip
        async with self.runtime.store.transaction(caller) as transaction:
            if task.incident_id is not None and (
                await transaction.get_incident(task.incident_id, caller.tenant_scope) is None
            ):
                raise NotFound("incident", task.incident_id)
            # Every incident the task would touch is explained by a root cause with a fix
            # reference (409 root_cause_required naming those that are not; see redrive_policy).
            await require_root_causes(transaction, filters)
            await transaction.insert_redrive_task(task)
            limit = sys.maxsize if request.limit is None else request.limit
            pinned = await transaction.pin_redrive_items(task.id, filters, limit)
            if pinned:
                holders = await transaction.claim_redrive_queues(task.id)
            else:  # every match (if any) is pinned by a task: name it
                matched = await transaction.count_dead_letters_by_queue(filters)
                holders = await transaction.queue_redrive_holders(
                    sorted(matched), filters.tenant_id
                )
                if not holders:
                    raise Conflict("no dead letter matches the filter", {"filter": task.filter})
            if holders:
                queue, holder = sorted(holders.items())[0]
                raise Conflict(
                    f"queue {queue} has a redrive task running: {holder}; pause or cancel it, "
                    "or wait until it ends",
                    {"task_id": holder, "queue": queue},
                )
            queues = sorted({queue for _, queue in pinned})
            to_move = sum(pinned.values())
            await transaction.set_redrive_task_pins(task.id, to_move, queues)
            task = await self._read(transaction, task.id, None)
            await self.runtime.emit(transaction, [task_event("redrive.started", task)], now)
            target = {"task_id": task.id, "filter": task.filter, "rate_per_minute": rate,
                      "critical": request.critical, "reason": request.reason}  # fmt: skip
            await self.audit.record(caller, transaction, Action.REDRIVE_START, target, to_move)
        return task

    async def bulk_retry(self, caller: Caller, request: BulkRequest) -> BulkResult | RedriveTask:
        """A bulk retry by filter: within the request, as always, when the set fits a burst of
        the default rate; a paced task when it is larger."""
        if request.dry_run or not request.confirm:
            return await self.dead_letters.bulk_retry(caller, request)
        matched = (await self.dead_letters.preview(caller, request.filters)).matched
        if request.limit is not None:
            matched = min(matched, request.limit)
        if matched <= redrive.burst(redrive.DEFAULT_RATE):
            return await self.dead_letters.bulk_retry(caller, request)
        return await self.start(caller, RedriveRequest(request.filters, limit=request.limit))

    async def search(
        self, caller: Caller, state: str | None = None, limit: int = 50
    ) -> list[RedriveTask]:
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.list_redrive_tasks(caller.tenant_scope, state, limit)

    async def get(self, caller: Caller, task_id: str) -> RedriveTask:
        async with self.runtime.store.transaction(caller) as transaction:
            return await self._read(transaction, task_id, caller.tenant_scope)

    async def items(
        self, caller: Caller, task_id: str, state: str | None = None
    ) -> list[dict[str, Any]]:
        """A task's pinned dead letters (the first page): each one's state, and where a
        redriven job died again, its new fingerprint and incident."""
        async with self.runtime.store.transaction(caller) as transaction:
            await self._read(transaction, task_id, caller.tenant_scope)
            return await transaction.redrive_items(task_id, state, ITEMS_PAGE)

    async def _read(
        self, transaction: Transaction, task_id: str, tenant_id: str | None
    ) -> RedriveTask:
        task = await transaction.get_redrive_task(task_id, tenant_id)
        if task is None:
            raise NotFound("redrive task", task_id)
        return task

    async def pause(self, caller: Caller, task_id: str) -> RedriveTask:
        return await self._change(caller, task_id, redrive.Change.PAUSE)

    async def resume(self, caller: Caller, task_id: str) -> RedriveTask:
        return await self._change(caller, task_id, redrive.Change.RESUME)

    async def cancel(self, caller: Caller, task_id: str) -> RedriveTask:
        return await self._change(caller, task_id, redrive.Change.CANCEL)

    async def _change(self, caller: Caller, task_id: str, change: str) -> RedriveTask:
        """Guarded by the state it was decided from; a resumed task's pace starts afresh (no
        credit from the pause); a cancelled one lets go of its queues and what it still pins."""
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            task = await self._read(transaction, task_id, caller.tenant_scope)
            state = redrive.change(task, change)
            paced_until = now if change == redrive.Change.RESUME else task.paced_until
            changed = await transaction.change_redrive_task(
                task, state, now, caller.actor, paced_until
            )
            if changed is None:
                raise Conflict(
                    f"redrive task {task_id} changed meanwhile; read it and try again",
                    {"task_id": task_id, "state": task.state},
                )
            if state == redrive.CANCELLED:
                await transaction.release_redrive_task(task_id)
                await self.runtime.emit(
                    transaction, [task_event("redrive.cancelled", changed)], now
                )
            target = {"task_id": task_id, "state_before": task.state}
            await self.audit.record(
                caller, transaction, AUDITED[change], target, changed.pending,
                tenant_id=task.tenant_id,
            )  # fmt: skip
        return changed

    async def advance(self) -> int:
        """Move the batch due of every running task (one replica at a time); how many moved,
        -1 when another replica holds the lock."""
        now = self.runtime.now()
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            if not await transaction.try_lock(locks.REDRIVES):
                return -1
            moved = 0
            for task in await transaction.running_redrive_tasks(RUNNING_BATCH):
                moved += await self._advance(transaction, task, now)
        return moved

    async def _advance(self, transaction: Transaction, task: RedriveTask, now: int) -> int:
        count, paced_until = redrive.due(task, now)
        if count == 0 and task.pending > 0:
            return 0
        picked = await transaction.pending_redrive_items(task.id, count) if count else []
        mover = moved_by(task)
        moved = await transaction.move_dead_letters_by_id(picked, episodes.RETRIED, now, mover)
        await self.dead_letters.revive(transaction, moved, mover, now)
        await transaction.mark_redriven_jobs(task.id, [episode.job_id for episode in moved])
        after = await transaction.count_redrive_batch(
            task.id, picked, [episode.id for episode in moved], now, paced_until
        )
        self.runtime.metrics.redrive_moved[task.id] += len(moved)
        if after.pending <= 0:
            done = await transaction.change_redrive_task(
                after, redrive.COMPLETED, now, "system", paced_until
            )
            if done is not None:
                await transaction.release_redrive_task(task.id)
                await self.runtime.emit(transaction, [task_event("redrive.completed", done)], now)
        return len(moved)
