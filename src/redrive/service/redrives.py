"""Redrive tasks: start one (the one way a task begins), bulk retry that becomes one when the set
is larger than a burst, list and read them, pause, resume and cancel them, and advance the
running ones by the batch due at each maintenance tick (each task's batch on its own: one that
fails ends its task `failed`, the others move)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import Any

from redrive.domain import redrive
from redrive.domain.audit import Action
from redrive.domain.caller import SYSTEM, Caller
from redrive.domain.errors import Conflict, NotFound
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.redrive import RedriveRequest, RedriveTask, task_event
from redrive.domain.upcasting import upcast
from redrive.ports import Transaction
from redrive.service import locks
from redrive.service.audit import AuditService
from redrive.service.dead_letters import (
    RETRY_CHUNK_MOST,
    BulkRequest,
    BulkResult,
    DeadLetterService,
)
from redrive.service.lanes import in_lanes, lane_share
from redrive.service.redrive_policy import refuse_unfiltered, require_root_causes
from redrive.service.runtime import Runtime

RUNNING_BATCH = 100  # running tasks advanced per tick
MOVE_CHUNK = 1000  # the largest batch a task moves in the tick's own transaction
ITEMS_PAGE = 100
UPCAST_CHECK_PAGE = 500
# The longest a write lane waits for more of its task to come due (half the default sweep
# interval, after which the next tick would move it): see `_move_in_lanes`.
LANE_WAIT_MOST_MS = 100
log = logging.getLogger("redrive.redrives")
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
        # Set when a task starts: this process's sweep loop advances it at once (see rest()).
        self.started = asyncio.Event()

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
            pinned = await transaction.pin_redrive_items(task.id, filters, request.limit)
            if pinned:
                holders = await transaction.claim_redrive_queues(task.id, sorted(pinned))
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
            await self._refuse_failing_upcasts(transaction, task.id)
            queues = sorted({queue for _, queue in pinned})
            to_move = sum(pinned.values())
            await transaction.set_redrive_task_pins(task.id, to_move, queues)
            task = await self._read(transaction, task.id, None)
            await self.runtime.emit(transaction, [task_event("redrive.started", task)], now)
            target = {"task_id": task.id, "filter": task.filter, "rate_per_minute": rate,
                      "critical": request.critical, "reason": request.reason}  # fmt: skip
            await self.audit.record(caller, transaction, Action.REDRIVE_START, target, to_move)
        self.started.set()
        return task

    async def _refuse_failing_upcasts(self, transaction: Transaction, task_id: str) -> None:
        """A dry run of the pinned set's upcasts: the first dead letter an upcaster would refuse
        (or that lacks a step) refuses the start with the 422 a bulk retry gives, naming it."""
        upcasters = self.runtime.options.upcasters
        job_types, after = upcasters.job_types, ""
        while job_types:
            page = await transaction.pending_redrive_dead_letters(
                task_id, job_types, after, UPCAST_CHECK_PAGE
            )
            for dead in page:
                upcast(dead.job, upcasters)  # UpcastFailed or MissingUpcaster, naming the job
            if len(page) < UPCAST_CHECK_PAGE:
                return
            after = page[-1].id

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
        -1 when another replica holds the lock. Each task's batch is a savepoint of the one
        transaction: a batch that raises is undone alone and ends its task `failed`."""
        now = self.runtime.now()
        failed: list[tuple[RedriveTask, Exception]] = []
        moved = 0
        async with self.runtime.store.transaction(SYSTEM) as transaction:
            if not await transaction.try_lock(locks.REDRIVES):
                return -1
            for task in await transaction.running_redrive_tasks(RUNNING_BATCH):
                if redrive.due(task, now)[0] == 0 and task.pending > 0:
                    continue  # nothing due yet (no savepoint for it)
                try:
                    async with transaction.savepoint():
                        batch = await self._advance(transaction, task, now)
                except Exception as error:
                    stopped = await self._fail(transaction, task, error, now)
                    failed += [] if stopped is None else [(stopped, error)]
                    continue
                moved += batch.moved
                self.runtime.metrics.redrive_moved[task.id] += batch.moved
                self.runtime.metrics.redrive_failed_items[task.id] += batch.failed
        for task, cause in failed:
            code = _log_failure(task, cause)
            self.runtime.metrics.redrive_tasks_failed[code] += 1
        return moved

    async def _advance(self, transaction: Transaction, task: RedriveTask, now: int) -> Batch:
        """The task's batch due: within the tick's transaction when it fits one chunk (a paced
        task's usual batch) or the store has one writer, else over the store's write lanes, as
        a bulk retry moves them (a critical task moving 20,000 at once did them serially in one
        transaction)."""
        count, paced_until = redrive.due(task, now)
        lanes = self.runtime.store.write_lanes
        if count <= MOVE_CHUNK or lanes == 1:
            picked = await transaction.claim_redrive_items(task.id, count) if count else {}
            return await self._move(transaction, task, picked, now, paced_until)
        # Chunks as a bulk retry's, an equal share of what the task pins for each lane: the
        # statement probes each id by key, and one of 50,000 (a chunk a lane at 100,000) kept
        # its moved rows past work_mem.
        chunk = lane_share(task.pending, lanes, MOVE_CHUNK, RETRY_CHUNK_MOST)
        moved = await self._move_in_lanes(task, chunk)
        if moved is None:  # nothing was pending after all: settled as an empty batch
            return await self._move(transaction, task, {}, now, paced_until)
        return moved

    async def _move_in_lanes(self, task: RedriveTask, chunk: int) -> Batch | None:
        """The task's pending dead letters due, up to `chunk` per transaction over the write
        lanes, for as long as some are due: each chunk takes what has come due by the time it
        starts (by the task's pace as the tick read it) and reads its items (by id after those
        the last chunk read; the reads take turns, and the tick's transaction holds off every
        other advance), then moves them. At a critical rate most of a large set comes due while
        the first chunks move: a batch of what was due at the tick, then a second of the rest,
        each split over the lanes, left one lane idle while the other moved the first batch's
        odd chunk (20,000 at 100,000 a minute: 15,000 due after the pin, 3 chunks of 5,000 for
        2 lanes). The first chunk moves without waiting for the whole batch to be read (20,000
        items took 40 ms to read). A lane that finds less than a MOVE_CHUNK due waits for it to
        come due when that is within LANE_WAIT_MOST_MS, and takes only what is due then: at a
        critical rate a lane that found nothing due ended, and when the first lane's chunk took
        all that was due at the tick (a pin under ~50 ms, 20,000 at 6,000,000 a minute), that
        lane then moved the whole rest alone, chunk after chunk; one that found a little due a
        millisecond after the first moved a chunk of 100 (its own claim, plan and commit). A
        chunk that raises is undone alone and stops the others;
        those committed stay moved and counted; a task paused meanwhile moves no further
        chunk. None when no item was pending."""
        batches: list[Batch] = []
        after = ""
        taken = 0  # by the chunks so far: the task's pace after them
        reading = asyncio.Lock()

        async def step(take: int) -> int:
            nonlocal after, taken
            now = self.runtime.now()
            least, waited = min(take, MOVE_CHUNK), 0
            while (due := redrive.due(task, now)[0] - taken) < least:
                # Less than a MOVE_CHUNK (or the take) due for this lane: it waits for that much
                # if it comes due soon; else it takes what is due, and with nothing due it ends
                # (the next tick moves the rest).
                wait = max(1, redrive.paced_after(task, now, taken + least) - now)
                if waited + wait > LANE_WAIT_MOST_MS:
                    if due <= 0:
                        return 0
                    break
                waited += wait
                await wait_ms(wait)
                now = self.runtime.now()
            take = min(take, due)
            taken += take  # held for this chunk before any other lane looks
            async with self.runtime.store.transaction(SYSTEM) as transaction:
                current = await transaction.get_redrive_task(task.id, None)
                async with reading:
                    items = (
                        await transaction.claim_redrive_items(task.id, take, after)
                        if current is not None and current.state == redrive.RUNNING
                        else {}  # paused (or ended) meanwhile: its lanes stop here
                    )
                    after = next(reversed(items), after)
                taken -= take - len(items)
                if items:  # the pace after every chunk taken so far (the task keeps the latest)
                    paced_until = redrive.paced_after(task, now, taken)
                    batches.append(await self._move(transaction, task, items, now, paced_until))
            return len(items)

        await in_lanes(self.runtime.store.write_lanes, task.pending, chunk, lambda: step)
        return sum(batches, Batch()) if batches else None

    async def _move(
        self, transaction: Transaction, task: RedriveTask, picked: dict[str, str], now: int,
        paced_until: int,
    ) -> Batch:  # fmt: skip
        """Move picked dead letters of the task: each upcast first (one an upcaster refuses is
        marked failed with the error and stays dead), then the rest moved in one statement;
        the task completes when nothing is left pending."""
        prepared = await self.dead_letters.prepare_upcasts(transaction, list(picked))
        refused = {
            episode_id: redrive.failure_of(error, picked[episode_id])
            for episode_id, error in prepared.refused.items()
        }
        await transaction.fail_redrive_items(task.id, refused)
        chosen = [episode_id for episode_id in picked if episode_id not in refused]
        retried, others = await self.dead_letters.retry_chosen(
            transaction, chosen, moved_by(task), now, prepared.jobs, task.id
        )
        if others:  # those requeued in place carry the task's id already
            await transaction.mark_redriven_jobs(task.id, others)
        moved = retried.count
        # The last item taken: the task's next reads of pending items start after it.
        through = next(reversed(picked), "")
        after = await transaction.count_redrive_batch(
            task.id, moved, len(retried.skipped), now, paced_until, len(refused), through
        )
        if after.pending <= 0 and after.state in redrive.UNFINISHED:  # not cancelled meanwhile
            done = await transaction.change_redrive_task(
                after, redrive.COMPLETED, now, "system", paced_until
            )
            if done is not None:
                await transaction.release_redrive_task(task.id)
                await self.runtime.emit(transaction, [task_event("redrive.completed", done)], now)
        return Batch(moved, len(refused))

    async def _fail(
        self, transaction: Transaction, task: RedriveTask, error: Exception, now: int
    ) -> RedriveTask | None:
        """A batch raised (its moves undone): the task ends `failed` with the reason and the job
        it stopped at (the one the error names, else the next it would move), and lets go of
        its queues and of what it still pins, as a cancel does. An operator starts a new task
        once the cause (an upcaster's configuration, say) is fixed."""
        pending = await transaction.pending_redrive_items(task.id, 1)
        failure = redrive.failure_of(error, next(iter(pending.values()), None))
        failed = await transaction.fail_redrive_task(task, failure, now)
        if failed is None:  # paused or cancelled meanwhile: that stands
            return None
        await transaction.release_redrive_task(task.id)
        await self.runtime.emit(transaction, [task_event("redrive.failed", failed)], now)
        return failed


async def wait_ms(milliseconds: int) -> None:
    """Sleep (a lane waiting for its task's pace)."""
    await asyncio.sleep(milliseconds / 1000)


@frozen_dataclass
class Batch:
    """What one task's batch did: dead letters moved, and those an upcaster refused."""

    moved: int = 0
    failed: int = 0

    def __add__(self, other: Batch) -> Batch:
        return Batch(self.moved + other.moved, self.failed + other.failed)


def _log_failure(task: RedriveTask, error: Exception) -> str:
    """One structured line per failed task (after its transaction committed), with the
    traceback of an unexpected error; the failure's code."""
    failure = task.failure or redrive.RedriveFailure(redrive.UNEXPECTED, "")
    log.error(
        "redrive task %s failed at job %s: %s: %s (moved %d of %d; its queues are released)",
        task.id, failure.job_id, failure.code, failure.message, task.moved, task.to_move,
        extra={"redrive_task": {"id": task.id, "event": "failed", "tenant_id": task.tenant_id,
                                "queues": list(task.queues), "code": failure.code,
                                "message": failure.message, "job_id": failure.job_id,
                                "moved": task.moved, "to_move": task.to_move}},
        exc_info=error if failure.code == redrive.UNEXPECTED else None,
    )  # fmt: skip
    return failure.code
