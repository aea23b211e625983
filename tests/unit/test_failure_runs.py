"""A nack batch's failure events built as runs (`batch_failure_runs`): the runs `alike_runs` finds
in every job's `failure_events`, first events before second ones, each event made once a run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from redrive.domain import events
from redrive.domain import job as states
from redrive.domain.events import (
    Event,
    EventRun,
    batch_failure_runs,
    event_runs,
    failure_events,
)
from redrive.domain.identifiers import SERIES_COUNTER
from redrive.domain.job import Job
from redrive.domain.lifecycle import Failure, error_record, fail
from redrive.domain.retry import RetryPolicy

NOW = 1_772_359_200_000
DEAD = "max_attempts_exceeded"
POLICY = RetryPolicy(jitter=False, on_exhaustion="dead_letter", max_attempts=3)
BOOM = Failure(code="handler_error", type="Boom", message="down")


def active(index: int, **changes: Any) -> Job:
    job = Job(
        id=f"019cb7f3-b800-7000-8000-{index:012d}", tenant_id="_default", type="t",
        queue="q", args=[index], state=states.ACTIVE, created_at=NOW - 60_000, attempt=1,
        retry=POLICY, enqueued_at=NOW - 60_000, started_at=NOW - 5_000, worker_id="w1",
        lease_token=f"lease-{index}", lease_expires_at=NOW + 30_000,
    )  # fmt: skip
    return replace(job, **changes)


def failed(job: Job, failure: Failure = BOOM, **options: Any) -> tuple[Job, str | None]:
    outcome = fail(job, NOW, failure, 1.0, **options)
    return outcome.job, outcome.dead_letter_reason


def step_major_runs(failures: list[tuple[Job, str | None]]) -> list[EventRun]:
    """The runs of every job's events, the first of every job, then the second, and so on: the
    batch's events as they were made and joined before they were built as runs."""
    per_job = [failure_events(job, reason) for job, reason in failures]
    steps = max(map(len, per_job), default=0)
    flat: list[Event] = [
        events[step] for step in range(steps) for events in per_job if step < len(events)
    ]
    return event_runs(flat)


def test_alike_failures_are_a_run_a_kind_made_from_the_first_job() -> None:
    record = error_record(BOOM, 3, NOW)
    batch = [failed(active(index, attempt=3), record=record) for index in range(5)]
    runs = batch_failure_runs(batch)
    assert [run.event.type for run in runs] == ["job.failed", "job.discarded", "dead_letter.added"]
    assert all(run.subjects == [job.id for job, _ in batch] for run in runs)
    assert [run.event for run in runs] == failure_events(*batch[0])
    assert runs == step_major_runs(batch)


def test_a_mixed_batch_is_the_runs_of_its_jobs_events_taken_in_steps() -> None:
    """Retries (each its own next attempt, or the same), dead letters, a plain discard, a job
    handed back, an equal error that is not the same record, another queue, tenant, attempt
    or message: the same runs, in the same order, as the events themselves give."""
    plain = replace(POLICY, on_exhaustion="discard")
    other = Failure(code="handler_error", type="Boom", message="other")
    shared = error_record(BOOM, 1, NOW)
    batch = [
        failed(active(0)),
        failed(active(1), record=shared),
        failed(active(2), record=dict(shared)),  # equal, not the same object
        failed(active(3), other),
        failed(active(4, attempt=3)),
        failed(active(5, attempt=3)),
        failed(active(6, attempt=3, retry=plain)),
        failed(active(7, attempt=3, queue="elsewhere")),
        failed(active(8, attempt=3, tenant_id="acme")),
        failed(active(9), requeue=True),
        failed(active(10, attempt=2)),
        failed(active(11, attempt=2)),
    ]
    # Two retries due at different times are unlike in `job.retrying` alone.
    later = replace(batch[1][0], next_attempt_at=(batch[1][0].next_attempt_at or 0) + 1)
    batch.insert(2, (later, None))
    runs = batch_failure_runs(batch)
    assert runs == step_major_runs(batch)
    assert [len(run.subjects) for run in runs] != [1] * len(runs)  # some joined
    assert sum(len(run.subjects) for run in runs) == sum(
        len(failure_events(job, reason)) for job, reason in batch
    )


def test_a_job_alike_the_one_before_it_joins_its_runs_with_no_data_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The event data of a batch that failed alike is made for each run's first job only: the
    others are found alike their predecessor once each, not compared kind by kind."""
    made: list[tuple[Any, ...]] = []
    alike_data = events._alike_data

    def counted(*given: Any) -> tuple[Any, ...]:
        made.append(given)
        return alike_data(*given)

    monkeypatch.setattr(events, "_alike_data", counted)
    record = error_record(BOOM, 3, NOW)
    batch = [failed(active(index, attempt=3), record=record) for index in range(50)]
    runs = batch_failure_runs(batch)
    assert runs == step_major_runs(batch)
    assert [len(run.subjects) for run in runs] == [50, 50, 50]
    assert len(made) == 3  # the first job's, a kind each


def test_a_run_holds_at_most_a_block() -> None:
    record = error_record(BOOM, 1, NOW)
    batch = [failed(active(index), record=record) for index in range(len(SERIES_COUNTER) + 1)]
    runs = batch_failure_runs(batch)
    assert [len(run.subjects) for run in runs] == [len(SERIES_COUNTER), 1] * 2
    assert runs == step_major_runs(batch)


def test_a_failure_keeps_the_error_record_it_is_given() -> None:
    record = error_record(BOOM, 1, NOW)
    job, _ = failed(active(0), record=record)
    assert job.error is record and job.errors[-1] is record
    assert failed(active(0))[0].error == record
