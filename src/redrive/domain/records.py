"""Records: a job as plain JSON-ready data and back; typed queue, worker and cron records."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.job import Job
from redrive.domain.retry import RetryPolicy, parse_retry_policy

# Read once: these run for every job written or read on the hot path.
RETRY_FIELDS = tuple(field.name for field in dataclasses.fields(RetryPolicy))
JOB_FIELDS = tuple(field.name for field in dataclasses.fields(Job))
assemble_retry = Assembler(RetryPolicy)


def field_default(field: dataclasses.Field[Any]) -> Any:
    """A field's default (a fresh one of a factory's), or MISSING."""
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


# Job's fields that have a default, with it.
JOB_DEFAULTS = {
    field.name: default
    for field in dataclasses.fields(Job)
    if (default := field_default(field)) is not dataclasses.MISSING
}
# The same split for `sparse_job_record`, which reads every field of every dead letter's job: the
# fields whose default is None (a None there is left out, with no lookup or comparison), and the
# others' defaults with their types (6.2 -> 4.0 us a failed job's snapshot, the policy's part
# included). Not the policy's: it is written sparse on its own, so comparing it whole first
# (RetryPolicy.__eq__, ~0.8 us) told nothing.
NONE_DEFAULT_FIELDS = tuple(name for name, value in JOB_DEFAULTS.items() if value is None)
JOB_TYPED_DEFAULTS = {
    name: (type(value), value)
    for name, value in JOB_DEFAULTS.items()
    if value is not None and name != "retry"
}
TYPED_DEFAULTS = tuple((name, kind, value) for name, (kind, value) in JOB_TYPED_DEFAULTS.items())


@frozen_dataclass
class QueueRecord:
    """A tenant's queue as the server keeps it. Queues are keyed by (tenant_id, name): two
    tenants' queues of one name are two queues, each paused or resumed on its own."""

    tenant_id: str
    name: str
    paused: bool
    created_at: int
    paused_at: int | None = None
    resumed_at: int | None = None


@frozen_dataclass
class WorkerRecord:
    """A worker as the server last saw it, keyed by (tenant_id, id): its state, the directive
    waiting for it (None for none), the queues it fetches from and the jobs it holds."""

    tenant_id: str
    id: str
    state: str
    directive: str | None
    queues: tuple[str, ...]
    active_jobs: int
    first_seen_at: int
    last_heartbeat_at: int


@frozen_dataclass
class CronRecord:
    """A registered cron entry, keyed by (tenant_id, name): what it enqueues and when, and how
    its runs have gone (the last run, the job it made, how many runs)."""

    tenant_id: str
    name: str
    expression: str
    timezone: str
    overlap_policy: str
    enabled: bool
    job_template: dict[str, Any]
    description: str | None
    next_run_at: int | None
    last_run_at: int | None
    last_job_id: str | None
    run_count: int
    created_at: int


def retry_to_record(policy: RetryPolicy) -> dict[str, Any]:
    record = {name: getattr(policy, name) for name in RETRY_FIELDS}
    record["non_retryable_errors"] = list(policy.non_retryable_errors)
    record["extra"] = dict(policy.extra)
    return record


# The policy of a job whose envelope's record of it is empty (every field its default).
DEFAULT_RETRY = RetryPolicy()
# Every field of a policy as RetryPolicy declares its default, and with its type.
RETRY_DEFAULTS = retry_to_record(RetryPolicy())
RETRY_TYPED_DEFAULTS = tuple((name, type(value), value) for name, value in RETRY_DEFAULTS.items())
# The fields retry_to_record copies into a list and a dict.
RETRY_COPIED = {"non_retryable_errors": list, "extra": dict}
# `sparse_retry_record` leaves those out when empty: right while their defaults are empty.
if any(RETRY_DEFAULTS[name] for name in RETRY_COPIED):
    raise RuntimeError("sparse_retry_record expects the copied fields' defaults to be empty")


def sparse_retry_record(policy: RetryPolicy) -> dict[str, Any]:
    """`retry_to_record` without the fields equal (in value and type) to RetryPolicy's defaults,
    which `retry_from_record` fills back in: the jobs table's envelopes hold these (a batch's
    full policy in every row was a sixth of the backend's CPU per job of an enqueue of 1,000).
    Those defaults are thus part of the stored form: changing one needs a migration writing the
    old value into the envelopes that leave it out. Worked out once per policy and kept on it
    (frozen: nothing changes a policy), a fresh copy given each call: the jobs of a queue share
    one policy (`retry_from_record`), and every dead letter's snapshot writes it (~9k
    instructions a dead letter)."""
    written: dict[str, Any] | None = policy.__dict__.get("_sparse")
    if written is None:
        written = _sparse_retry_record(policy)
        policy.__dict__["_sparse"] = written
    return written.copy()


def _sparse_retry_record(policy: RetryPolicy) -> dict[str, Any]:
    state = vars(policy)
    record = {}
    for name, kind, default in RETRY_TYPED_DEFAULTS:
        value = state[name]
        copy = RETRY_COPIED.get(name)
        if copy is not None:
            # Copied only when kept: its default is empty (checked at import, above), so an
            # empty one is left out without a list or a dict made and compared.
            if value:
                record[name] = copy(value)
        elif type(value) is not kind or value != default:
            record[name] = value
    return record


# Policies read lately, by their record's items and those items' types (so that 1, 1.0 and True
# are three records; the only float field, backoff_coefficient, is at least 1.0, so never the
# -0.0 that equals 0.0): the jobs of a queue mostly carry one policy, each in its own envelope's
# JSON, and every claimed job reads its own (~9k instructions a job of a policy that is not
# all defaults). One frozen instance serves them, as DEFAULT_RETRY serves the jobs without one.
# A record holding a list or an object (non_retryable_errors, extra) is read every time.
POLICIES_REMEMBERED = 256


def retry_from_record(record: dict[str, Any]) -> RetryPolicy:
    """Assembled (no frozen `__init__` and its call per field): every claimed or locked job
    reads one. A field the record leaves out takes RetryPolicy's default. Filled into a blank
    state and adopted, without `__call__`'s keyword arguments and checks (a job's all-default
    policy, `{}`: 1.3 -> 0.5 us). An empty record is the default policy, one instance shared
    (frozen, and its `extra` only ever copied, never written); a record read lately is its
    policy then, shared the same way (`POLICIES_REMEMBERED`)."""
    if not record:
        return DEFAULT_RETRY
    try:
        return _remembered_policy(tuple(record.items()), tuple(map(type, record.values())))
    except TypeError:  # a list or an object in it (unhashable): not kept
        return _retry_from_record(record)


@lru_cache(maxsize=POLICIES_REMEMBERED)
def _remembered_policy(items: tuple[tuple[str, Any], ...], types: tuple[type, ...]) -> RetryPolicy:
    """The policy of the record `items` make (`types` tells apart records whose values compare
    equal but differ in type: 1, 1.0, True)."""
    return _retry_from_record(dict(items))


def _retry_from_record(record: dict[str, Any]) -> RetryPolicy:
    state = assemble_retry.blank()
    names = assemble_retry.names
    for key, value in record.items():
        if key in names:
            state[key] = value
    state["non_retryable_errors"] = tuple(state["non_retryable_errors"])
    if "extra" not in record:
        state["extra"] = {}
    return assemble_retry.adopt(state)


def job_to_record(job: Job) -> dict[str, Any]:
    # A job's __dict__ holds its fields, in order (frozen, made by its __init__ or assembled):
    # one copy instead of a getattr per field.
    record = vars(job).copy()
    record["retry"] = retry_to_record(job.retry)
    return record


def sparse_job_record(job: Job) -> dict[str, Any]:
    """`job_to_record` as a dead letter's snapshot keeps it: without the fields equal (in value
    and type) to Job's defaults, the retry policy sparse (`sparse_retry_record`, left out when
    it is all defaults), and without `error` when it is the last of `errors` (written as null
    when there is none but `errors` is not empty). `job_from_record` fills all of them back in
    and reads full records as before. A failed job's snapshot was half nulls, defaults and its
    last error twice: 1.9 -> 1.0 kB for the benchmark's (a traceback of four lines), written
    with every dead letter. Job's defaults and the `error` rule are thus part of the stored form."""
    # The fields left out are those null by default and null, then those at a typed default:
    # the first deleted from a copy of the job's fields (a step for each of the 22 fields null
    # by default, not for each of the 38 with a set lookup: 1.8 -> 1.1 us), the others by
    # name (every dead letter's snapshot: ~31k -> ~24k instructions).
    record = vars(job).copy()
    for name in NONE_DEFAULT_FIELDS:
        if record[name] is None:
            del record[name]
    for name, kind, default in TYPED_DEFAULTS:
        if type(value := record[name]) is kind and value == default:
            del record[name]
    retry = sparse_retry_record(job.retry)
    if retry:
        record["retry"] = retry
    else:
        record.pop("retry", None)
    errors = job.errors
    if errors:
        # A failed job's error is its last (the same object): no comparison of the two then.
        if (error := job.error) is errors[-1] or error == errors[-1]:
            record.pop("error", None)
        elif job.error is None:
            record["error"] = None
    return record


def job_from_record(record: dict[str, Any]) -> Job:
    """A job from `job_to_record`'s record or `sparse_job_record`'s (a field left out takes
    Job's default; `error` left out is the last of `errors`, or None)."""
    values = {key: value for key, value in record.items() if key in JOB_FIELDS}
    values["retry"] = retry_from_record(values.get("retry") or {})
    if "error" not in values:
        errors = values.get("errors")
        last = errors[-1] if errors else None
        values["error"] = dict(last) if isinstance(last, dict) else last
    return Job(**values)


__all__ = [
    "CronRecord",
    "QueueRecord",
    "WorkerRecord",
    "job_from_record",
    "job_to_record",
    "parse_retry_policy",
    "retry_from_record",
    "sparse_job_record",
]
