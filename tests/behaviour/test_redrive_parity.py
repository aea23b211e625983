"""The set-based redrive statement and the domain's redrive() produce the same job."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.domain import dead_letter as episodes
from redrive.ports import Store
from redrive.service.facade import Service
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_bulk_redrive_statement_matches_domain_redrive(
    service: Service, store: Store, clock: ManualClock
) -> None:
    policy = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    job = await service.jobs.enqueue(
        {"type": "billing.charge", "args": [{"amount": 5}], "meta": {"trace": "t1"},
         "options": {"queue": "billing", "retry": policy, "timeout_ms": 9000}},
        None,
    )  # fmt: skip
    await service.workers.fetch({"queues": ["billing"], "worker_id": "w1"}, None)
    clock.advance(1500)
    await service.workers.nack(
        {"job_id": job.id, "error": {"type": "CardDeclined", "message": "no"}}, None
    )
    dead, _ = await service.dead_letters.get(job.id, None)
    clock.advance(60_000)
    now = clock.now_ms()
    expected = episodes.redrive(dead.job, now)
    async with store.transaction() as transaction:
        assert await transaction.redrive_jobs([job.id], now) == {job.id}
        revived = await transaction.get_job(job.id, None)
    assert revived is not None
    assert replace(revived, sequence=None) == replace(expected, sequence=None)
