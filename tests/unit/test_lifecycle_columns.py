"""Transitions change only a job's lifecycle: the columns update_jobs writes, nothing else."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from redrive.domain import job as states
from redrive.domain.job import Job
from redrive.domain.lifecycle import (
    acknowledge,
    activate,
    cancel,
    expire,
    extend_lease,
    fail,
    reap,
)
from redrive.domain.retry import RetryPolicy
from redrive.store.codec import LIFECYCLE_COLUMNS
from tests.unit.test_lifecycle import NOW, handler_error, make_job

LAST_TRY = RetryPolicy(max_attempts=1, jitter=False, on_exhaustion="dead_letter")
TRANSITIONS: dict[str, Callable[[], tuple[Job, Job]]] = {
    "ack": lambda: (job := make_job(), acknowledge(job, NOW, {"ok": True})),
    "nack, retry": lambda: (job := make_job(), fail(job, NOW, handler_error(), 1.0).job),
    "nack, dead": lambda: (
        job := make_job(retry=LAST_TRY),
        fail(job, NOW, handler_error(), 1.0).job,
    ),
    "nack, requeue": lambda: (
        job := make_job(),
        fail(job, NOW, handler_error(), 1.0, requeue=True).job,
    ),
    "reap": lambda: (job := make_job(lease_expires_at=NOW - 1), reap(job, NOW, 1.0).job),
    "cancel": lambda: (job := make_job(state=states.AVAILABLE), cancel(job, NOW)),
    "activate": lambda: (job := make_job(state=states.PENDING), activate(job, NOW)),
    "expire": lambda: (job := make_job(state=states.AVAILABLE, expires_at=NOW), expire(job, NOW)),
    "heartbeat": lambda: (job := make_job(), extend_lease(job, NOW, 60_000)),
}


@pytest.mark.parametrize("name", list(TRANSITIONS))
def test_a_transition_changes_only_lifecycle_columns(name: str) -> None:
    before, after = TRANSITIONS[name]()
    changed = {
        field.name
        for field in dataclasses.fields(Job)
        if getattr(before, field.name) != getattr(after, field.name)
    }
    assert changed, "the transition changed nothing"
    assert changed <= set(LIFECYCLE_COLUMNS), changed - set(LIFECYCLE_COLUMNS)
