"""A redrive task's batch larger than a chunk, on both stores: on PostgreSQL it moves a chunk per
transaction over the write lanes (SQLite, one writer, moves it in the tick's transaction), each
dead letter once, with the task's accounting, events and failure handling of one batch; and a
task started in a process with a sweep loop moves its batch due without waiting for the sweep;
a start waits for a pin in flight and never pins a dead letter twice; what comes due while a batch
moves over the lanes moves in the same advance, in full chunks, an odd remainder with the last;
a task paused meanwhile stops."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import psycopg
import psycopg.sql
import pytest

from redrive.domain import redrive
from redrive.domain.redrive import RedriveRequest
from redrive.maintenance.loop import rest
from redrive.ports import Store
from redrive.service import redrives as redrive_service
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.postgres.store import (
    ALL_TENANTS,
    INDEX_ORDER_QUERY,
    TENANT_SETTING,
    PostgresStore,
)
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.test_query_plans import plan_nodes
from tests.behaviour.test_redrive_failures import UNSTORABLE, by_queue, dead_count, events_of, kill
from tests.support.callers import CALLER
from tests.support.clock import ManualClock
from tests.support.options import service_options

pytestmark = pytest.mark.anyio
CHUNK = 20


@pytest.fixture
async def laned(database_url: str) -> AsyncIterator[Store]:
    """The store as a server opens it: on PostgreSQL a pool large enough for two write lanes."""
    if database_url.startswith("sqlite"):
        store: Store = SqliteStore(database_url.removeprefix("sqlite:///"))
    else:
        postgres = PostgresStore(database_url, max_size=8)
        store = postgres
    await store.migrate()
    yield store
    await store.close()


def served(store: Store, clock: ManualClock) -> Service:
    options = replace(service_options(), redrive_max_rate=6000)
    return Service(Runtime(store, clock=clock, options=options, rng=random.Random(5)))


def running_task(task_id: str, now: int) -> redrive.RedriveTask:
    """A task as a start inserts it before its pin."""
    return redrive.RedriveTask(
        id=task_id, tenant_id=CALLER.tenant_id, state=redrive.RUNNING, filter={},
        incident_id=None, rate_per_minute=100, critical=False, reason=None,
        created_by=CALLER.actor, created_at=now, updated_at=now, updated_by=CALLER.actor,
        finished_at=None, paced_until=now, to_move=0, moved=0, skipped=0, succeeded=0,
        dead_again=0, queues=(),
    )  # fmt: skip


def critical() -> RedriveRequest:
    return RedriveRequest(by_queue("billing"), 6000, critical=True, reason="outage over")


async def test_a_batch_larger_than_a_chunk_moves_each_dead_letter_once_with_its_accounting(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redrive_service, "MOVE_CHUNK", CHUNK)
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    service = served(laned, clock)
    assert laned.write_lanes == (1 if isinstance(laned, SqliteStore) else 2)
    ids = await kill(service, 150)
    async with laned.transaction(CALLER) as transaction:
        await transaction.delete_dead_jobs(ids[:5])  # requeued from the snapshot
    task = await service.redrives.start(CALLER, critical())
    clock.advance(2000)  # 200 due at 6,000 a minute: all 150 in one batch, 8 chunks
    assert await service.redrives.advance() == 150
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.skipped, done.failed) == (redrive.COMPLETED, 150, 0, 0)
    assert done.queues == ("billing",) and await dead_count(service, "billing") == 0
    assert await service.redrives.items(CALLER, task.id, "pending") == []
    assert len(await service.redrives.items(CALLER, task.id, "moved")) == 100  # the first page
    retried = await service.events.list(CALLER, "dead_letter.retried", None, None, None, 1000)
    assert sorted(str(stored.event.subject) for stored in retried) == sorted(ids)
    assert len(await events_of(service, "redrive.completed")) == 1
    for job_id in ids:
        job = await service.jobs.get(CALLER, job_id)
        assert job.state == "available"
        (episode,) = await service.dead_letters.episodes(CALLER, job_id)
        assert episode.status == "retried" and episode.moved_by == f"redrive:{task.id}"
    assert service.runtime.metrics.redrive_moved[task.id] == 150


async def test_what_comes_due_while_a_batch_moves_over_the_lanes_moves_in_the_same_advance(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redrive_service, "MOVE_CHUNK", CHUNK)
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    service = served(laned, clock)
    await kill(service, 100)
    task = await service.redrives.start(CALLER, critical())
    moving = service.redrives._move
    chunks: list[int] = []

    async def taking_a_second(*arguments: Any) -> redrive_service.Batch:
        moved = await moving(*arguments)
        chunks.append(moved.moved)
        clock.advance(1000)  # 100 more due at 6,000 a minute
        return moved

    monkeypatch.setattr(service.redrives, "_move", taking_a_second)
    clock.advance(500)  # 50 due: more than a chunk
    if isinstance(laned, SqliteStore):  # one writer: the 50 in the tick's own transaction
        assert await service.redrives.advance() == 50
        clock.advance(500)
        assert await service.redrives.advance() == 50
    else:  # 50 were due; the 50 left came due while the first chunks moved: all in one advance,
        # in chunks of 20 (none of them was a batch's odd leftover)
        assert await service.redrives.advance() == 100
        assert chunks == [20] * 5
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.skipped) == (redrive.COMPLETED, 100, 0)
    assert await dead_count(service, "billing") == 0
    assert len(await events_of(service, "redrive.completed")) == 1


def lane_waits(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The waits of the lanes for their task's pace, each passed on the clock as it is asked."""
    waits: list[int] = []

    async def waiting(milliseconds: int) -> None:
        waits.append(milliseconds)
        clock.advance(milliseconds)

    monkeypatch.setattr(redrive_service, "wait_ms", waiting)
    return waits


# Two write lanes: PostgreSQL (SQLite's one writer moves a batch in the tick's transaction).
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_lane_that_finds_nothing_due_waits_for_the_pace_and_moves_what_comes_due(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first chunk took all that was due at the tick (15 of 100 at 6,000 a minute): the other
    lane waits for the next MOVE_CHUNK to come due (100 ms, within LANE_WAIT_MOST_MS) and moves
    it, and so on, each claim within the pace and none smaller than MOVE_CHUNK; before, that lane
    ended, then the first did once nothing was left due, and the advance moved 15 (at a critical
    rate the first lane moved the rest alone, chunk after chunk)."""
    monkeypatch.setattr(redrive_service, "MOVE_CHUNK", 10)
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    service = served(laned, clock)
    await kill(service, 100)
    task = await service.redrives.start(CALLER, critical())
    waits = lane_waits(clock, monkeypatch)
    moving = service.redrives._move
    chunks: list[tuple[int, int]] = []  # (when the chunk took its items, how many)

    async def within_the_pace(*arguments: Any) -> redrive_service.Batch:
        chunks.append((arguments[3], len(arguments[2])))
        return await moving(*arguments)

    monkeypatch.setattr(service.redrives, "_move", within_the_pace)
    clock.advance(150)  # 15 due: more than MOVE_CHUNK, less than a chunk of 20
    assert await service.redrives.advance() == 100
    assert waits and all(0 < wait <= redrive_service.LANE_WAIT_MOST_MS for wait in waits)
    chunks.sort()
    totals = list(itertools.accumulate(size for _, size in chunks))
    due = [(taken_at - task.created_at) * 6000 // 60_000 for taken_at, _ in chunks]
    assert (totals[0], due[0]) == (15, 15)
    assert all(total <= due_then for total, due_then in zip(totals, due, strict=True))
    # None smaller than MOVE_CHUNK but the one that took what was left (not always the last
    # in time: the two lanes' last chunks can be taken at the same moment).
    sizes = sorted(size for _, size in chunks)
    assert sizes[1] >= 10 and sum(sizes) == 100
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.skipped) == (redrive.COMPLETED, 100, 0)
    assert await dead_count(service, "billing") == 0


# Two write lanes: PostgreSQL (SQLite's one writer moves a batch in the tick's transaction).
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_lane_waits_no_longer_than_lane_wait_most_ms_for_its_pace(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second lane finds 5 due and its MOVE_CHUNK (20) would take 150 ms more: it moves the 5;
    the next would come due in 200 ms: the lanes end, and the next tick moves it."""
    monkeypatch.setattr(redrive_service, "MOVE_CHUNK", CHUNK)
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    service = served(laned, clock)
    await kill(service, 100)
    task = await service.redrives.start(CALLER, critical())
    waits = lane_waits(clock, monkeypatch)
    clock.advance(250)  # 25 due: a chunk of 20 and 5
    assert await service.redrives.advance() == 25
    assert waits == []
    assert (await service.redrives.get(CALLER, task.id)).moved == 25


async def test_the_lanes_of_a_task_paused_meanwhile_move_no_further_chunk(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    service = served(laned, clock)
    await kill(service, 100)
    task = await service.redrives.start(CALLER, critical())
    clock.advance(2000)
    running = await service.redrives.get(CALLER, task.id)  # as the tick read it
    await service.redrives.pause(CALLER, task.id)
    assert await service.redrives._move_in_lanes(running, CHUNK) is None
    paused = await service.redrives.get(CALLER, task.id)
    assert (paused.state, paused.moved, paused.pending) == (redrive.PAUSED, 0, 100)
    assert await dead_count(service, "billing") == 100


async def test_a_chunk_that_raises_is_undone_alone_and_fails_the_task(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redrive_service, "MOVE_CHUNK", CHUNK)
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    ids = await kill(served(laned, clock), 100)
    task = await served(laned, clock).redrives.start(CALLER, critical())
    options = replace(service_options(), redrive_max_rate=6000, upcasters=UNSTORABLE)
    unstorable = Service(Runtime(laned, clock=clock, options=options))
    clock.advance(2000)
    assert await unstorable.redrives.advance() == 0
    failed = await unstorable.redrives.get(CALLER, task.id)
    assert (failed.state, failed.moved) == (redrive.FAILED, 0)
    assert failed.failure is not None and failed.failure.code == "internal_error"
    assert failed.failure.job_id in ids
    assert await dead_count(unstorable, "billing") == 100
    assert (await unstorable.dead_letters.stats(CALLER)).total == 100
    assert await unstorable.redrives.items(CALLER, task.id, "pending") == []  # released


async def test_a_task_started_moves_at_once_in_a_process_with_a_sweep_loop(
    laned: Store, clock: ManualClock
) -> None:
    service = served(laned, clock)
    await kill(service, 30)
    resting = asyncio.create_task(rest(service.sweeper, 60.0))
    await asyncio.sleep(0)
    task = await service.redrives.start(CALLER, critical())
    clock.advance(1000)  # what the start itself took: 100 due, all 30
    for _ in range(200):
        if (await service.redrives.get(CALLER, task.id)).state == redrive.COMPLETED:
            break
        await asyncio.sleep(0.01)
    assert not resting.done()  # woken by the start, it moved the task and waits on
    resting.cancel()
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved) == (redrive.COMPLETED, 30)


async def test_pinned_dead_letters_moved_meanwhile_are_skipped_and_the_rest_moved(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redrive_service, "MOVE_CHUNK", CHUNK)
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    service = served(laned, clock)
    ids = await kill(service, 60)
    task = await service.redrives.start(CALLER, critical())
    retried = await service.dead_letters.retry_selected(CALLER, ids[:3])  # before its turn
    assert sorted(retried.moved) == sorted(ids[:3])
    clock.advance(2000)
    assert await service.redrives.advance() == 57
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.skipped) == (redrive.COMPLETED, 57, 3)
    skipped = await service.redrives.items(CALLER, task.id, "skipped")
    assert sorted(item["job_id"] for item in skipped) == sorted(ids[:3])
    assert len(await service.redrives.items(CALLER, task.id, "moved")) == 57


# PostgreSQL only: SQLite has one writer, so no dead letter is held by another transaction.
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_pinned_dead_letters_another_transaction_holds_are_skipped_and_stay_dead(
    laned: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    # PostgreSQL's chunk marks its pending items moved as it claims them, before the move picks
    # their dead letters, and sets those the pick skipped (held by another transaction: never
    # waited for) to skipped.
    monkeypatch.setattr(redrive_service, "MOVE_CHUNK", CHUNK)
    monkeypatch.setattr(redrive_service, "RETRY_CHUNK_MOST", CHUNK)
    service = served(laned, clock)
    ids = await kill(service, 60)
    task = await service.redrives.start(CALLER, critical())
    holder = await asyncpg.connect(database_url)
    try:
        async with holder.transaction():
            held = await holder.fetch(
                "SELECT id FROM dead_letters WHERE job_id = ANY($1::text[]) FOR UPDATE", ids[5:8]
            )
            assert len(held) == 3
            clock.advance(2000)
            assert await service.redrives.advance() == 57
    finally:
        await holder.close()
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.skipped) == (redrive.COMPLETED, 57, 3)
    skipped = await service.redrives.items(CALLER, task.id, "skipped")
    assert sorted(item["job_id"] for item in skipped) == sorted(ids[5:8])
    assert len(await service.redrives.items(CALLER, task.id, "moved")) == 57
    assert await dead_count(service, "billing") == 3  # never moved: still dead


async def test_a_start_waits_for_a_pin_in_flight_and_leaves_out_what_it_pinned(
    laned: Store, clock: ManualClock
) -> None:
    service = served(laned, clock)
    await kill(service, 80)
    async with laned.transaction(CALLER) as other:
        # As a start pins: its task first (the pin leaves out the unfinished tasks' items).
        await other.insert_redrive_task(running_task("rdt_other", clock.now_ms()))
        pinned = await other.pin_redrive_items("rdt_other", by_queue("billing"), 30)
        assert sum(pinned.values()) == 30
        starting = asyncio.create_task(service.redrives.start(CALLER, critical()))
        await asyncio.sleep(0.3)
        assert not starting.done()  # it waits for the other pin to commit
    task = await starting
    assert task.to_move == 50  # never one pinned twice


async def test_a_task_reads_its_pending_items_by_id_after_its_cursor_each_with_its_job(
    service: Service, clock: ManualClock
) -> None:
    """A task's next pending dead letters (one row of two arrays on both stores): in id order
    after the cursor, each paired with its own job, up to the limit; none past the last."""
    job_ids = await kill(service, 5)
    task = await service.redrives.start(CALLER, RedriveRequest(by_queue("billing")))
    async with service.runtime.store.transaction(CALLER) as transaction:
        every = await transaction.pending_redrive_items(task.id, 10)
        dead = await transaction.dead_letters_by_id(list(every))
        after_first = await transaction.pending_redrive_items(task.id, 2, min(every))
        past_last = await transaction.pending_redrive_items(task.id, 10, max(every))
    assert list(every) == sorted(every)
    assert every == {letter.id: letter.job.id for letter in dead}
    assert sorted(every.values()) == sorted(job_ids)
    assert list(after_first) == sorted(every)[1:3]
    assert past_last == {}


class Undone(Exception):
    """Raised inside a transaction to undo it."""


async def test_a_chunk_claims_its_items_in_order_and_a_claim_undone_leaves_them_pending(
    service: Service,
) -> None:
    """The items a chunk takes to move: the next pending ones in id order after the cursor, each
    with its job, as the read gives them; the claim is part of the chunk's transaction, so a
    chunk undone leaves them pending and the next claim takes the same ones."""
    await kill(service, 6)
    task = await service.redrives.start(CALLER, RedriveRequest(by_queue("billing")))
    store = service.runtime.store
    async with store.transaction(CALLER) as transaction:
        pending = await transaction.pending_redrive_items(task.id, 10)
    claimed: dict[str, str] = {}
    with pytest.raises(Undone):
        async with store.transaction(CALLER) as transaction:
            claimed = await transaction.claim_redrive_items(task.id, 4)
            raise Undone
    assert claimed == {episode: pending[episode] for episode in sorted(pending)[:4]}
    assert len(await service.redrives.items(CALLER, task.id, "pending")) == 6
    async with store.transaction(CALLER) as transaction:
        again = await transaction.claim_redrive_items(task.id, 4)
        rest = await transaction.claim_redrive_items(task.id, 4, max(again))
    assert again == claimed
    assert list(rest) == sorted(pending)[4:]


async def test_a_task_of_more_than_one_pin_block_reads_and_claims_in_id_order_across_them(
    service: Service,
) -> None:
    """A task pins its dead letters in blocks of a thousand (migration 0046): its items are read
    and claimed in id order across its blocks, each with its own job, and the listing shows
    each from its block, with its queue, moved once claimed."""
    job_ids = await kill(service, 1000) + await kill(service, 205)
    task = await service.redrives.start(CALLER, RedriveRequest(by_queue("billing")))
    store = service.runtime.store
    async with store.transaction(CALLER) as transaction:
        every = await transaction.pending_redrive_items(task.id, 2000)
        claimed = await transaction.claim_redrive_items(task.id, 1100)
        rest = await transaction.pending_redrive_items(task.id, 1000, max(claimed))
    assert list(every) == sorted(every)
    assert sorted(every.values()) == sorted(job_ids)
    assert claimed == {episode: every[episode] for episode in sorted(every)[:1100]}
    assert rest == {episode: every[episode] for episode in sorted(every)[1100:]}
    moved = await service.redrives.items(CALLER, task.id, "moved")
    pending = await service.redrives.items(CALLER, task.id, "pending")
    assert [item["dead_letter_id"] for item in moved] == sorted(every)[:100]
    assert [item["dead_letter_id"] for item in pending] == sorted(every)[1100:1200]
    for item in moved + pending:
        assert (item["job_id"], item["queue"]) == (every[item["dead_letter_id"]], "billing")


# PostgreSQL only: SQLite's chunk marks its items in the move's own call (one writer at a time).
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_on_postgresql_a_claim_marks_its_items_moved_within_its_chunk(
    laned: Store, clock: ManualClock
) -> None:
    # The claim is the pending check of the move (which then finds no item by key): within the
    # chunk's transaction its items are `moved` already, the others still pending; undone, all
    # are pending again.
    service = served(laned, clock)
    await kill(service, 6)
    task = await service.redrives.start(CALLER, critical())
    with pytest.raises(Undone):
        async with laned.transaction(CALLER) as transaction:
            claimed = await transaction.claim_redrive_items(task.id, 4)
            moved = await transaction.redrive_items(task.id, "moved", 10)
            pending = await transaction.redrive_items(task.id, "pending", 10)
            assert sorted(item["dead_letter_id"] for item in moved) == sorted(claimed)
            assert len(pending) == 2
            raise Undone
    assert len(await service.redrives.items(CALLER, task.id, "pending")) == 6


async def test_items_left_pending_behind_the_last_one_moved_still_move(
    laned: Store, clock: ManualClock
) -> None:
    # A task's reads of its pending items start after the last item a committed batch took
    # (`moved_through`); chunks over the write lanes commit in any order, so one that never
    # committed (its process gone) leaves its items pending behind that mark: once nothing is
    # pending after it, they are read from the start and moved.
    service = served(laned, clock)
    ids = await kill(service, 12)
    task = await service.redrives.start(CALLER, critical())
    items = sorted(item["dead_letter_id"] for item in await service.redrives.items(CALLER, task.id))
    async with laned.transaction(CALLER) as transaction:  # a later chunk committed alone
        await transaction.count_redrive_batch(task.id, 0, 0, clock.now_ms(), 0, through=items[7])
    clock.advance(2000)
    assert await service.redrives.advance() == 4  # those after the mark
    assert len(await service.redrives.items(CALLER, task.id, "pending")) == 8
    clock.advance(2000)
    assert await service.redrives.advance() == 8  # then those behind it
    done = await service.redrives.get(CALLER, task.id)
    assert (done.state, done.moved, done.skipped) == (redrive.COMPLETED, 12, 0)
    assert await dead_count(service, "billing") == 0
    for job_id in ids:
        assert (await service.jobs.get(CALLER, job_id)).state == "available"


async def test_a_paused_task_keeps_its_pins_from_a_new_start(
    laned: Store, clock: ManualClock
) -> None:
    # The pin leaves out what the unfinished tasks (running or paused) still pin, read from
    # those tasks' items (no index names an item's state).
    service = served(laned, clock)
    await kill(service, 10)
    paused = await service.redrives.start(CALLER, RedriveRequest(by_queue("billing"), limit=4))
    await service.redrives.pause(CALLER, paused.id)
    async with laned.transaction(CALLER) as transaction:
        await transaction.insert_redrive_task(running_task("rdt_other", clock.now_ms()))
        pinned = await transaction.pin_redrive_items("rdt_other", by_queue("billing"), 100)
    assert sum(pinned.values()) == 6


async def test_a_pin_with_a_limit_takes_the_newest_and_one_without_takes_every_other_match(
    laned: Store, clock: ManualClock
) -> None:
    # Two statements: with a limit the newest matches first; without one, every match read
    # oldest first (nothing to choose, so nothing sorted), less those another task pins.
    service = served(laned, clock)
    await kill(service, 4)
    clock.advance(1000)
    newest = await kill(service, 3)
    clock.advance(1000)
    await kill(service, 5, "emails")  # another queue: matched by neither
    limited = await service.redrives.start(CALLER, RedriveRequest(by_queue("billing"), limit=3))
    pinned = await service.redrives.items(CALLER, limited.id, "pending")
    assert sorted(item["job_id"] for item in pinned) == sorted(newest)
    await service.redrives.pause(CALLER, limited.id)
    async with laned.transaction(CALLER) as transaction:
        await transaction.insert_redrive_task(running_task("rdt_every", clock.now_ms()))
        every = await transaction.pin_redrive_items("rdt_every", by_queue("billing"), None)
    assert every == {(CALLER.tenant_id, "billing"): 4}
    rest = await service.redrives.items(CALLER, "rdt_every", "pending")
    assert not {item["job_id"] for item in rest} & set(newest)


# PostgreSQL only: its planner's choice.
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("name", ["select_pending_redrive_items", "claim_pending_redrive_items"])
async def test_a_read_of_pending_items_walks_the_pin_blocks_by_their_key(
    laned: Store, clock: ManualClock, database_url: str, name: str
) -> None:
    # A task's pending items are blocks of a thousand ids in id order (migration 0046): the read
    # takes the task's places in order, each place's ids sorted on their own, and stops at its
    # limit: a limit of 10 reads the first place only, and no sort holds more than a place's ids
    # (ORDER BY place, id sorted every pinned id: 20,000 for 5,000 taken).
    assert isinstance(laned, PostgresStore)
    service = served(laned, clock)
    await kill(service, 40)
    task = await service.redrives.start(CALLER, critical())
    (statement,) = laned.scripts[name]
    parameters = {"task_id": task.id, "after": "", "limit": 10}
    with psycopg.connect(database_url) as connection:
        # A large task's blocks (20,000 more items).
        connection.execute(
            "INSERT INTO redrive_task_pins (task_id, place, tenant_id, queue, first_id, last_id,"
            " state, dead_letter_ids, job_ids) SELECT %s, place, %s, 'billing',"
            " 'x' || (place * 1000 + 10000), 'x' || (place * 1000 + 10999), 'pending',"
            " ARRAY(SELECT 'x' || n FROM generate_series(place * 1000 + 10000,"
            " place * 1000 + 10999) AS n),"
            " ARRAY(SELECT 'job' || n FROM generate_series(place * 1000 + 10000,"
            " place * 1000 + 10999) AS n)"
            " FROM generate_series(1, 20) AS place",
            (task.id, CALLER.tenant_id),
        )
        connection.execute("SET ROLE redrive_app")
        connection.execute("SELECT set_config(%s, %s, true)", (TENANT_SETTING, ALL_TENANTS))
        connection.execute(INDEX_ORDER_QUERY)
        values = psycopg.sql.SQL(", ").join(
            psycopg.sql.Literal(value) for value in statement.arguments(parameters)
        )
        connection.execute(f"PREPARE pending AS {statement.sql}")
        explain = psycopg.sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pending ({})").format(
            values
        )
        row = connection.execute(explain).fetchone()
        connection.rollback()
    assert row is not None
    nodes = list(plan_nodes(row[0]))
    places = [
        node
        for node in nodes
        if node.get("Relation Name") == "redrive_task_pins"
        and "place" in node.get("Index Cond", "")
    ]
    assert places and {node["Actual Loops"] for node in places if node["Actual Loops"]} == {1}
    sorts = [node for node in nodes if node["Node Type"] == "Sort" and node["Actual Loops"]]
    assert sorts and max(node["Actual Rows"] for node in sorts) <= 40, row[0]


# PostgreSQL only: its planner's choice.
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_retry_chunk_put_back_whole_with_no_listener_looks_up_no_episode(
    laned: Store, clock: ManualClock, database_url: str
) -> None:
    # The usual chunk: every chosen episode moved, each job put back in its row, no webhook
    # subscription. Its answer is the requeued groups alone, and the statement builds no lookup
    # of the moved or requeued episodes to find the rest (which episodes were not put back,
    # were skipped, or are listened to): each such part is gated by a count or by whether any
    # subscription listens. (A materialised `told`, each episode flagged by a hashed subplan on
    # requeued, and the chosen probed against moved cost 0.6 us of backend CPU an episode.)
    assert isinstance(laned, PostgresStore)
    service = served(laned, clock)
    await kill(service, 40)
    (statement,) = laned.scripts["retry_dead_letters"]
    with psycopg.connect(database_url, autocommit=True) as connection:
        ids = [
            episode_id
            for (episode_id,) in connection.execute(
                "SELECT id FROM dead_letters WHERE status = 'dead' ORDER BY id"
            ).fetchall()
        ]
        now = clock.now_ms()
        heads = service.runtime.block_head_parts(len(ids), now)
        parameters = {
            "ids": ",".join(ids), "head_prefix": heads.prefix, "head_randoms": heads.randoms,
            "now": now, "moved_by": "ops", "upcast_types": [], "task_id": None,
        }  # fmt: skip
        values = psycopg.sql.SQL(", ").join(
            psycopg.sql.Literal(value) for value in statement.arguments(parameters)
        )
        connection.execute(f"PREPARE retry AS {statement.sql}")
        run = psycopg.sql.SQL("EXECUTE retry ({})").format(values)
        answers = []
        for query in (psycopg.sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + run, run):
            with connection.transaction(force_rollback=True):  # each on the same 40
                connection.execute("SET LOCAL ROLE redrive_app")
                connection.execute("SELECT set_config(%s, %s, true)", (TENANT_SETTING, ALL_TENANTS))
                answers.append(connection.execute(query).fetchall())
    (((plan,),), answer) = answers
    nodes = list(plan_nodes(plan))
    updates = {
        (node["Relation Name"], node["Actual Rows"])
        for node in nodes
        if node["Node Type"] == "ModifyTable" and node["Operation"] == "Update"
    }
    assert updates == {("dead_letters", 40), ("jobs", 40)}
    lookups = [node for node in nodes if node.get("Parent Relationship") == "SubPlan"]
    assert sum(node["Actual Rows"] for node in lookups) == 0, plan
    assert [(row[0], row[-1]) for row in answer] == [("requeued", 40)]


# PostgreSQL only: SQLite has one writer, so a cancel waits for the chunk's whole transaction.
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_cancel_during_a_chunk_waits_for_nothing_and_the_chunk_keeps_what_it_took(
    laned: Store, clock: ManualClock, database_url: str
) -> None:
    # A chunk takes its items, then the task (its counts). A cancel that took the task, then
    # waited for the chunk's items, deadlocked with it (PostgreSQL aborted one after its
    # deadlock_timeout); a claim is a row of its own (migration 0046) and locks no pin block, so
    # the cancel lets go of the blocks and ends the task without waiting, and the chunk's count
    # then waits for the cancel's commit only. What the chunk took stays moved and counted.
    service = served(laned, clock)
    await kill(service, 10)
    task = await service.redrives.start(CALLER, critical())
    watcher = await asyncpg.connect(database_url)
    cancelling: asyncio.Task[redrive.RedriveTask] | None = None
    try:
        async with laned.transaction(CALLER) as chunk:
            claimed = await chunk.claim_redrive_items(task.id, 4)
            cancelling = asyncio.create_task(service.redrives.cancel(CALLER, task.id))
            while not cancelling.done() and not await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
            ):
                await asyncio.sleep(0.02)
            waited = not cancelling.done()
            # (Where the cancel waits for the chunk's items holding the task, this deadlocks.)
            await chunk.count_redrive_batch(task.id, len(claimed), 0, clock.now_ms(), 0)
    finally:
        await watcher.close()
        if cancelling is not None:
            await asyncio.wait([cancelling])  # done once the chunk's transaction has ended
    assert not waited  # the cancel waited for no lock of the chunk's
    cancelled = await service.redrives.get(CALLER, task.id)
    assert (cancelling.result().state, cancelled.state, cancelled.moved) == (
        redrive.CANCELLED, redrive.CANCELLED, 4,
    )  # fmt: skip
    moved = await service.redrives.items(CALLER, task.id, "moved")
    assert sorted(item["dead_letter_id"] for item in moved) == sorted(claimed)
    assert len(await service.redrives.items(CALLER, task.id, "skipped")) == 6
