"""Unit tests for the documents of many jobs: the same as each job's own document, the retry
policy they share written once."""

from __future__ import annotations

from redrive.api.serialise import job_document, job_documents
from redrive.domain.job import Job
from redrive.domain.retry import RetryPolicy

SHARED = RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")
OWN = RetryPolicy(max_attempts=7, initial_interval_ms=5_000)


def job(number: int, retry: RetryPolicy) -> Job:
    return Job(
        id=f"019cb7f3-b800-7000-8000-{number:012x}", tenant_id="_default", type="email.send",
        queue="mail", args=[number], state="available", created_at=1, enqueued_at=1, retry=retry,
        options={"tags": ["a"]},
    )  # fmt: skip


def test_job_documents_equal_each_jobs_own_document() -> None:
    jobs = [job(1, SHARED), job(2, OWN), job(3, SHARED), job(4, RetryPolicy())]
    documents = job_documents(jobs)
    assert documents == [job_document(each) for each in jobs]
    assert [document["retry"]["max_attempts"] for document in documents] == [1, 7, 1, 3]


def test_job_documents_write_a_shared_policy_once() -> None:
    first, second = job_documents([job(1, SHARED), job(2, SHARED)])
    assert first["retry"] is second["retry"]
    assert job_documents([]) == []
