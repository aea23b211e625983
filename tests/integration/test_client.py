"""The async Python client against the real app (httpx ASGI transport) on SQLite and PostgreSQL:
the worker protocol, producing, the dead-letter queue, rules, retention and typed errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.client import (
    Client,
    ConflictError,
    DeadLetterFilter,
    DuplicateError,
    InvalidRequestError,
    JobSpec,
    NotFoundError,
    RetryPolicy,
    UnreachableError,
)
from redrive.client.models import Job
from redrive.service.facade import Service

pytestmark = pytest.mark.anyio
DEAD_LETTER_POLICY = RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")


@pytest.fixture
async def redrive(service: Service) -> AsyncIterator[Client]:
    transport = httpx.ASGITransport(app=create_app(service))
    async with Client("http://redrive.test", transport=transport) as client:
        yield client


async def kill(
    client: Client, job_type: str = "email.send", queue: str = "mail",
    error_type: str = "SmtpError", args: list[Any] | None = None,
) -> str:  # fmt: skip
    """Enqueue a job that dead-letters on its first failure, fetch it and fail it."""
    job = await client.enqueue(job_type, args or ["a@b.c"], queue=queue, retry=DEAD_LETTER_POLICY)
    [claimed] = await client.fetch([queue], worker_id="w1")
    assert claimed.id == job.id
    error = {"code": "handler_error", "message": f"{error_type} went wrong", "type": error_type,
             "details": {"backtrace": ["line 1", "line 2"]}}  # fmt: skip
    outcome = await client.nack(job.id, error=error, worker_id="w1")
    assert outcome.state == "discarded" and outcome.dead_letter
    return job.id


async def test_round_trip_into_the_dead_letter_queue_and_back_out(redrive: Client) -> None:
    job = await redrive.enqueue(
        "email.send", ["a@b.c"], queue="mail", meta={"trace": "t1"}, priority=5,
        retry={"max_attempts": 2, "on_exhaustion": "dead_letter"}, tags=["welcome"],
    )  # fmt: skip
    assert (job.state, job.attempt, job.max_attempts, job.priority) == ("available", 0, 2, 5)
    assert job.raw["tags"] == ["welcome"]

    [first] = await redrive.fetch(["mail"], worker_id="w1", visibility_timeout_ms=60_000)
    assert first.state == "active" and first.attempt == 1 and first.lease_token
    beat = await redrive.heartbeat(worker_id="w1", job_ids=[first.id, "missing"])
    assert beat.state == "running" and beat.extended == [first.id] and beat.lost == ["missing"]
    retryable = await redrive.nack(
        first.id, error={"code": "handler_error", "message": "smtp refused", "type": "Smtp"},
        worker_id="w1", lease_token=first.lease_token,
    )  # fmt: skip
    assert retryable.state == "retryable" and retryable.retry_delay_ms is not None

    requeued = await redrive.retry_dead_letters(DeadLetterFilter(queue="mail"), dry_run=True)
    assert requeued.matched == 0
    job_id = await kill(redrive, queue="mail2")
    dead = await redrive.get_dead_letter(job_id)
    assert dead.status == "dead" and dead.error_type == "SmtpError" and dead.queue == "mail2"
    assert [error["type"] for error in dead.errors] == ["SmtpError"]
    assert [episode.status for episode in dead.episodes] == ["dead"]
    assert (await redrive.get_job(job_id)).state == "discarded"

    revived = await redrive.retry_dead_letter(
        job_id, queue="mail-retry", priority=9, meta={"fixed": "yes"}, args=["c@d.e"],
        retry=RetryPolicy(max_attempts=5),
    )  # fmt: skip
    assert (revived.state, revived.queue, revived.priority, revived.attempt) == (
        "available", "mail-retry", 9, 0,
    )  # fmt: skip
    assert revived.args == ["c@d.e"] and revived.meta["fixed"] == "yes"
    [again] = await redrive.fetch(["mail-retry"])
    done = await redrive.ack(again.id, result={"sent": True})
    assert done.state == "completed" and done.job is not None and done.job.result == {"sent": True}
    history = await redrive.dead_letters(DeadLetterFilter(status="retried"))
    assert [item.id for item in history.items] == [job_id]
    with pytest.raises(NotFoundError):
        await redrive.get_dead_letter(job_id)


async def test_list_filter_and_iterate_follow_cursors(redrive: Client) -> None:
    mail = [await kill(redrive, queue="mail", error_type="SmtpError") for _ in range(3)]
    billing = [
        await kill(redrive, "billing.charge", "billing", "CardDeclined", [{"customer": "c_1"}])
        for _ in range(2)
    ]
    page = await redrive.dead_letters(limit=2)
    assert page.total == 5 and len(page.items) == 2 and page.has_more and page.next_cursor
    following = await redrive.dead_letters(limit=2, cursor=page.next_cursor)
    assert not {item.id for item in page.items} & {item.id for item in following.items}

    everything = [dead.id async for dead in redrive.iter_dead_letters(page_size=2)]
    assert sorted(everything) == sorted(mail + billing) and len(set(everything)) == 5
    by_queue = await redrive.dead_letters(DeadLetterFilter(queue="billing"))
    assert sorted(item.id for item in by_queue.items) == sorted(billing)
    by_error = await redrive.dead_letters({"error_type": "SmtpError"})
    assert by_error.total == 3
    by_args = await redrive.dead_letters(DeadLetterFilter(args_match='$.customer == "c_1"'))
    assert by_args.total == 2
    by_prefix = [d.id async for d in redrive.iter_dead_letters(DeadLetterFilter(type="billing*"))]
    assert sorted(by_prefix) == sorted(billing)

    stats = await redrive.dead_letter_stats()
    assert stats.total == 5 and stats.by_queue == {"billing": 2, "mail": 3}
    assert stats.by_error_type == {"CardDeclined": 2, "SmtpError": 3}


async def test_bulk_retry_and_purge_dry_run_first(redrive: Client) -> None:
    mail = [await kill(redrive, queue="mail") for _ in range(3)]
    other = [await kill(redrive, "report.build", "reports", "Timeout") for _ in range(2)]
    for incident in (await redrive.incidents()).items:
        await redrive.record_root_cause(incident.id, "contract", "a bad release", "PR #1")

    preview = await redrive.retry_dead_letters(DeadLetterFilter(queue="mail"), dry_run=True)
    assert preview.dry_run and preview.matched == 3 and sorted(preview.sample) == sorted(mail)
    assert (await redrive.dead_letter_stats()).total == 5
    retried = await redrive.retry_dead_letters(DeadLetterFilter(queue="mail"))
    assert not retried.dry_run and retried.succeeded == 3
    assert {job.state for job in [await redrive.get_job(i) for i in mail]} == {"available"}

    purge_preview = await redrive.purge_dead_letters(dry_run=True)
    assert purge_preview.matched == 2 and (await redrive.dead_letter_stats()).total == 2
    await redrive.delete_dead_letter(other[0])
    purged = await redrive.purge_dead_letters({"queue": "reports"})
    assert purged.succeeded == 1 and (await redrive.dead_letter_stats()).total == 0
    with pytest.raises(NotFoundError):
        await redrive.delete_dead_letter(other[0])


async def test_replay_rules_and_retention_policies(redrive: Client) -> None:
    rule = await redrive.add_replay_rule(
        "smtp-later", DeadLetterFilter(error_type="SmtpError"), delay="PT5M", max_replays=2
    )
    assert (rule.name, rule.delay, rule.max_replays, rule.enabled) == (
        "smtp-later",
        "PT300S",
        2,
        True,
    )
    assert rule.filter == {"error_type": "SmtpError"}
    assert (await redrive.disable_replay_rule("smtp-later")).enabled is False
    assert (await redrive.enable_replay_rule(rule.id)).enabled is True
    changed = await redrive.update_replay_rule(rule.id, max_replays=4)
    assert changed.max_replays == 4 and [r.name for r in await redrive.replay_rules()] == [
        "smtp-later"
    ]
    assert (await redrive.get_replay_rule("smtp-later")).id == rule.id
    await redrive.delete_replay_rule("smtp-later")
    assert await redrive.replay_rules() == []
    with pytest.raises(InvalidRequestError):
        await redrive.add_replay_rule("no-filter", {})

    policies = await redrive.retention_policies()
    assert policies.global_policy.max_age == "P180D" and policies.queues == []
    policy = await redrive.set_retention_policy("billing", max_age="P365D", max_count=50)
    assert (policy.queue, policy.scope, policy.max_age, policy.max_count) == (
        "billing", "queue", "P365D", 50,
    )  # fmt: skip
    assert (await redrive.retention_policy("billing")).max_age == "P365D"
    assert (await redrive.retention_policy("other")).scope == "global"
    await redrive.unset_retention_policy("billing")
    assert (await redrive.retention_policies()).queues == []
    with pytest.raises(NotFoundError):
        await redrive.unset_retention_policy("billing")
    with pytest.raises(InvalidRequestError) as invalid:
        await redrive.set_retention_policy(max_age="soon")
    assert invalid.value.status in (400, 422) and invalid.value.details.get("field")
    report = await redrive.prune()
    assert report.deleted == 0 and await redrive.archives() == []


async def test_producing_options_batches_queues_and_server_documents(redrive: Client) -> None:
    later = await redrive.enqueue("report.build", delay=60, expires_at="2099-12-31T23:59:59Z")
    assert later.state == "scheduled" and later.raw["expires_at"] == "2099-12-31T23:59:59Z"
    held = await redrive.enqueue("report.build", pending=True, timeout_ms=5000, extra={"x_k": 1})
    assert held.state == "pending" and held.raw["x_k"] == 1 and held.raw["timeout_ms"] == 5000
    batch = await redrive.enqueue_many(
        [JobSpec("email.send", ["a"], queue="bulk"), {"type": "email.send", "args": ["b"]}]
    )
    assert [job.queue for job in batch] == ["bulk", "default"]
    # Made from the minimal answer: the same fields as the whole document, a shorter `raw`.
    for made in batch:
        whole = await redrive.get_job(made.id)
        assert replace(made, raw={}) == replace(whole, raw={}) and "retry" not in made.raw
    cancelled = await redrive.cancel(later.id)
    assert cancelled.state == "cancelled"

    paused = await redrive.pause_queue("bulk")
    assert paused.paused and await redrive.fetch(["bulk"]) == []
    assert (await redrive.resume_queue("bulk")).paused is False
    assert "bulk" in [queue.name for queue in await redrive.queues()]
    stats = await redrive.queue_stats("bulk")
    assert stats.name == "bulk" and stats.counts.get("available") == 1
    assert (await redrive.manifest())["implementation"]["name"] == "redrive"
    assert (await redrive.health())["status"] == "ok"


async def test_enqueued_jobs_read_their_answer_when_first_asked(redrive: Client) -> None:
    """`enqueue` and `enqueue_many` answer jobs that read their fields from the server's
    document when one is first asked for: then they are what the document makes, and what
    `get_job` reads (the batch's from its minimal answer)."""
    job = await redrive.enqueue("email.send", ["a@b.c"], queue="mail", meta={"k": 1}, priority=4)
    assert vars(job) == {"raw": job.raw} and job.raw["type"] == "email.send"
    assert (job.type, job.queue, job.args, job.meta, job.priority, job.max_attempts) == (
        "email.send", "mail", ["a@b.c"], {"k": 1}, 4, 3,
    )  # fmt: skip
    assert job == Job.from_document(job.raw) == await redrive.get_job(job.id)
    batch = await redrive.enqueue_many([JobSpec("email.send", ["b"]), JobSpec("sms.send", [])])
    assert all(vars(made) == {"raw": made.raw} for made in batch)
    assert [made.type for made in batch] == ["email.send", "sms.send"]
    for made in batch:
        assert made == Job.from_document(made.raw)
        whole = await redrive.get_job(made.id)
        assert replace(made, raw={}) == replace(whole, raw={})


async def test_errors_are_typed(redrive: Client) -> None:
    with pytest.raises(NotFoundError) as missing:
        await redrive.get_job("no-such-job")
    assert (missing.value.code, missing.value.status) == ("not_found", 404)
    job = await redrive.enqueue("email.send", ["a"])
    await redrive.cancel(job.id)
    with pytest.raises(ConflictError) as conflict:
        await redrive.cancel(job.id)
    assert (conflict.value.code, conflict.value.status) == ("conflict", 409)
    with pytest.raises(DuplicateError) as duplicate:
        await redrive.enqueue("email.send", id=job.id)
    assert duplicate.value.status == 409 and isinstance(duplicate.value, ConflictError)
    with pytest.raises(InvalidRequestError) as invalid:
        await redrive.enqueue("Not A Type")
    assert (invalid.value.status, invalid.value.code) == (400, "invalid_request")
    assert invalid.value.retryable is False and invalid.value.details["field"] == "type"
    with pytest.raises(InvalidRequestError) as retry:
        await redrive.enqueue("email.send", retry={"backoff_coefficient": 0.5})
    assert retry.value.status == 422
    with pytest.raises(InvalidRequestError):
        await redrive.enqueue("email.send", scheduled_at=__import__("datetime").datetime.now())
    with pytest.raises(NotFoundError):
        await redrive.ack("no-such-job")
    with pytest.raises(InvalidRequestError) as not_json:
        await redrive.enqueue("email.send", [float("nan"), object()])
    assert not_json.value.code == "invalid_payload"


async def test_unreachable_server_raises_unreachable_error() -> None:
    async with Client("http://127.0.0.1:9", timeout=5) as client:
        with pytest.raises(UnreachableError) as unreachable:
            await client.fetch(["default"])
    assert "http://127.0.0.1:9" in str(unreachable.value)
    assert "redrive serve" in str(unreachable.value) and unreachable.value.retryable
    assert isinstance(unreachable.value, ConnectionError)


async def test_fetch_documents_are_the_claimed_jobs_as_the_server_wrote_them(
    redrive: Client,
) -> None:
    first = await redrive.enqueue("mail.send", ["a@b.c"], queue="documents")
    second = await redrive.enqueue("mail.send", ["d@e.f"], queue="documents")
    documents = await redrive.fetch_documents(["documents"], count=5, worker_id="w1")
    assert [document["id"] for document in documents] == [first.id, second.id]
    assert all(document["state"] == "active" and document["lease_token"] for document in documents)
    assert documents[0]["args"] == ["a@b.c"] and documents[0]["worker_id"] == "w1"
    assert await redrive.fetch_documents(["documents"]) == []
