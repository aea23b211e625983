"""Batch statements that pick rows with LIMIT ... SKIP LOCKED change no more rows than the limit,
whatever plan the database chooses (a re-run pick would skip what the statement already changed
and take the next rows: a count-based prune would then remove dead letters it must keep)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import fetch_request
from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter_filter import parse_filter
from redrive.ports import Page, PruneScope, Store
from redrive.service import dead_letters as dead_letter_service
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from tests.behaviour.ojs_http import count_rows, explain_all
from tests.behaviour.test_dead_letters import make_dead_letters
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("count", [5, 40])
@pytest.mark.parametrize("archive", [False, True], ids=["delete", "archive"])
@pytest.mark.parametrize("by_age", [False, True], ids=["oldest", "by-age"])
async def test_a_prune_batch_removes_at_most_its_limit(
    service: Service, store: Store, clock: ManualClock, archive: bool, by_age: bool, count: int
) -> None:
    await make_dead_letters(service, count, "prunable")
    clock.advance(60_000)
    before = clock.now_ms() if by_age else None
    scope = PruneScope("prunable", None, before, archive, by_count=not by_age)
    for limit in (1, 3):
        async with store.transaction(SYSTEM) as transaction:
            removed = await transaction.prune_dead_letters(scope, limit, clock.now_ms(), "test")
        assert len(removed) == limit
    assert (await service.dead_letters.stats(CALLER)).total == count - 4


@pytest.mark.parametrize("count", [5, 40])
async def test_a_bulk_move_moves_at_most_its_limit(
    service: Service, store: Store, count: int
) -> None:
    await make_dead_letters(service, count, "movable")
    filters = parse_filter({"queue": "movable"}, service.now()).scoped(CALLER.tenant_id)
    for limit in (1, 3):
        async with store.transaction(SYSTEM) as transaction:
            moved = await transaction.move_dead_letters(filters, limit, "deleted", 1, "test")
        assert len(moved) == limit
    assert (await service.dead_letters.stats(CALLER)).total == count - 4


@pytest.mark.parametrize("count", [5, 40])
async def test_a_claim_takes_at_most_the_count_asked_for(
    service: Service, store: Store, count: int
) -> None:
    jobs = [
        {"type": "claim.item", "args": [n], "options": {"queue": "claims"}} for n in range(count)
    ]
    await service.jobs.enqueue_batch(CALLER, job_requests({"jobs": jobs}))
    for asked in (1, 3):
        assert (
            len(
                await service.workers.fetch(
                    CALLER, fetch_request({"queues": ["claims"], "count": asked})
                )
            )
            == asked
        )
    async with store.transaction(SYSTEM) as transaction:
        counts = await transaction.count_jobs(None, "claims")
    assert (counts.get(("claims", "active")), counts.get(("claims", "available"))) == (4, count - 4)


async def test_a_bulk_retry_in_many_chunks_moves_the_newest_matches_each_once(
    service: Service, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry reads the ids of the newest `limit` matches once and moves them in chunks by id:
    the newest `limit` matches at or before `until` move, each once, ties on the time included,
    and the episodes after `until` stay dead."""
    monkeypatch.setattr(dead_letter_service, "BULK_CHUNK", 2)
    monkeypatch.setattr(dead_letter_service, "RETRY_CHUNK_MOST", 2)
    died: list[tuple[int, list[str]]] = []
    for _ in range(3):
        died.append((clock.now_ms(), await make_dead_letters(service, 4, "timed")))
        clock.advance(1_000)
    await explain_all(service, CALLER)
    filters = replace(parse_filter({"queue": "timed"}, clock.now_ms()), until=died[1][0])
    result = await service.dead_letters.bulk_retry(
        CALLER, BulkRequest(filters, confirm=True, limit=6)
    )
    assert (result.matched, result.succeeded) == (6, 6)
    for (_, ids), expected in zip(died, [2, 4, 0], strict=True):
        quoted = ", ".join(f"'{job_id}'" for job_id in ids)
        retried = (
            f"SELECT COUNT(*) FROM dead_letters WHERE status = 'retried' AND job_id IN ({quoted})"
        )
        assert await count_rows(service, retried) == expected
    assert (await service.dead_letters.stats(CALLER)).total == 6


async def test_a_retry_reads_the_ids_of_its_matches_newest_first(
    service: Service, store: Store, clock: ManualClock
) -> None:
    """The ids a bulk retry's round moves (`dead_letter_ids`): every match but those excluded,
    newest first (ties on the time by id, descending), at most `limit`; none when none match."""
    for _ in range(3):
        await make_dead_letters(service, 3, "ordered")
        clock.advance(1_000)
    filters = parse_filter({"queue": "ordered"}, clock.now_ms()).scoped(CALLER.tenant_id)
    async with store.transaction(SYSTEM) as transaction:
        rows = await transaction.list_dead_letters(filters, Page(limit=100))
        newest_first = [
            dead.id for dead in sorted(rows, key=lambda d: (d.discarded_at, d.id), reverse=True)
        ]
        every = await transaction.dead_letter_ids(filters, 100, [])
        some = await transaction.dead_letter_ids(filters, 4, newest_first[1:3])
        nothing = await transaction.dead_letter_ids(replace(filters, queue="none"), 100, [])
    assert len(newest_first) == 9
    assert every == newest_first
    assert some == [newest_first[0], *newest_first[3:6]]
    assert nothing == []
