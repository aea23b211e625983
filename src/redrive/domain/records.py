"""A job as a plain JSON-ready record and back, for snapshots that must round-trip exactly."""

from __future__ import annotations

import dataclasses
from typing import Any

from redrive.domain.job import Job
from redrive.domain.retry import RetryPolicy, parse_retry_policy

# Read once: these run for every job written or read on the hot path.
RETRY_FIELDS = tuple(field.name for field in dataclasses.fields(RetryPolicy))
JOB_FIELDS = tuple(field.name for field in dataclasses.fields(Job))


def retry_to_record(policy: RetryPolicy) -> dict[str, Any]:
    record = {name: getattr(policy, name) for name in RETRY_FIELDS}
    record["non_retryable_errors"] = list(policy.non_retryable_errors)
    record["extra"] = dict(policy.extra)
    return record


def retry_from_record(record: dict[str, Any]) -> RetryPolicy:
    values = {key: value for key, value in record.items() if key in RETRY_FIELDS}
    values["non_retryable_errors"] = tuple(values.get("non_retryable_errors", ()))
    return RetryPolicy(**values)


def job_to_record(job: Job) -> dict[str, Any]:
    record = {name: getattr(job, name) for name in JOB_FIELDS}
    record["retry"] = retry_to_record(job.retry)
    return record


def job_from_record(record: dict[str, Any]) -> Job:
    values = {key: value for key, value in record.items() if key in JOB_FIELDS}
    values["retry"] = retry_from_record(values.get("retry") or {})
    return Job(**values)


__all__ = ["job_from_record", "job_to_record", "parse_retry_policy", "retry_from_record"]
