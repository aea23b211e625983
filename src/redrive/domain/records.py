"""A job as a plain JSON-ready record and back, for snapshots that must round-trip exactly."""

from __future__ import annotations

import dataclasses
from typing import Any

from redrive.domain.job import Job
from redrive.domain.retry import RetryPolicy, parse_retry_policy


def retry_to_record(policy: RetryPolicy) -> dict[str, Any]:
    record = dataclasses.asdict(policy)
    record["non_retryable_errors"] = list(policy.non_retryable_errors)
    return record


def retry_from_record(record: dict[str, Any]) -> RetryPolicy:
    values = dict(record)
    values["non_retryable_errors"] = tuple(values.get("non_retryable_errors", ()))
    fields = {field.name for field in dataclasses.fields(RetryPolicy)}
    return RetryPolicy(**{key: value for key, value in values.items() if key in fields})


def job_to_record(job: Job) -> dict[str, Any]:
    record = {field.name: getattr(job, field.name) for field in dataclasses.fields(Job)}
    record["retry"] = retry_to_record(job.retry)
    return record


def job_from_record(record: dict[str, Any]) -> Job:
    values = dict(record)
    values["retry"] = retry_from_record(values.get("retry") or {})
    fields = {field.name for field in dataclasses.fields(Job)}
    return Job(**{key: value for key, value in values.items() if key in fields})


__all__ = ["job_from_record", "job_to_record", "parse_retry_policy", "retry_from_record"]
