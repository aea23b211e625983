"""Unit tests for the hot path's job copies: `evolve` and `assemble_job.adopt` give what
`replace` and the constructor give, and refuse unknown or missing fields."""

from __future__ import annotations

from dataclasses import asdict, fields, replace

import pytest

from redrive.domain.job import JOB_FIELDS, Job, assemble_job, evolve
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


def test_an_adopted_state_equals_the_constructor() -> None:
    values = {job_field.name: getattr(JOB, job_field.name) for job_field in fields(Job)}
    built = assemble_job.adopt(values)
    assert built == JOB
    assert asdict(built) == asdict(JOB)
    assert built.max_attempts == 5


def test_adopting_refuses_a_missing_or_unknown_field() -> None:
    values = {name: getattr(JOB, name) for name in JOB_FIELDS}
    del values["queue"]
    with pytest.raises(TypeError):
        assemble_job.adopt(dict(values))
    with pytest.raises(TypeError, match="colour"):
        assemble_job.adopt({**values, "queue": "mail", "colour": "red"})
