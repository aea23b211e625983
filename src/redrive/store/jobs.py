"""The live jobs table: inserts, guarded updates, reads, locks, claims, promotion, expiry."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from functools import cache
from typing import TYPE_CHECKING, Any

from redrive.domain.errors import Duplicate
from redrive.domain.frozen import Assembler
from redrive.domain.job import Job
from redrive.domain.listeners import Listener
from redrive.ports import JobStore
from redrive.ports.jobs import Enqueued
from redrive.store.base import SqlBase
from redrive.store.codec import (
    claim_listened,
    claimed_jobs,
    dump,
    job_from_row,
    job_parameters,
    job_records,
    lifecycle_record,
    load,
    new_job_parameters,
    new_job_records,
)

# The claims' and acks' values are imported where a claim or an ack is written: a producer
# writes neither, so it does not make their classes.
if TYPE_CHECKING:
    from redrive.domain.events import BlockHeads
    from redrive.ports.attempts import (
        Claim,
        Claimed,
        CompletedJob,
        Completion,
        Completions,
        JobChange,
    )
    from redrive.ports.jobs import JobFilter


@cache
def completed_job_reader(
    columns: tuple[str, ...],
) -> tuple[Assembler[CompletedJob], Callable[[Sequence[Any]], dict[str, Any]]]:
    """An ack's answer for each job it completed, assembled from its row (no frozen __init__
    setting each of its fields): every acked job has one. Its assembler and the function that
    reads its fields from a row of these columns, by position, made on the first ack: one dict
    display, `{"id": row[1], ...}`, compiled from the fields' names and their columns' places
    (`dict(zip(...))` of the row's items paired with the names cost ~2x as much a job).
    """
    from redrive.ports.attempts import CompletedJob

    places = {name: columns.index(name) for name in (item.name for item in fields(CompletedJob))}
    display = ", ".join(f"{name!r}: row[{place}]" for name, place in places.items())
    read: Callable[[Sequence[Any]], dict[str, Any]] = eval(f"lambda row: {{{display}}}")
    return Assembler(CompletedJob), read


def ack_record(completion: Completion) -> dict[str, Any]:
    """One ack as an element of complete_jobs' JSON `rows`: its fields in order, the null ones
    left out (as `base.present` leaves them out), made directly rather than as a whole record
    that a comprehension then copies without its nulls (every acked job has one)."""
    record: dict[str, Any] = {"id": completion.job_id}
    if (worker_id := completion.worker_id) is not None:
        record["worker_id"] = worker_id
    if (lease_token := completion.lease_token) is not None:
        record["lease_token"] = lease_token
    if (result := completion.result) is not None:
        record["result"] = result
    record["event_id"] = completion.event_id
    return record


class SqlJobs(SqlBase, JobStore):
    async def insert_jobs(self, jobs: list[Job]) -> set[str]:
        """Insert many jobs in one statement; ids that exist already are left as they are.
        Returns the ids actually inserted."""
        if not jobs:
            return set()
        rows = await self._rows(
            "insert_jobs", rows=self.executor.records_parameter(job_records(jobs))
        )
        return {row["id"] for row in rows}

    async def enqueue_jobs(
        self,
        jobs: list[Job],
        event_ids: list[str] | None,
        now: int,
        alone: bool = False,
        queue_known: bool = False,
    ) -> Enqueued:
        """The jobs' queues, the jobs (existing ids skipped) and their events in one statement:
        on PostgreSQL one round trip, sent with the transaction's BEGIN (or, `alone`, all of
        its unit: see the port)."""
        if len(jobs) == 1:  # a producer's one job a call: its columns as parameters
            event_id = None if event_ids is None else event_ids[0]
            parameters = new_job_parameters(jobs[0], event_id, now, alone)
            # A known queue's row is not written: a statement without the queues insert, not
            # a flag that skips it (its set-up alone cost ~3 % of the server's CPU a call).
            statement = "enqueue_job_known_queue" if queue_known else "enqueue_job"
            try:
                rows = await self.executor.rows(statement, parameters)
            except Duplicate:  # PostgreSQL's plain insert failed: the id is this job's
                job_id = jobs[0].id
                raise Duplicate(f"job {job_id} already exists", {"job_id": job_id}) from None
        else:
            records = self.executor.shared_records_parameter(*new_job_records(jobs, event_ids))
            blocks = self.executor.event_blocks_parameter(jobs, event_ids)
            rows = await self._rows(
                "enqueue_jobs", rows=records, blocks=blocks, now=now, alone=alone
            )
        if not rows:  # a producer's one job, written, no listener: the usual answer
            return Enqueued(set(), [])
        listeners = [
            Listener(row["id"], row["tenant_id"], tuple(load(row["events"])))
            for row in rows
            if row["kind"] == "listener"
        ]
        # A job whose id exists comes back as `existing` (SQLite's, and a batch's; PostgreSQL's
        # one-job insert fails instead: Duplicate); one held back for a listener does not.
        return Enqueued({row["id"] for row in rows if row["kind"] == "existing"}, listeners)

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
            lifecycle_record(change.job, change.expected_state, change.expected_lease_token)
            for change in changes
        ]
        ids = self.executor.list_parameter([change.job.id for change in changes])
        return {
            row["id"]
            for row in await self._rows(
                "update_jobs", rows=self.executor.records_parameter(records), ids=ids
            )
        }

    async def complete_jobs(
        self, completions: list[Completion], columns: dict[str, Any], tenant_id: str | None,
        now: int,
    ) -> Completions:  # fmt: skip
        """Write many acks in one statement, each only while the lease it names still holds, with
        the lifecycle `columns` the domain decided, its result and its `job.completed` event; the
        jobs' other columns are neither read nor decoded. An ack absent from the answer was not
        written (its lease no longer holds, or its job is not there or not the tenant's)."""
        from redrive.ports.attempts import Completions

        if not completions:
            return Completions([], [])
        records = [ack_record(completion) for completion in completions]
        ids = self.executor.list_parameter([completion.job_id for completion in completions])
        names, rows = await self.executor.table(
            "complete_jobs",
            {
                "rows": self.executor.records_parameter(records),
                "ids": ids,
                "tenant_id": tenant_id,
                "now": now,
                **columns,
                "error": dump(columns["error"]),
            },
        )
        if not rows:
            return Completions([], [])
        # The rows by position (no dict a row), as the claim's.
        assemble_completed_job, completed = completed_job_reader(names)
        kind, job_id, tenant, events = map(names.index, ("kind", "id", "tenant_id", "events"))
        return Completions(
            done=[
                assemble_completed_job.adopt(completed(row)) for row in rows if row[kind] == "job"
            ],
            listeners=[
                Listener(row[job_id], row[tenant], tuple(load(row[events])))
                for row in rows
                if row[kind] == "listener"
            ],
        )

    async def update_job(self, job: Job, expected_state: str, expected_lease: str | None) -> bool:
        from redrive.ports.attempts import JobChange

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

    async def existing_job_ids(self, job_ids: list[str], tenant_id: str | None) -> set[str]:
        ids = self.executor.list_parameter(job_ids)
        rows = await self._rows("select_existing_job_ids", ids=ids, tenant_id=tenant_id)
        return {row["id"] for row in rows}

    async def list_jobs(
        self, tenant_id: str | None, filters: JobFilter, limit: int, offset: int
    ) -> tuple[list[Job], int]:
        keys = {"tenant_id": tenant_id, "queue": filters.queue, "state": filters.state,
                "type": filters.type}  # fmt: skip
        rows = await self._rows("select_jobs", limit=limit, offset=offset, **keys)
        total = await self._rows("count_jobs", **keys)
        return [job_from_row(row) for row in rows], int(total[0]["count"])

    async def claim_jobs(self, claim: Claim, now: int, block_heads: BlockHeads) -> Claimed:
        """Lease up to `claim.limit` jobs and write their `job.started` events, in one statement
        on PostgreSQL: a row a run of alike jobs, named by the block head at its first job's
        place in `block_heads` (which holds `claim.limit`: the statement builds the heads it
        needs from their parts), its members' ids that block's."""
        from redrive.ports.attempts import Claimed

        _, rows = await self.executor.table(
            "claim_jobs",
            {
                "queue": claim.queue,
                "limit": claim.limit,
                "worker_id": claim.worker_id,
                "lease_token": claim.lease_token,
                "visibility_timeout_ms": claim.visibility_timeout_ms,
                "tenant_id": claim.tenant_id,
                "now": now,
                "head_prefix": block_heads.prefix,
                "head_randoms": block_heads.randoms,
            },
        )
        if not rows:
            return Claimed(0, [], list)

        def make() -> tuple[list[Job], list[Job]]:
            return claimed_jobs(
                rows, now, claim.worker_id, claim.lease_token, claim.visibility_timeout_ms
            )

        if claim_listened(rows):  # the unit emits their events: the jobs are made now
            jobs, unannounced = make()
            return Claimed(len(rows), unannounced, lambda: jobs)
        claimed = Claimed(len(rows), [], lambda: make()[0])
        self.defer(lambda: claimed.jobs)
        return claimed

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

    async def due_work(self, now: int) -> set[str]:
        (row,) = await self._rows("select_due_work", now=now)
        return {name for name, due in row.items() if due}

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

    async def oldest_finished_at(self) -> int | None:
        oldest = (await self._rows("select_oldest_finished_at"))[0]["oldest"]
        return None if oldest is None else int(oldest)
