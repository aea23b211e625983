"""Dead-letter use-cases: list, inspect, retry (one, modified, in bulk), delete, purge, stats."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from redrive.domain import dead_letter as episodes
from redrive.domain.audit import Action, Outcome
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter import (
    DeadLetter,
    DeadLetterStats,
    MovedEpisode,
    RetryOverride,
    apply_override,
)
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import Forbidden, InvalidRequest, NotFound
from redrive.domain.events import episode_event, job_event, retried_event_ids
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.redaction import Redactor
from redrive.domain.root_cause import POISON_PILL
from redrive.domain.upcasting import MissingUpcaster, Upcast, UpcastFailed, upcast
from redrive.ports import DeadLetterMoves, Page, Retried, StoredEvent, Transaction
from redrive.service import visibility
from redrive.service.audit import AuditService
from redrive.service.lanes import Step, in_lanes, lane_share
from redrive.service.redrive_policy import refuse_unfiltered, require_root_causes
from redrive.service.runtime import Runtime

BULK_CHUNK = 1000
# A bulk retry's largest chunk: 20,000 in chunks of 1,000 over two lanes spent 60-90 ms of them
# waiting on 20 commits; a lane's moved rows stay well within work_mem (see redrives.py).
RETRY_CHUNK_MOST = 5000
SAMPLE_SIZE = 10
MAX_SELECTED = 1000
UPCAST_CHECK_PAGE = 500
UPCAST_ERRORS_SHOWN = 10
# What a bulk action's chunk reports: how many it moved, and their queues.
Counted = Callable[[int, Iterable[str]], None]


@frozen_dataclass
class BulkRequest:
    """A bulk retry or purge by filter: `confirm` to act, `dry_run` to count only; `limit` moves
    at most that many (the newest first), None every match."""

    filters: DeadLetterFilter
    confirm: bool = False
    dry_run: bool = False
    limit: int | None = None


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
    # A purge: how many matching dead letters legal holds kept (skipped, still dead).
    held: int = 0
    # A dry run's sample as it would be redriven: each dead letter's upcast (unchanged when its
    # type has no upcasters or it is already current).
    upcasts: list[Upcast] = field(default_factory=list)


@frozen_dataclass
class PreparedUpcasts:
    """Dead letters upcast before they move: the jobs an upcast changes (by job id, upcast),
    and the episodes an upcaster refused (by episode id, with its error)."""

    jobs: dict[str, Job] = field(default_factory=dict)
    refused: dict[str, UpcastFailed] = field(default_factory=dict)


@frozen_dataclass
class RetryIntent:
    """Why one dead letter is retried (kept in the audit log), and `force`: an admin's override
    of a poison pill's refusal, which needs a reason."""

    reason: str | None = None
    force: bool = False


@frozen_dataclass
class Preview:
    """What a bulk action by filter would move: the count, per queue, and the newest few."""

    matched: int
    by_queue: dict[str, int]
    sample: list[DeadLetter]


@frozen_dataclass
class SelectionResult:
    """A retry or delete of chosen dead letters: the ids moved, and those no longer dead (moved
    by someone else, or never dead in the caller's tenant); a delete skips held ones."""

    moved: list[str]
    missing: list[str]
    queues: list[str]
    held: list[str] = field(default_factory=list)  # a delete: kept by a legal hold


def _check_confirmed(request: BulkRequest) -> None:
    if not request.dry_run and not request.confirm:
        scope = (
            "everything in the dead-letter queue"
            if request.filters.is_empty
            else "the filtered set"
        )
        raise InvalidRequest(
            f"this changes {scope}: send confirm: true (or dry_run: true to see the count first)",
            {"field": "confirm"},
        )


def filter_target(request: BulkRequest) -> dict[str, Any]:
    """What a bulk action by filter names in the audit log: the filter as sent, and its limit."""
    fields = {key: value for key, value in asdict(request.filters).items() if value is not None}
    return {"filter": fields, "limit": request.limit}


def _selection(job_ids: list[str]) -> list[str]:
    unique = list(dict.fromkeys(job_ids))
    if not unique:
        raise InvalidRequest("choose at least one dead letter", {"field": "job_ids"})
    if len(unique) > MAX_SELECTED:
        raise InvalidRequest(f"choose at most {MAX_SELECTED} dead letters", {"field": "job_ids"})
    return unique


class DeadLetterService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    @property
    def _redactor(self) -> Redactor:
        return self.runtime.options.redactor

    async def search(
        self, caller: Caller, filters: DeadLetterFilter, page: Page
    ) -> tuple[list[DeadLetter], int]:
        # The legal holds are imported by the use-cases that read them (here and below): a bulk
        # retry, which skips held dead letters in its statement, loads none of them (1.3 ms).
        from redrive.service.legal_holds import marked

        filters = filters.scoped(caller.tenant_scope)
        async with self.runtime.store.transaction(caller) as transaction:
            items = await transaction.list_dead_letters(filters, page)
            total = await transaction.count_dead_letters(filters)
            items = await marked(transaction, caller.tenant_scope, items)
        return visibility.dead_letters_for(caller, items, self._redactor), total

    async def get(self, caller: Caller, job_id: str) -> tuple[DeadLetter, list[DeadLetter]]:
        """The job's current dead episode, and every episode it has had, oldest first."""
        from redrive.service.legal_holds import marked

        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            dead = await transaction.get_dead_letter(job_id, tenant)
            if dead is None:
                raise NotFound("dead letter", job_id)
            history = await transaction.dead_letter_episodes(job_id, tenant)
            [dead] = await marked(transaction, tenant, [dead])
        return (
            visibility.dead_letter_for(caller, dead, self._redactor),
            visibility.dead_letters_for(caller, history, self._redactor),
        )

    async def episodes(self, caller: Caller, job_id: str) -> list[DeadLetter]:
        """Every episode the job has had, oldest first, whether or not one is dead now."""
        from redrive.service.legal_holds import marked

        async with self.runtime.store.transaction(caller) as transaction:
            history = await transaction.dead_letter_episodes(job_id, caller.tenant_scope)
            history = await marked(transaction, caller.tenant_scope, history)
        if not history:
            raise NotFound("dead letter", job_id)
        return visibility.dead_letters_for(caller, history, self._redactor)

    async def redrive(
        self,
        transaction: DeadLetterMoves,
        dead: DeadLetter,
        job: Job,
        status: str,
        moved_by: str,
        now: int,
    ) -> bool:
        """Flip the episode out of `dead` (the exactly-once guard), then requeue `job` (the dead
        job, possibly modified) upcast to its type's current version. Both happen in the
        caller's transaction or neither does; an upcaster that fails raises before either."""
        job = upcast(job, self.runtime.options.upcasters).after
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
        self,
        caller: Caller,
        job_id: str,
        override: RetryOverride,
        intent: RetryIntent = RetryIntent(),
    ) -> Job:
        """Retry one dead letter (for debugging it needs no root cause, unless the server is
        strict); a poison pill's is refused unless an admin forces it with a reason."""
        if intent.force and (caller.role != Role.ADMIN or not intent.reason):
            raise Forbidden(
                "force (overriding a poison pill's refusal) needs an admin and a reason",
                {"field": "force"},
            )
        now = self.runtime.now()
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            dead = await transaction.get_dead_letter(job_id, tenant)
            if dead is None:
                raise NotFound("dead letter", job_id)
            if not intent.force:
                await self._check_single(transaction, dead, tenant)
            modified = apply_override(dead.job, override)
            modified = upcast(modified, self.runtime.options.upcasters).after
            if not await self.redrive(
                transaction, dead, modified, episodes.RETRIED, caller.actor, now
            ):
                raise NotFound("dead letter", job_id)
            target: dict[str, Any] = {"job_id": job_id, "modified": modified != dead.job}
            target |= {"reason": intent.reason} if intent.reason else {}
            target |= {"forced": True} if intent.force else {}
            await self.audit.record(caller, transaction, Action.DEAD_LETTER_RETRY, target, 1)
        return episodes.redrive(modified, now)

    async def retry_preview(self, caller: Caller, job_id: str, override: RetryOverride) -> Upcast:
        """What a single retry would requeue, without moving anything: the dead job (with the
        override) and the same job upcast; UpcastFailed when an upcaster would refuse it."""
        dead, _ = await self.get(caller, job_id)
        return upcast(apply_override(dead.job, override), self.runtime.options.upcasters)

    async def _check_single(
        self, transaction: Transaction, dead: DeadLetter, tenant: str | None
    ) -> None:
        """A strict server asks a single retry for a root cause too; a poison pill's always
        refused (without force)."""
        if self.runtime.options.strict_redrive:
            await require_root_causes(transaction, dead_letters=[dead], tenant_id=tenant)
        elif dead.incident_id is not None:
            incident = await transaction.get_incident(dead.incident_id, tenant)
            if incident is not None and incident.classification == POISON_PILL:
                await require_root_causes(transaction, dead_letters=[dead], tenant_id=tenant)

    async def delete(self, caller: Caller, job_id: str) -> None:
        """Delete the job's dead letter; 409 legal_hold, naming the holds, while one keeps it
        (whoever asks, admins too)."""
        from redrive.domain.legal_hold import LegalHeld
        from redrive.service.legal_holds import marked

        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            dead = await transaction.get_dead_letter(job_id, caller.tenant_scope)
            if dead is not None:
                [dead] = await marked(transaction, caller.tenant_scope, [dead])
                if dead.legal_holds:
                    raise LegalHeld(job_id, list(dead.legal_holds))
            if dead is None or not await transaction.move_dead_letter(
                dead, episodes.DELETED, now, caller.actor
            ):
                raise NotFound("dead letter", job_id)
            await self._forget(transaction, [MovedEpisode.of(dead)], caller.actor, now)
            target = {"job_id": job_id}
            await self.audit.record(caller, transaction, Action.DEAD_LETTER_DELETE, target, 1)

    async def retry_selected(self, caller: Caller, job_ids: list[str]) -> SelectionResult:
        """Retry the chosen dead letters, as they are, in one transaction."""
        return await self._move_selected(caller, _selection(job_ids), episodes.RETRIED)

    async def delete_selected(self, caller: Caller, job_ids: list[str]) -> SelectionResult:
        """Delete the chosen dead letters in one transaction."""
        return await self._move_selected(caller, _selection(job_ids), episodes.DELETED)

    async def _move_selected(
        self, caller: Caller, job_ids: list[str], status: str
    ) -> SelectionResult:
        from redrive.service.legal_holds import active_holds

        now = self.runtime.now()
        moved: list[str] = []
        held: list[str] = []
        queues: set[str] = set()
        forgotten: list[MovedEpisode] = []
        async with self.runtime.store.transaction(caller) as transaction:
            holds = await active_holds(transaction, caller.tenant_scope)
            found = [await transaction.get_dead_letter(job_id, caller.tenant_scope)
                     for job_id in job_ids]  # fmt: skip
            chosen = [dead for dead in found if dead is not None]
            if status == episodes.RETRIED and len(chosen) > 1:
                await require_root_causes(transaction, None, chosen, caller.tenant_scope)
            for dead in chosen:
                job_id = dead.job_id
                if status == episodes.DELETED and any(hold.covers(dead) for hold in holds):
                    held.append(job_id)
                    continue
                if status == episodes.RETRIED:
                    done = await self.redrive(
                        transaction, dead, dead.job, status, caller.actor, now
                    )
                else:
                    done = await transaction.move_dead_letter(dead, status, now, caller.actor)
                    forgotten += [MovedEpisode.of(dead)] if done else []
                if done:
                    moved.append(job_id)
                    queues.add(dead.job.queue)
            await self._forget(transaction, forgotten, caller.actor, now)
            action = (
                Action.DEAD_LETTER_RETRY
                if status == episodes.RETRIED
                else Action.DEAD_LETTER_DELETE
            )
            target = {"job_ids": job_ids}
            await self.audit.record(caller, transaction, action, target, len(moved))
        missing = [job_id for job_id in job_ids if job_id not in {*moved, *held}]
        return SelectionResult(moved=moved, missing=missing, queues=sorted(queues), held=held)

    async def preview(self, caller: Caller, filters: DeadLetterFilter) -> Preview:
        """What a bulk action by this filter would move, without moving anything."""
        filters = filters.scoped(caller.tenant_scope)
        async with self.runtime.store.transaction(caller) as transaction:
            by_queue = await transaction.count_dead_letters_by_queue(filters)
            sample = await transaction.list_dead_letters(filters, Page(limit=SAMPLE_SIZE))
        return Preview(
            matched=sum(by_queue.values()),
            by_queue=by_queue,
            sample=visibility.dead_letters_for(caller, sample, self._redactor),
        )

    async def _dry_run(self, caller: Caller, request: BulkRequest, action: str) -> BulkResult:
        preview = await self.preview(caller, request.filters)
        matched = preview.matched if request.limit is None else min(preview.matched, request.limit)
        sample = preview.sample[:matched]
        upcasts = []
        errors: list[dict[str, str]] = []
        if action == "retry":
            errors = await self._upcast_failures(caller, request)
            for dead in sample:
                try:
                    upcasts.append(upcast(dead.job, self.runtime.options.upcasters))
                except UpcastFailed:
                    continue  # named in errors already
        return BulkResult(
            action=action,
            dry_run=True,
            matched=matched,
            sample=[dead.job_id for dead in sample],
            queues=sorted(queue for queue, count in preview.by_queue.items() if count),
            upcasts=upcasts,
            errors=errors,
            failed=len(errors),
        )

    async def _upcast_failures(
        self, caller: Caller, request: BulkRequest, first_only: bool = False
    ) -> list[dict[str, str]]:
        """The dead letters a bulk retry would meet whose upcast fails (the first few): every
        match of a type with upcasters is upcast, none is moved."""
        upcasters = self.runtime.options.upcasters
        base = request.filters.scoped(caller.tenant_scope)
        failures: list[dict[str, str]] = []
        for job_type in upcasters.job_types:
            if base.type not in (None, job_type) or not job_type.startswith(base.type_prefix or ""):
                continue
            filters = replace(base, type=job_type)
            offset = 0
            while len(failures) < (1 if first_only else UPCAST_ERRORS_SHOWN):
                async with self.runtime.store.transaction(caller) as transaction:
                    page = await transaction.list_dead_letters(
                        filters, Page(limit=UPCAST_CHECK_PAGE, offset=offset)
                    )
                for dead in page:
                    try:
                        upcast(dead.job, upcasters)
                    except UpcastFailed as error:
                        failures.append(
                            {"job_id": dead.job_id, "code": error.code, "message": error.message}
                        )
                if len(page) < UPCAST_CHECK_PAGE:
                    break
                offset += UPCAST_CHECK_PAGE
        return failures

    async def _bulk(self, caller: Caller, request: BulkRequest, action: str) -> BulkResult:
        """Set-based, in chunks of one transaction each, spread over the store's write lanes: a
        failure half-way leaves every job either back in its queue or still dead, and the status
        flip makes each episode move once even when several operators or replicas run the same
        bulk operation (each sees only what it moved)."""
        if action == "retry" and not request.dry_run:
            refuse_unfiltered(request.filters)
        _check_confirmed(request)
        if request.dry_run:
            return await self._dry_run(caller, request, action)
        if action == "retry" and (failures := await self._upcast_failures(caller, request, True)):
            # Nothing moves while one match would not upcast (a redrive that moved the others
            # would leave the operator a half-done set to untangle).
            first = failures[0]
            refusal = MissingUpcaster if first["code"] == MissingUpcaster.code else UpcastFailed
            raise refusal(first["message"], {"job_id": first["job_id"]})
        filters = request.filters.scoped(caller.tenant_scope)
        result = BulkResult(action=action)
        queues: set[str] = set()
        budget = sys.maxsize if request.limit is None else request.limit  # what lanes may take

        def counted(moved: int, into: Iterable[str]) -> None:
            result.matched += moved
            result.succeeded += moved
            queues.update(into)

        # A retry's redrive policy is checked in its first round's transaction (see
        # `_retry_rounds`): a refusal, or an error before the check passed, moved nothing and is
        # not audited, as when the check had a transaction of its own.
        checked = action != "retry"

        def passed() -> None:
            nonlocal checked
            checked = True

        audited = Action.DEAD_LETTER_BULK_RETRY if action == "retry" else Action.DEAD_LETTER_PURGE
        try:
            if action == "retry":
                await self._retry_rounds(caller, filters, budget, counted, passed)
            else:
                lanes = self.runtime.store.write_lanes
                await in_lanes(
                    lanes, budget, BULK_CHUNK, self._purge_steps(caller, filters, counted)
                )
        except Exception:
            if not checked:
                raise
            # Chunks that committed stay moved: the record says how many before it stopped.
            await self.audit.record_attempt(
                caller, audited, filter_target(request), Outcome.FAILED, result.succeeded
            )
            raise
        await self.audit.record_attempt(
            caller, audited, filter_target(request), Outcome.SUCCEEDED, result.succeeded
        )
        result.queues = sorted(queues)
        if action == "purge":  # the statement skips held dead letters: say how many it left
            async with self.runtime.store.transaction(caller) as transaction:
                result.held = await transaction.count_held_dead_letters(filters)
        return result

    async def _retry_rounds(
        self,
        caller: Caller,
        filters: DeadLetterFilter,
        budget: int,
        counted: Counted,
        passed: Callable[[], None],
    ) -> None:
        """Up to `budget` of the dead letters matching the filter, newest first. A round reads
        their ids once, then moves them by id, a chunk per transaction over the write lanes (a
        pick by filter per chunk, planned without statistics, read and sorted every match left:
        quadratic in the set). Only a round that skipped some (another transaction held them,
        or moved them first) is followed by another, which leaves those out: side-by-side bulk
        retries with a limit each take their own. The first round's transaction checks the
        redrive policy first (then `passed`): in a transaction of its own, the check cost a
        BEGIN and a COMMIT, two round trips, on the way to the move."""
        skipped: list[str] = []
        store = self.runtime.store
        first = True  # (checked even when `budget` allows none: a refusal says why)
        while first or budget > 0:
            async with store.transaction(caller) as transaction:
                if first:  # the lanes' connections are made while the ids are read
                    await require_root_causes(transaction, filters)
                    passed()
                    store.open_lanes("retry_dead_letters")
                    first = False
                chosen = []
                if budget > 0:
                    chosen = await transaction.dead_letter_ids(filters, budget, skipped)
            missed = await self._retry_round(caller, chosen, counted) if chosen else []
            if not missed:
                return
            budget -= len(chosen) - len(missed)
            skipped += missed

    async def _retry_round(self, caller: Caller, chosen: list[str], counted: Counted) -> list[str]:
        """Move the chosen episodes by id, a chunk per transaction over the write lanes; the
        ids of those skipped."""
        missed: list[str] = []
        taken = 0

        async def step(take: int) -> int:
            nonlocal taken
            ids = chosen[taken : taken + take]
            taken += len(ids)
            async with self.runtime.store.transaction(caller) as transaction:
                retried, _ = await self.retry_chosen(
                    transaction, ids, caller.actor, self.runtime.now()
                )
            missed.extend(retried.skipped)
            counted(retried.count, retried.by_queue())
            return len(ids)

        lanes = self.runtime.store.write_lanes
        chunk = lane_share(len(chosen), lanes, BULK_CHUNK, RETRY_CHUNK_MOST)
        await in_lanes(lanes, len(chosen), chunk, lambda: step)
        return missed

    def _purge_steps(
        self, caller: Caller, filters: DeadLetterFilter, counted: Counted
    ) -> Callable[[], Step]:
        """The lanes of a purge, each picking by filter: at or before the oldest episode the
        lane's last chunk moved (from the top, an index scan would step over every episode moved
        so far: quadratic). Past an empty chunk the lane looks once more from the top, for
        episodes it skipped while another transaction held them."""

        def lane_step() -> Step:
            oldest: int | None = None

            async def step(take: int) -> int:
                nonlocal oldest
                chunk = filters if oldest is None else replace(filters, until=oldest)
                moved = await self._purge_chunk(caller, chunk, take)
                if not moved and oldest is not None:
                    moved = await self._purge_chunk(caller, filters, take)
                oldest = min((e.discarded_at for e in moved if e.discarded_at is not None),
                             default=None)  # fmt: skip
                counted(len(moved), {episode.queue for episode in moved})
                return len(moved)

            return step

        return lane_step

    async def _purge_chunk(
        self, caller: Caller, filters: DeadLetterFilter, limit: int
    ) -> list[MovedEpisode]:
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            moved = await transaction.move_dead_letters(
                filters, limit, episodes.DELETED, now, caller.actor
            )
            await self._forget(transaction, moved, caller.actor, now)
        return moved

    async def retry_chosen(
        self, transaction: DeadLetterMoves, episode_ids: list[str], moved_by: str, now: int,
        upcast_jobs: dict[str, Job] | None = None, task_id: str | None = None,
    ) -> tuple[Retried, list[str]]:  # fmt: skip
        """Move the chosen episodes still dead to `retried` in one statement, which requeues
        their jobs in place where the dead job's row is still in the jobs table (as the redrive
        task `task_id`'s) and writes each one's event; then requeue the rest: upcast where an
        upcaster changes them, else in place, else from the episode's snapshot (decoded only for
        those). `upcast_jobs`: their upcasts prepared before the move (see `prepare_upcasts`),
        else done here. A task's items leave `pending` in the same statement. Returns what the
        statement did and the ids of the jobs requeued other than in place (a task marks those
        as its own)."""
        if not episode_ids:
            return Retried([], [], []), []
        heads = self.runtime.block_head_parts(len(episode_ids), now)
        upcast_types = self.runtime.options.upcasters.job_types
        retried = await transaction.retry_dead_letters(
            episode_ids, heads, now, moved_by, upcast_types, task_id
        )
        moved = retried.moved
        waiting = [episode for episode in moved if not episode.requeued]
        others = (
            await self._requeue(transaction, waiting, now, upcast_jobs, task_id) if waiting else []
        )
        by_queue = retried.by_queue()
        await transaction.notify(set(by_queue))
        # The statement wrote the events, a block a run; built here only for webhooks (it
        # returned one by one every moved episode of a tenant with a subscription).
        if retried.listeners:
            listened = {listener.tenant_id for listener in retried.listeners}
            told = [episode for episode in moved if episode.tenant_id in listened]
            event_of = retried_event_ids(episode_ids, heads, told)
            stored = [
                StoredEvent(
                    event_of[episode.id], 0, now,
                    episode_event("dead_letter.retried", episode, moved_by=moved_by,
                                  episode_id=episode.id),
                )
                for episode in told
            ]  # fmt: skip
            await self.runtime.queue_deliveries(transaction, retried.listeners, stored, now)
        self.runtime.metrics.dead_letter_retried.update(by_queue)
        return retried, others

    async def _requeue(
        self, transaction: DeadLetterMoves, moved: list[MovedEpisode], now: int,
        upcast_jobs: dict[str, Job] | None, task_id: str | None,
    ) -> list[str]:  # fmt: skip
        if upcast_jobs is None:
            upcast_jobs = await self._upcast_moved(transaction, moved, now)
        else:
            upcast_jobs = {
                episode.job_id: episodes.redrive(upcast_jobs[episode.job_id], now)
                for episode in moved
                if episode.job_id in upcast_jobs
            }
        in_place = [episode.job_id for episode in moved if episode.job_id not in upcast_jobs]
        revived = await transaction.redrive_jobs(in_place, now, task_id) if in_place else set()
        pruned = [
            episode.id
            for episode in moved
            if episode.job_id not in revived and episode.job_id not in upcast_jobs
        ]
        inserted = [
            episodes.redrive(dead.job, now)
            for dead in await transaction.dead_letters_by_id(pruned)
        ]  # fmt: skip
        await transaction.insert_jobs(inserted)
        for job in upcast_jobs.values():
            await transaction.upsert_job(job)
        for queue, tenant in sorted({(episode.queue, episode.tenant_id) for episode in moved}):
            await transaction.ensure_queue(queue, tenant, now)
        return [*(job.id for job in inserted), *upcast_jobs]

    async def _upcast_moved(
        self, transaction: DeadLetterMoves, moved: list[MovedEpisode], now: int
    ) -> dict[str, Job]:
        """The moved jobs whose payload an upcaster changes, by job id, redriven and upcast; an
        upcaster that fails raises, and the caller's transaction moves none of them."""
        upcasters = self.runtime.options.upcasters
        candidates = [
            episode.id for episode in moved if upcasters.current_version(episode.type) is not None
        ]
        if not candidates:
            return {}
        upcasts = [
            upcast(dead.job, upcasters) for dead in await transaction.dead_letters_by_id(candidates)
        ]
        return {
            result.after.id: episodes.redrive(result.after, now)
            for result in upcasts
            if result.changed
        }

    async def prepare_upcasts(
        self, transaction: DeadLetterMoves, episode_ids: list[str]
    ) -> PreparedUpcasts:
        """The upcasts of dead letters about to move, each on its own: one an upcaster refuses
        is set apart (the others can move); a missing step (configuration, not the payload)
        raises MissingUpcaster."""
        upcasters = self.runtime.options.upcasters
        if not len(upcasters) or not episode_ids:
            return PreparedUpcasts()
        prepared = PreparedUpcasts()
        for dead in await transaction.dead_letters_by_id(episode_ids):
            if upcasters.current_version(dead.job.type) is None:
                continue
            try:
                result = upcast(dead.job, upcasters)
            except MissingUpcaster:
                raise
            except UpcastFailed as error:
                prepared.refused[dead.id] = error
                continue
            if result.changed:
                prepared.jobs[dead.job_id] = result.after
        return prepared

    async def _forget(
        self, transaction: DeadLetterMoves, moved: list[MovedEpisode], moved_by: str, now: int
    ) -> None:
        if not moved:
            return
        await transaction.delete_dead_jobs([episode.job_id for episode in moved])
        events = [
            episode_event("dead_letter.deleted", episode, deleted_by=moved_by) for episode in moved
        ]
        await self.runtime.emit(transaction, events, now)
        self.runtime.metrics.dead_letter_deleted.update(episode.queue for episode in moved)

    async def bulk_retry(self, caller: Caller, request: BulkRequest) -> BulkResult:
        return await self._bulk(caller, request, "retry")

    async def purge(self, caller: Caller, request: BulkRequest) -> BulkResult:
        return await self._bulk(caller, request, "purge")

    async def stats(self, caller: Caller) -> DeadLetterStats:
        async with self.runtime.store.transaction(caller) as transaction:
            return await transaction.dead_letter_stats(caller.tenant_scope)
