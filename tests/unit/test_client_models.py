"""The client's typed results: a Job read from a document is the one its constructor makes."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from redrive.client.models import Job

ACTIVE: dict[str, Any] = {
    "id": "019a0000-0000-7000-8000-000000000001",
    "type": "email.send",
    "queue": "mail",
    "state": "active",
    "args": ["ada@example.com"],
    "meta": {"trace": "t1"},
    "attempt": 2,
    "max_attempts": 5,
    "priority": 3,
    "errors": [{"code": "smtp", "message": "refused"}, "not an object"],
    "error": {"code": "smtp"},
    "result": {"sent": False},
    "worker_id": "w1",
    "lease_token": 7,
    "created_at": "2026-11-25T04:00:00.000Z",
    "enqueued_at": "2026-11-25T04:00:00.000Z",
    "started_at": "2026-11-25T04:00:01.000Z",
}


@pytest.mark.parametrize("document", [ACTIVE, {}, {"job_id": "j", "attempt": True}])
def test_from_document_equals_the_constructor(document: dict[str, Any]) -> None:
    job = Job.from_document(document)
    built = Job(**{field.name: getattr(job, field.name) for field in dataclasses.fields(Job)})
    assert job == built
    assert job.raw is document
    assert job.errors == ([{"code": "smtp", "message": "refused"}] if document is ACTIVE else [])
    assert job.lease_token == ("7" if document is ACTIVE else None)
    assert job.queue == ("mail" if document is ACTIVE else "default")
    assert job.attempt == (2 if document is ACTIVE else 0)
    assert job.id == str(document.get("id") or document.get("job_id") or "")


def test_a_job_from_a_document_stays_frozen() -> None:
    job = Job.from_document(ACTIVE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.state = "completed"  # type: ignore[misc]
    assert dataclasses.replace(job, state="completed").state == "completed"
    assert "raw" not in repr(job)


@pytest.mark.parametrize("document", [ACTIVE, {}, {"job_id": "j", "attempt": True}])
def test_a_job_reading_its_document_is_the_one_from_document_makes(
    document: dict[str, Any],
) -> None:
    eager = Job.from_document(document)
    job = Job.reading(document)
    assert vars(job) == {"raw": document}  # nothing read yet
    assert job.state == eager.state
    assert vars(job) == vars(eager) and list(vars(job)) == list(vars(eager))
    assert job == eager and repr(job) == repr(eager)
    assert job.raw is document
    for name in ("id", "args", "errors", "discarded_at"):  # a first read of a field reads all
        first = Job.reading(document)
        getattr(first, name)
        assert vars(first) == vars(eager)


def test_a_job_reading_its_document_compares_copies_and_stays_frozen_unread() -> None:
    assert Job.reading(ACTIVE) == Job.from_document(ACTIVE)  # equality reads them
    assert repr(Job.reading(ACTIVE)) == repr(Job.from_document(ACTIVE))
    assert copy.copy(Job.reading(ACTIVE)) == Job.from_document(ACTIVE)
    assert pickle.loads(pickle.dumps(Job.reading(ACTIVE))) == Job.from_document(ACTIVE)
    assert dataclasses.replace(Job.reading(ACTIVE), state="completed").attempt == 2
    job = Job.reading(ACTIVE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.state = "completed"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no attribute 'status'"):
        job.status  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(job, "status")
    assert job.raw is ACTIVE
    assert vars(job) == {"raw": ACTIVE}  # `raw`, or a name that is no field, reads nothing


def test_a_job_read_meanwhile_answers_from_its_fields() -> None:
    """A thread that found a field missing while another read the job gets the field read."""
    job = Job.reading(ACTIVE)
    missing = type(job).__getattr__  # type: ignore[attr-defined]  # what Python calls then
    assert missing(job, "state") == "active"  # reads them all
    fields = vars(job)
    assert missing(job, "attempt") == 2 and vars(job) is fields  # read, not read again
