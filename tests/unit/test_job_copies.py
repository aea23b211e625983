"""Unit tests for the hot path's job copies: `evolve` and `job_of` give what `replace` and the
constructor give, and refuse unknown or missing fields as they do."""

from __future__ import annotations

from dataclasses import asdict, fields, replace

import pytest

from redrive.domain.job import JOB_FIELDS, Job, evolve, job_of
from redrive.domain.retry import RetryPolicy

JOB = Job(
    id="019cb7f3-b800-7000-8000-000000000001", tenant_id="_default", type="email.send",
    queue="mail", args=[1, {"to": "ada"}], state="active", created_at=1, attempt=2,
    retry=RetryPolicy(max_attempts=5), lease_token="token", errors=[{"code": "x"}],
)  # fmt: skip


def test_evolve_equals_replace_and_leaves_the_original() -> None:
    changed = evolve(JOB, state="completed", completed_at=9, lease_token=None)
    assert changed == replace(JOB, state="completed", completed_at=9, lease_token=None)
    assert (JOB.state, JOB.lease_token, changed.args) == ("active", "token", JOB.args)
    with pytest.raises(AttributeError):  # still frozen
        changed.state = "active"  # type: ignore[misc]


def test_evolve_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="statee"):
        evolve(JOB, statee="completed")


def test_job_of_equals_the_constructor() -> None:
    values = {job_field.name: getattr(JOB, job_field.name) for job_field in fields(Job)}
    built = job_of(values)
    assert built == JOB
    assert asdict(built) == asdict(JOB)
    assert built.max_attempts == 5


def test_job_of_refuses_missing_and_unknown_fields() -> None:
    values = {name: getattr(JOB, name) for name in JOB_FIELDS}
    del values["queue"]
    with pytest.raises(TypeError, match="queue"):
        job_of(values)
    with pytest.raises(TypeError, match="colour"):
        job_of({**values, "queue": "mail", "colour": "red"})
