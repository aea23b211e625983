"""Rows to records and back: how jobs, dead letters and events sit in the tables."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import orjson

from redrive.domain.events import Event, block_event_id, enqueued_event_type, event_block_id
from redrive.domain.identifiers import SERIES_COUNTER
from redrive.domain.job import ACTIVE, Job, assemble_job
from redrive.domain.records import (
    job_from_record,
    retry_from_record,
    sparse_job_record,
    sparse_retry_record,
)
from redrive.domain.retry import RetryPolicy
from redrive.ports import StoredEvent

# Imported by the functions that make them: a producer that only enqueues never reads a dead
# letter, an incident, a root cause or a replay rule.
if TYPE_CHECKING:
    from redrive.domain.dead_letter import DeadLetter
    from redrive.domain.incident import Incident, IncidentEntry
    from redrive.domain.replay import ReplayRule
    from redrive.domain.root_cause import RootCause

JOB_COLUMNS = (
    "id", "tenant_id", "queue", "type", "state", "priority", "attempt", "timeout_ms",
    "visibility_timeout_ms", "created_at", "enqueued_at", "scheduled_at", "expires_at",
    "started_at", "completed_at", "cancelled_at", "discarded_at", "expired_at", "next_attempt_at",
    "retry_delay_ms", "worker_id", "lease_token", "lease_expires_at", "timeout_at",
)  # fmt: skip


def dump(value: Any) -> str | None:
    """Compact JSON text. orjson writes it several times faster; integers beyond 64 bits (and
    anything else it refuses) go through the standard library, which keeps them exact."""
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# orjson reads integers beyond 64 bits as floats: text with a run of 19 or more digits (maybe
# such an integer) goes to the standard library, which keeps them exact. The run is found in the
# text's UTF-8 bytes with every digit turned into 0 (bytes.translate and `in` scan ten times
# faster than a regular expression, which cost more than orjson's whole parse, and three to
# five times faster than str.translate: 2 -> 0.4-0.9 us for a job's envelope or errors).
DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
LONG_DIGITS = b"0" * 19


def load(value: Any) -> Any:
    """The value of JSON text: orjson reads it several times faster; what it would read
    inexactly (long integers) or refuses (lone surrogates) the standard library reads."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        # UTF-8 (lone surrogates passed through): only ASCII digits become 0 bytes.
        # `find`, not `in`: bytes' `in` first tries its operand as an integer, and formats and
        # drops a TypeError every call (~1.1k instructions of ~2.7k).
        if value.encode("utf-8", "surrogatepass").translate(DIGITS_AS_ZERO).find(LONG_DIGITS) >= 0:
            return json.loads(value)
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return json.loads(value)
    return value


# Job fields that are not columns of their own: the envelope column holds them.
ENVELOPE_FIELDS = ("args", "meta", "options", "extra", "scheduled_at_text", "expires_at_text")
# redrive_task_id and redrive_dead_letter_id are columns written only when a job is redriven
# (never by inserts or upserts).
NOT_COLUMNS = frozenset(
    {*ENVELOPE_FIELDS, "retry", "sequence", "redrive_task_id", "redrive_dead_letter_id"}
)


def _envelope(job: Job, retry: dict[str, Any], seen: dict[tuple[int, int], bool]) -> dict[str, Any]:
    """The envelope column: what a job's columns do not hold, each only when it says something
    (`job_from_row` reads an absent one back). Empty meta and extra are left out, and so is a
    text time that is not set, each retry field at RetryPolicy's default (`sparse_retry_record`)
    and the policy's record itself when the options hold it as it is (`_retry_in_options`):
    a producer's 1,000 failing jobs' rows of enqueue_jobs were 291 KB with them, 213 without
    (the server's JSON parse and the rows it writes are proportional)."""
    options = job.options
    envelope = {"args": job.args, "options": options}
    if job.meta:
        envelope["meta"] = job.meta
    if job.extra:
        envelope["extra"] = job.extra
    if not _retry_in_options(options.get("retry"), retry, seen):
        envelope["retry"] = retry
    if job.scheduled_at_text is not None:
        envelope["scheduled_at_text"] = job.scheduled_at_text
    if job.expires_at_text is not None:
        envelope["expires_at_text"] = job.expires_at_text
    return envelope


def _retry_in_options(given: Any, retry: dict[str, Any], seen: dict[tuple[int, int], bool]) -> bool:
    """Whether the options' `retry` is the policy's record as it is, the same JSON (types and
    order too: 2 and 2.0 are equal in Python, not in a document): then the envelope does not
    hold it twice. Decided once per pair of objects (`seen`, for the objects a batch keeps
    alive): a producer's batch shares one."""
    if given is None:
        return False
    key = (id(given), id(retry))
    same = seen.get(key)
    if same is None:
        same = seen[key] = given == retry and dump(given) == dump(retry)
    return same


def stored_error(job: Job) -> Any:
    """What a jobs row's `error` column holds: JSON `true` when the job's error is the last of
    its `errors` (a failed job's always is), else the error itself (None for none). The row kept
    its last error twice: 469 of a dead benchmark job's 1,306 bytes (852 now), written with every
    failed attempt and read by every retry of a dead letter, whose chunk of 5,000 dirtied 2,170
    pages and wrote 18.7 MB of WAL, 1,690 and 16.5 now (`error_from_column` reads it back)."""
    error = job.error
    if error is not None and (errors := job.errors):
        last = errors[-1]
        if error is last or error == last:
            return True
    return error


def error_from_column(value: Any, errors: list[Any]) -> Any:
    """A job's error from its row's `error` column (loaded) and its `errors`: `true` stands
    for the last of them (see stored_error; rows written before keep the copy, read as it is)."""
    if value is True:
        last = errors[-1] if errors else None
        return dict(last) if isinstance(last, dict) else last
    return value


def _columns(
    job: Job, retry: dict[str, Any], keep_nulls: bool, seen: dict[tuple[int, int], bool]
) -> dict[str, Any]:
    record = {
        name: value
        for name, value in vars(job).items()
        if name not in NOT_COLUMNS and (keep_nulls or value is not None)
    }
    if job.error is not None:
        record["error"] = stored_error(job)
    record["max_attempts"] = job.max_attempts
    record["envelope"] = _envelope(job, retry, seen)
    if keep_nulls or job.run_at is not None:
        record["run_at"] = job.run_at
    return record


def job_record(job: Job) -> dict[str, Any]:
    """A job as one element of the JSON `rows` the set-based statements read (JSON columns
    nested, not encoded twice); every column is present, null or not."""
    return _columns(job, sparse_retry_record(job.retry), True, {})


def job_records(jobs: list[Job]) -> list[dict[str, Any]]:
    """Many jobs as `rows` elements, each without its null columns (a statement reads an absent
    key as NULL). The jobs of a batch usually share one retry policy object: it is encoded once."""
    retry_records = _RetryRecords()
    seen: dict[tuple[int, int], bool] = {}
    return [_columns(job, retry_records.of(job), False, seen) for job in jobs]


class _RetryRecords:
    """Each retry policy's record (`sparse_retry_record`) for a batch's jobs, encoded once per
    policy object: a batch's jobs usually share one."""

    def __init__(self) -> None:
        self.records: dict[int, dict[str, Any]] = {}

    def of(self, job: Job) -> dict[str, Any]:
        record = self.records.get(id(job.retry))
        if record is None:
            record = self.records[id(job.retry)] = sparse_retry_record(job.retry)
        return record


BLOCK_SIZE = len(SERIES_COUNTER)  # the most events one block of ids names
# A new job's columns as enqueue_jobs reads them, each with the attribute of the job it is read
# from (its event's type follows its state): a batch's jobs mostly share all of these, and a
# value they all share is sent once.
NEW_JOB_COLUMNS = (
    ("tenant_id", "tenant_id"), ("queue", "queue"), ("type", "type"), ("state", "state"),
    ("priority", "priority"), ("max_attempts", "retry.max_attempts"),
    ("timeout_ms", "timeout_ms"), ("visibility_timeout_ms", "visibility_timeout_ms"),
    ("created_at", "created_at"), ("enqueued_at", "enqueued_at"),
    ("scheduled_at", "scheduled_at"), ("expires_at", "expires_at"), ("run_at", "run_at"),
)  # fmt: skip
# All of a job's NEW_JOB_COLUMNS in one call, as a tuple.
_new_job_values = attrgetter(*(path for _, path in NEW_JOB_COLUMNS))


def _shared_columns(
    jobs: list[Job], with_event_type: bool
) -> tuple[dict[str, Any], list[tuple[str, Callable[[Job], Any]]]]:
    """The columns (of NEW_JOB_COLUMNS and, `with_event_type`, the event's type) whose value
    every job of the batch has (null ones left out), and how to read each other one. A batch
    whose jobs agree in all of them (a producer's) is found in one pass over the jobs, not a
    pass a column (14 passes: ~1 ms of a batch of 1,000)."""
    values = list(map(_new_job_values, jobs))
    if values and values.count(values[0]) == len(values):
        shared = {
            column: value
            for (column, _), value in zip(NEW_JOB_COLUMNS, values[0], strict=True)
            if value is not None
        }
        if with_event_type:
            shared["event_type"] = enqueued_event_type(jobs[0])
        return shared, []
    columns: list[tuple[str, Callable[[Job], Any]]] = [
        (column, attrgetter(path)) for column, path in NEW_JOB_COLUMNS
    ]
    if with_event_type:
        columns.append(("event_type", enqueued_event_type))
    shared = {}
    own: list[tuple[str, Callable[[Job], Any]]] = []
    for column, read in columns:
        found = set(map(read, jobs))
        if len(found) > 1:
            own.append((column, read))
        elif found and (value := found.pop()) is not None:
            shared[column] = value
    return shared, own


def new_job_records(
    jobs: list[Job], event_ids: list[str] | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """New jobs as the `rows` of enqueue_jobs: the columns every job of the batch has the same
    value in (null ones left out), once, and a record per job of its id, envelope, the other
    columns (null ones left out) and, with `event_ids` (blocks, `enqueued_runs`), the id of its
    event's block (`event_block`: the statement writes a block's row from its jobs' columns; the
    event type is a column here; a batch of one block names it once). A statement reads a
    column absent from a record from the shared ones. A batch's jobs usually differ only in id
    and envelope: its rows are ~136 bytes a job (190 with an event id in each), not 517 with
    every column in every record (the server's JSON parse is proportional), its retry policies
    encoded once."""
    shared, own = _shared_columns(jobs, event_ids is not None)
    blocks = None
    if event_ids:
        last = len(event_ids) - 1
        if last < BLOCK_SIZE and event_ids[-1] == block_event_id(event_ids[0], last):  # one
            shared["event_block"] = event_ids[0]
        else:
            blocks = list(map(event_block_id, event_ids))
    retry_records = _RetryRecords()
    seen: dict[tuple[int, int], bool] = {}
    records = []
    for index, job in enumerate(jobs):
        record = {"id": job.id, "envelope": _envelope(job, retry_records.of(job), seen)}
        for column, read in own:
            if (value := read(job)) is not None:
                record[column] = value
        if blocks is not None:
            record["event_block"] = blocks[index]
        records.append(record)
    return shared, records


def event_blocks(jobs: list[Job], event_ids: list[str] | None) -> list[dict[str, Any]]:
    """The events rows of enqueued `jobs` whose events' ids are `event_ids` (blocks, one a run
    of alike jobs: domain/events.py `enqueued_runs`), as enqueue_jobs writes them: a row for
    each block, named by its first event's id, keeping its jobs' ids in order (`subjects`) and
    their priorities when they differ (else in the data, as `enqueued_event` has it)."""
    if not event_ids:
        return []
    rows: list[dict[str, Any]] = []
    start = 0
    while start < len(jobs):
        block = event_block_id(event_ids[start])
        end = start + 1
        while end < len(jobs) and event_block_id(event_ids[end]) == block:
            end += 1
        run, first = jobs[start:end], jobs[start]
        data: dict[str, Any] = {"job_type": first.type, "queue": first.queue}
        members: dict[str, Any] = {"subjects": [job.id for job in run]}
        priorities = [job.priority for job in run]
        if len(set(priorities)) == 1:
            data["priority"] = first.priority
        else:
            members["priorities"] = priorities
        rows.append(
            {
                "id": block, "tenant_id": first.tenant_id, "type": enqueued_event_type(first),
                "queue": first.queue, "job_type": first.type, "data": data, "members": members,
                "size": len(run),
            }
        )  # fmt: skip
        start = end
    return rows


# The record of the retry policy new_job_parameters encoded last, with the policy itself (held,
# so its identity is never another object's): a producer's jobs share the server's default one.
_last_retry: tuple[RetryPolicy | None, dict[str, Any]] = (None, {})


def _retry_record(policy: RetryPolicy) -> dict[str, Any]:
    global _last_retry
    held, record = _last_retry
    if policy is not held:
        record = sparse_retry_record(policy)
        _last_retry = (policy, record)
    return record


def new_job_parameters(job: Job, event_id: str | None, now: int, alone: bool) -> dict[str, Any]:
    """A new job as the parameters of enqueue_job and enqueue_job_known_queue (all of them,
    `now` and `alone` too): new_job_records' record of it, every column present (null or not),
    its envelope encoded, and its event's id and type (both null without `event_id`)."""
    return {
        "id": job.id,
        "tenant_id": job.tenant_id,
        "queue": job.queue,
        "type": job.type,
        "state": job.state,
        "priority": job.priority,
        "max_attempts": job.retry.max_attempts,
        "envelope": dump(_envelope(job, _retry_record(job.retry), {})),
        "timeout_ms": job.timeout_ms,
        "visibility_timeout_ms": job.visibility_timeout_ms,
        "created_at": job.created_at,
        "enqueued_at": job.enqueued_at,
        "scheduled_at": job.scheduled_at,
        "expires_at": job.expires_at,
        "run_at": job.run_at,
        "event_id": event_id,
        "event_type": None if event_id is None else enqueued_event_type(job),
        "now": now,
        "alone": alone,
    }


# What a transition may change (update_jobs writes only these): never the job's definition.
LIFECYCLE_COLUMNS = (
    "state", "attempt", "enqueued_at", "started_at", "completed_at", "cancelled_at",
    "discarded_at", "expired_at", "next_attempt_at", "retry_delay_ms", "run_at", "worker_id",
    "lease_token", "lease_expires_at", "timeout_at", "error", "errors", "result", "dead_lettered",
)  # fmt: skip


# The lifecycle columns that are Job fields (run_at is derived from the state).
STORED_LIFECYCLE = tuple(column for column in LIFECYCLE_COLUMNS if column != "run_at")


def lifecycle_record(
    job: Job, expected_state: str, expected_lease_token: str | None
) -> dict[str, Any]:
    """The id and lifecycle columns of a job, with the state and lease its write expects, as one
    element of update_jobs' JSON `rows`; null columns are left out (the statements read an
    absent key as NULL). Read from the job's `__dict__` in one pass (every nack's job: 2.6 ->
    1.1 us with the copy and the filter it replaces)."""
    state = vars(job)
    record = {column: value for column in STORED_LIFECYCLE if (value := state[column]) is not None}
    if "error" in record:
        record["error"] = stored_error(job)
    if (run_at := job.run_at) is not None:  # a property, not a field
        record["run_at"] = run_at
    record["id"] = job.id
    record["expected_state"] = expected_state
    if expected_lease_token is not None:
        record["expected_lease_token"] = expected_lease_token
    return record


def job_parameters(job: Job) -> dict[str, Any]:
    """A job as the parameters of a one-row statement (JSON columns encoded)."""
    parameters = job_record(job)
    for column in ("envelope", "error", "errors", "result"):
        parameters[column] = dump(parameters[column])
    return parameters


# A row's plain columns, read in one call (every locked job's row).
_job_columns = itemgetter(*JOB_COLUMNS)
# The other columns a job is read from, in the order `_job` takes them.
JOB_OTHER_COLUMNS = ("envelope", "errors", "error", "result", "sequence", "dead_lettered")
_job_others = itemgetter(*JOB_OTHER_COLUMNS)


def job_from_row(row: dict[str, Any]) -> Job:
    """The job of a jobs row read as a dict (by column name)."""
    return _job(
        dict(zip(JOB_COLUMNS, _job_columns(row), strict=True)), _job_others(row),
        row.get("redrive_task_id"), row.get("redrive_dead_letter_id"),
    )  # fmt: skip


# What a claim reads of each job it leased (claim_jobs), after its JSON columns (envelope,
# errors, error, result): the columns the claim did not set, in this order. The claim's own
# values (state, started_at, worker_id, lease_token, lease_expires_at, timeout_at,
# next_attempt_at) are made here as its UPDATE makes them (`claimed_jobs`), not read back.
# SQLite's statement gives them as one JSON array, after the JSON columns but the envelope:
# pysqlite reads a column with three calls into SQLite, each taking the connection's mutex, and
# gives up the GIL for one of them, so the 35 columns of `SELECT *` cost the store's thread ~33k
# instructions a row, five ~15k (callgrind, rows of 100); two (the envelope, the array holding
# errors, error and result too) 1.83 -> 1.57-1.69 us a row of 150 (the statement alone).
# PostgreSQL's gives them as columns: asyncpg decodes each in C, and the array made there cost
# the backend ~1.2 us a row more than it saved the worker.
CLAIMED_JOB_COLUMNS = (
    "id", "tenant_id", "queue", "type", "priority", "attempt", "timeout_ms",
    "visibility_timeout_ms", "created_at", "enqueued_at", "scheduled_at", "expires_at",
    "completed_at", "cancelled_at", "discarded_at", "expired_at", "retry_delay_ms", "sequence",
    "dead_lettered", "redrive_task_id", "redrive_dead_letter_id", "listened",
)  # fmt: skip
# (A claimed row's columns, as `claimed_jobs` sorts them: errors, error and result first.)
_claimed_priority = itemgetter(3 + CLAIMED_JOB_COLUMNS.index("priority"))
_claimed_sequence = itemgetter(3 + CLAIMED_JOB_COLUMNS.index("sequence"))


def claim_listened(rows: Sequence[Sequence[Any]]) -> bool:
    """Whether any of a claim's rows (as `claimed_jobs` reads them) is of a tenant with an
    active webhook subscription, read from its last value (`listened`) without reading the row
    whole: a row of columns holds it as a boolean; a packed row (SQLite's) as the last element
    of its JSON array, the integer json_array writes for SQLite's `IN`: `1]` ends the array of
    a subscribed tenant's job, `0]` any other."""
    if len(rows[0]) == 2:
        return any(row[1].endswith("1]") for row in rows)
    return any(row[-1] for row in rows)


def claimed_jobs(
    rows: Sequence[Sequence[Any]],
    now: int,
    worker_id: str | None,
    lease_token: str,
    visibility_timeout_ms: int | None,
) -> tuple[list[Job], list[Job]]:
    """The jobs of a claim's rows (envelope, then errors, error, result and CLAIMED_JOB_COLUMNS
    as columns or as one JSON array) by priority (highest first), then sequence, as the claim
    leased them at `now`; and those of a tenant with an active webhook subscription
    (`listened`)."""
    claimed = []
    packed = len(rows[0]) == 2 if rows else False
    for row in rows:
        if not packed:
            columns = list(row[1:])
        else:
            # Read by orjson as it is: its numbers are integer columns (64 bits at most), which
            # it reads exactly, so not `load`'s scan for long digits (~2.4k instructions a row);
            # the JSON columns in it are their texts, read by `_job` as before.
            try:
                columns = orjson.loads(row[1])
            except orjson.JSONDecodeError:  # a lone surrogate, which the tables do not hold
                columns = json.loads(row[1])
        columns.append(row[0])
        claimed.append(columns)
    # Two stable sorts by a column each, in C (a key function of Python built a tuple a row).
    claimed.sort(key=_claimed_sequence)
    claimed.sort(key=_claimed_priority, reverse=True)
    jobs: list[Job] = []
    listened_jobs: list[Job] = []
    for (
        errors, error, result, job_id, tenant_id, queue, job_type, priority, attempt, timeout_ms,
        job_visibility_ms, created_at, enqueued_at, scheduled_at, expires_at, completed_at,
        cancelled_at, discarded_at, expired_at, retry_delay_ms, sequence, dead_lettered, task,
        item, listened, envelope,
    ) in claimed:  # fmt: skip
        lease_ms = job_visibility_ms if visibility_timeout_ms is None else visibility_timeout_ms
        # JOB_COLUMNS, in order.
        values = {
            "id": job_id, "tenant_id": tenant_id, "queue": queue, "type": job_type,
            "state": ACTIVE, "priority": priority, "attempt": attempt, "timeout_ms": timeout_ms,
            "visibility_timeout_ms": job_visibility_ms, "created_at": created_at,
            "enqueued_at": enqueued_at, "scheduled_at": scheduled_at, "expires_at": expires_at,
            "started_at": now, "completed_at": completed_at, "cancelled_at": cancelled_at,
            "discarded_at": discarded_at, "expired_at": expired_at, "next_attempt_at": None,
            "retry_delay_ms": retry_delay_ms, "worker_id": worker_id, "lease_token": lease_token,
            "lease_expires_at": now + lease_ms,
            "timeout_at": None if timeout_ms is None else now + timeout_ms,
        }  # fmt: skip
        job = _job(values, (envelope, errors, error, result, sequence, dead_lettered), task, item)
        jobs.append(job)
        if listened:
            listened_jobs.append(job)
    return jobs, listened_jobs


def _job(
    values: dict[str, Any], others: tuple[Any, ...], task: str | None, item: str | None
) -> Job:
    """The job of a jobs row: `values` its JOB_COLUMNS (by name, in that order, which the job's
    fields keep: a dead letter's snapshot is written in it), its JOB_OTHER_COLUMNS and its
    redrive task and item. Its state is built here, every field set once by name, and adopted
    as it is (no keyword arguments, no merge, no copy, no key-set comparison: every claimed job
    is one; 5.8 -> 3.9 us a row); a field missing or added shows as a wrong count."""
    envelope_text, errors, error, result, sequence, dead_lettered = others
    envelope = load(envelope_text)
    options = envelope["options"]
    values["sequence"] = sequence
    values["args"] = envelope["args"]
    values["meta"] = envelope.get("meta", {})
    values["options"] = options
    values["extra"] = envelope.get("extra", {})
    values["retry"] = retry_from_record(
        envelope["retry"] if "retry" in envelope else options["retry"]
    )
    values["scheduled_at_text"] = envelope.get("scheduled_at_text")
    values["expires_at_text"] = envelope.get("expires_at_text")
    # Most jobs have no error history: '[]' needs no parser (1.4 us a claimed row).
    values["errors"] = errors = [] if errors in (None, "[]") else (load(errors) or [])
    # A claimed job's error and result are null: no call to read them.
    values["error"] = None if error is None else error_from_column(load(error), errors)
    values["result"] = None if result is None else load(result)
    values["dead_lettered"] = bool(dead_lettered)
    values["redrive_task_id"] = task
    values["redrive_dead_letter_id"] = item
    return assemble_job.adopt(values)


def dead_letter_record(dead_letter: DeadLetter) -> dict[str, Any]:
    """An episode as one element of the JSON `rows` of enter_dead_letters. A new episode's
    move and, often, its aggregate key are null: left out (the statement reads an absent key
    as NULL, and SQLite's writes it as NULL, not bound: see its store's `without_absent`)."""
    job = dead_letter.job
    record = {
        "id": dead_letter.id,
        "job_id": job.id,
        "tenant_id": job.tenant_id,
        "queue": job.queue,
        "type": job.type,
        "error_type": dead_letter.error_type,
        "reason": dead_letter.reason,
        "discarded_at": dead_letter.discarded_at,
        "status": dead_letter.status,
        "job": sparse_job_record(job),
        "args": dump(job.args),
        "replay_count": dead_letter.replay_count,
        "fingerprint": dead_letter.fingerprint,
        "fingerprint_version": dead_letter.fingerprint_version,
        "incident_id": dead_letter.incident_id,
    }
    if dead_letter.moved_at is not None:
        record["moved_at"] = dead_letter.moved_at
    if dead_letter.moved_by is not None:
        record["moved_by"] = dead_letter.moved_by
    if dead_letter.aggregate_key is not None:
        record["aggregate_key"] = dead_letter.aggregate_key
    return record


def dead_letter_from_row(row: dict[str, Any]) -> DeadLetter:
    from redrive.domain.dead_letter import DeadLetter

    return DeadLetter(
        id=row["id"],
        job=job_from_record(load(row["job"])),
        reason=row["reason"],
        discarded_at=row["discarded_at"],
        status=row["status"],
        error_type=row["error_type"],
        moved_at=row["moved_at"],
        moved_by=row["moved_by"],
        replay_count=row["replay_count"],
        fingerprint=row["fingerprint"],
        fingerprint_version=row["fingerprint_version"],
        incident_id=row["incident_id"],
        aggregate_key=row.get("aggregate_key"),
    )


def incident_entry_record(entry: IncidentEntry) -> dict[str, Any]:
    """What a batch adds to one incident, as one element of the JSON `incidents` of
    enter_dead_letters and upsert_incidents."""
    record = vars(entry).copy()
    record["queues"] = list(entry.queues)
    return record


def incident_from_row(row: dict[str, Any]) -> Incident:
    from redrive.domain.incident import Incident

    return Incident(
        id=row["id"],
        tenant_id=row["tenant_id"],
        type=row["type"],
        fingerprint=row["fingerprint"],
        fingerprint_version=int(row["fingerprint_version"]),
        error_type=row["error_type"],
        message=row["message"],
        state=row["state"],
        dead_count=int(row["dead_count"]),
        total_count=int(row["total_count"]),
        first_seen_at=int(row["first_seen_at"]),
        last_seen_at=int(row["last_seen_at"]),
        queues=tuple(load(row["queues"]) or ()),
        sample_dead_letter_id=row["sample_dead_letter_id"],
        state_changed_at=int(row["state_changed_at"]),
        state_changed_by=row["state_changed_by"],
        fix_reference=row["fix_reference"],
        classification=row["classification"],
        classified_by=row["classified_by"],
    )


def root_cause_from_row(row: dict[str, Any]) -> RootCause:
    from redrive.domain.root_cause import RootCause

    return RootCause(
        incident_id=row["incident_id"],
        tenant_id=row["tenant_id"],
        category=row["category"],
        root_cause=row["root_cause"],
        fix_reference=row["fix_reference"],
        created_by=row["created_by"],
        created_at=int(row["created_at"]),
        updated_by=row["updated_by"],
        updated_at=int(row["updated_at"]),
        revision=int(row["revision"]),
    )


def event_record(stored: StoredEvent) -> dict[str, Any]:
    event = stored.event
    return {
        "id": stored.id,
        "tenant_id": event.tenant_id,
        "type": event.type,
        "queue": event.queue,
        "job_type": event.job_type,
        "subject": event.subject,
        "time": stored.time,
        "data": event.data,
    }


def event_rows(
    events: list[StoredEvent], subjects: list[list[str | None]] | None
) -> list[dict[str, Any]]:
    """The events rows insert_events writes: one for each event, and, where `subjects` gives
    its run several (`EventRun`), a block's row named by the event's id (the block's first),
    keeping the run's subjects in order (`members`) and the data they share, as
    `event_from_row` expands it."""
    if subjects is None:
        return [event_record(event) for event in events]
    rows: list[dict[str, Any]] = []
    for event, members in zip(events, subjects, strict=True):
        record = event_record(event)
        if len(members) > 1:
            record["subject"] = None
            record["members"] = {"subjects": members}
            record["size"] = len(members)
        rows.append(record)
    return rows


def _merge_member_data(data: dict[str, Any], row: dict[str, Any]) -> None:
    """A member's own data in a claim's or an ack's run (`members.data`, an array a key), after
    the run's shared keys, in the order its event's data has them: `job.started`'s attempt,
    `job.completed`'s duration, attempt and result (none when null). SQLite's select_events
    gives each as a column; PostgreSQL's merges them into `data` itself (jsonb's key order)."""
    for key in ("duration_ms", "attempt"):
        if (value := row.get(key)) is not None:
            data[key] = int(value)
    if (result := load(row.get("result"))) is not None:
        data["result"] = result


def event_from_row(row: dict[str, Any]) -> StoredEvent:
    """An event of select_events: a row's own, or a member of a block's row (its `position`
    there names it, its `priority`, when the block's differ, and its `episode_id`, a retried
    dead letter's, are in its data)."""
    data = load(row["data"])
    event_id = row["id"]
    if row["position"] is not None:
        event_id = block_event_id(event_id, row["position"])
        if row["priority"] is not None:
            data["priority"] = int(row["priority"])
        if row["episode_id"] is not None:
            data["episode_id"] = row["episode_id"]
        _merge_member_data(data, row)
    event = Event(
        type=row["type"],
        tenant_id=row["tenant_id"],
        queue=row["queue"],
        job_type=row["job_type"],
        subject=row["subject"],
        data=data,
    )
    return StoredEvent(id=event_id, sequence=row["sequence"], time=row["time"], event=event)


def replay_rule_parameters(rule: ReplayRule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "tenant_id": rule.tenant_id,
        "name": rule.name,
        "filter": dump(rule.filter),
        "delay_ms": rule.delay_ms,
        "max_replays": rule.max_replays,
        "enabled": rule.enabled,
        "replayed_total": rule.replayed_total,
        "created_at": rule.created_at,
        "updated_at": rule.updated_at,
    }


def replay_rule_from_row(row: dict[str, Any]) -> ReplayRule:
    from redrive.domain.replay import ReplayRule

    return ReplayRule(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        filter=load(row["filter"]),
        delay_ms=row["delay_ms"],
        max_replays=row["max_replays"],
        enabled=bool(row["enabled"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        replayed_total=row["replayed_total"],
    )
