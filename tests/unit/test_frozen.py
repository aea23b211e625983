"""Assembling frozen dataclasses: the same instance their constructor makes, without its cost."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from redrive.domain.frozen import Assembler
from redrive.domain.job import Job, assemble_job
from redrive.domain.retry import RetryPolicy

REQUIRED: dict[str, Any] = {"id": "j1", "tenant_id": "t", "type": "a.b", "queue": "q", "args": [1],
            "state": "available", "created_at": 5}  # fmt: skip


def test_an_assembled_job_is_the_job_the_constructor_makes() -> None:
    made, assembled = Job(**REQUIRED), assemble_job(**REQUIRED)
    assert assembled == made
    assert list(vars(assembled).items()) == list(vars(made).items())
    given: dict[str, Any] = {
        **REQUIRED,
        "priority": 3,
        "retry": RetryPolicy(max_attempts=9),
        "meta": {"k": 1},
    }
    assert assemble_job(**given) == Job(**given)


def test_each_assembled_job_gets_its_own_defaults_made_by_a_factory() -> None:
    first, second = assemble_job(**REQUIRED), assemble_job(**REQUIRED)
    assert first.errors == [] and first.errors is not second.errors
    assert first.meta is not second.meta


def test_an_assembled_job_is_frozen_and_replaceable() -> None:
    job = assemble_job(**REQUIRED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.state = "active"  # type: ignore[misc]
    assert dataclasses.replace(job, state="active").state == "active"


def test_missing_or_unknown_fields_are_refused() -> None:
    without_id = {key: value for key, value in REQUIRED.items() if key != "id"}
    with pytest.raises(TypeError, match="missing \\['id'\\]"):
        assemble_job(**without_id)
    with pytest.raises(TypeError, match="unknown \\['colour'\\]"):
        assemble_job(**REQUIRED, colour="red")


def test_a_class_with_post_init_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            assert self.value > 0

    with pytest.raises(TypeError, match="__post_init__"):
        Assembler(Checked)


def test_an_adopted_state_must_hold_every_field_and_no_other() -> None:
    state = assemble_job.blank()
    state.update(REQUIRED)
    made = {"meta": {}, "retry": RetryPolicy(), "options": {}, "extra": {}, "errors": []}
    assert assemble_job.adopt({**state, **made}) == Job(**REQUIRED)
    with pytest.raises(TypeError, match="colour"):
        assemble_job.adopt({**state, "colour": "red"})
    del state["id"]
    with pytest.raises(TypeError):
        assemble_job.adopt(state)
