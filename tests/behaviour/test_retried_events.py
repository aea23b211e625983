"""The events a bulk retry writes, on both stores: one outbox row for each run of alike events
(tenant, queue and job type), which the feed, its cursor, the trim and webhook deliveries each
see as every retried dead letter's own `dead_letter.retried` event."""

from __future__ import annotations

import pytest

from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter import MovedEpisode
from redrive.domain.events import retried_event_ids
from redrive.domain.listeners import WEBHOOK_QUEUE
from redrive.domain.webhooks import SubscriptionRequest
from redrive.ports import JobFilter, Retried, StoredEvent
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from tests.behaviour.ojs_http import COUNT_EVENTS, count_rows
from tests.behaviour.test_redrive_failures import by_queue, kill
from tests.support.callers import CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio
RETRIED = "dead_letter.retried"


async def feed(service: Service, after: str | None = None, **filters: str) -> list[StoredEvent]:
    return await service.events.list(
        CALLER, RETRIED, filters.get("queues"), filters.get("job_types"), after, 100
    )


async def retry_two_kinds(service: Service) -> dict[str, tuple[str, str]]:
    """Five dead letters of one queue, of two job types, retried in one bulk retry; each job's
    episode id and type by job id."""
    charges = await kill(service, 3, "billing", "billing.charge")
    refunds = await kill(service, 2, "billing", "billing.refund")
    request = BulkRequest(by_queue("billing"), confirm=True)
    assert (await service.dead_letters.bulk_retry(CALLER, request)).succeeded == 5
    episodes: dict[str, tuple[str, str]] = {}
    for job_id in [*charges, *refunds]:
        (episode,) = await service.dead_letters.episodes(CALLER, job_id)
        episodes[job_id] = (episode.id, episode.job.type)
    return episodes


async def test_a_bulk_retry_writes_a_row_a_kind_and_the_feed_shows_each_episode_s_event(
    service: Service, clock: ManualClock
) -> None:
    episodes = await retry_two_kinds(service)
    retried = f"{COUNT_EVENTS} WHERE type = '{RETRIED}'"
    assert await count_rows(service, retried) == 5
    rows = f"SELECT COUNT(*) FROM events WHERE type = '{RETRIED}'"
    assert await count_rows(service, rows) == 2
    events = await feed(service)
    assert sorted(str(stored.event.subject) for stored in events) == sorted(episodes)
    for stored in events:
        episode_id, job_type = episodes[str(stored.event.subject)]
        assert (stored.event.tenant_id, stored.event.queue, stored.event.job_type) == (
            CALLER.tenant_id, "billing", job_type,
        )  # fmt: skip
        assert stored.event.data == {
            "job_type": job_type,
            "queue": "billing",
            "moved_by": CALLER.actor,
            "episode_id": episode_id,
        }
        assert stored.time == clock.now_ms()
    ids = [stored.id for stored in events]
    assert len(set(ids)) == len(ids)
    for index, event_id in enumerate(ids):
        assert [stored.id for stored in await feed(service, event_id)] == ids[index + 1 :]
    refunds = await feed(service, job_types="billing.refund")
    assert [stored.id for stored in refunds] == [
        stored.id for stored in events if stored.event.job_type == "billing.refund"
    ]
    assert len(refunds) == 2


async def test_a_bulk_retry_s_webhook_deliveries_carry_the_feed_s_events(
    service: Service,
) -> None:
    subscription = SubscriptionRequest("https://example.test/hook", ("dead_letter.*",), None)
    await service.webhooks.create(CALLER, subscription)
    await retry_two_kinds(service)
    events = await feed(service)
    async with service.runtime.store.transaction(CALLER) as transaction:
        deliveries, _ = await transaction.list_jobs(
            CALLER.tenant_id, JobFilter(queue=WEBHOOK_QUEUE), 100, 0
        )
    sent = sorted(
        (delivery.args[0]["event"]["id"], delivery.args[0]["event"]["subject"],
         delivery.args[0]["event"]["data"]["episode_id"])
        for delivery in deliveries
        if delivery.args[0]["event"]["type"] == RETRIED
    )  # fmt: skip
    assert sent == sorted(
        (stored.id, stored.event.subject, stored.event.data["episode_id"]) for stored in events
    )
    assert len(sent) == 5


async def test_a_trim_counts_each_retried_event_of_a_row(
    service: Service, clock: ManualClock
) -> None:
    await retry_two_kinds(service)
    clock.advance(1)
    async with service.runtime.store.transaction(CALLER) as transaction:
        assert await transaction.delete_events_before(clock.now_ms()) >= 5
    assert await feed(service) == []


async def test_a_chunk_past_a_block_s_4096_events_names_them_as_the_domain_does(
    service: Service,
) -> None:
    """One chunk of 4,100 alike dead letters (the store's statement, as a bulk retry's chunk
    calls it): two rows, split at the 4,096th chosen, whose events carry the ids
    `retried_event_ids` gives the webhooks, in the chosen order."""
    for _ in range(5):
        await kill(service, 820)
    async with service.runtime.store.transaction(CALLER) as transaction:
        chosen = await transaction.dead_letter_ids(by_queue("billing"), 5000, [])
        job_of = {dead.id: dead.job.id for dead in await transaction.dead_letters_by_id(chosen)}
    job_ids = [job_of[episode_id] for episode_id in chosen]
    now = service.runtime.now()
    heads = service.runtime.block_head_parts(len(chosen), now)
    async with service.runtime.store.transaction(CALLER) as transaction:
        retried = await transaction.retry_dead_letters(chosen, heads, now, "ops", [])
    assert retried.count == len(chosen)
    rows = f"SELECT COUNT(*) FROM events WHERE type = '{RETRIED}'"
    assert await count_rows(service, rows) == 2
    events: list[StoredEvent] = []
    while page := await service.events.list(
        CALLER, RETRIED, None, None, events[-1].id if events else None, 1000
    ):
        events += page
    assert [str(stored.event.subject) for stored in events] == job_ids
    assert [stored.event.data["episode_id"] for stored in events] == chosen
    moved = [
        MovedEpisode(episode_id, job_id, CALLER.tenant_id, "billing", "billing.charge", None)
        for episode_id, job_id in zip(chosen, job_ids, strict=True)
    ]
    ids = retried_event_ids(chosen, heads, moved)
    assert [stored.id for stored in events] == [ids[episode_id] for episode_id in chosen]
    assert [events[0].id, events[4096].id] == [heads[0], heads[4096]]


async def test_a_chunk_answers_each_part_it_holds_and_only_those(
    service: Service, clock: ManualClock
) -> None:
    """One chunk's statement, as a bulk retry's chunk calls it: an episode whose job's row was
    pruned comes back on its own, not put back; a chosen id no longer dead comes back skipped;
    the episodes put back in place are counted in their group. Once a subscription listens to
    the tenant, every moved episode comes back on its own, saying whether its job was put back,
    with the subscription, and no group."""
    store = service.runtime.store

    async def dead(put_back: int) -> tuple[str, list[str]]:
        """A dead job whose row is pruned, then `put_back` whose rows stay: the first's id,
        and the ids of the dead letters now to retry."""
        (pruned,) = await kill(service, 1)
        clock.advance(60_000)
        async with store.transaction(SYSTEM) as transaction:
            assert await transaction.prune_finished_jobs(clock.now_ms(), 100) == 1
        await kill(service, put_back)
        async with store.transaction(CALLER) as transaction:
            return pruned, await transaction.dead_letter_ids(by_queue("billing"), 100, [])

    async def retry(chosen: list[str]) -> Retried:
        now = service.runtime.now()
        heads = service.runtime.block_head_parts(len(chosen), now)
        async with store.transaction(CALLER) as transaction:
            return await transaction.retry_dead_letters(chosen, heads, now, "ops", [])

    pruned, chosen = await dead(3)
    retried = await retry([*chosen, "dl_no_longer_dead"])
    assert [(episode.job_id, episode.requeued) for episode in retried.moved] == [(pruned, False)]
    assert [(group.queue, group.count) for group in retried.requeued] == [("billing", 3)]
    assert (retried.skipped, retried.listeners) == (["dl_no_longer_dead"], [])

    subscription = SubscriptionRequest("https://example.test/hook", ("dead_letter.*",), None)
    created = await service.webhooks.create(CALLER, subscription)
    pruned, chosen = await dead(2)
    retried = await retry(chosen)
    assert sorted((episode.id, episode.requeued) for episode in retried.moved) == sorted(
        (episode_id, episode_id != chosen[-1]) for episode_id in chosen
    )  # (the pruned one is the oldest: the last chosen)
    assert [listener.id for listener in retried.listeners] == [created.subscription.id]
    assert (retried.requeued, retried.skipped) == ([], [])


async def test_a_retry_reads_the_ids_it_moves_newest_first_then_by_id(
    service: Service, clock: ManualClock
) -> None:
    """The ids a bulk retry's round reads (one row of them on PostgreSQL): every match, newest
    first and by id among those of one moment, up to the limit, but for those excluded; none
    for a filter nothing matches."""
    await kill(service, 3)
    clock.advance(5)
    await kill(service, 3)
    async with service.runtime.store.transaction(CALLER) as transaction:
        chosen = await transaction.dead_letter_ids(by_queue("billing"), 100, [])
        dead = await transaction.dead_letters_by_id(chosen)
        newest = await transaction.dead_letter_ids(by_queue("billing"), 2, chosen[:1])
        none = await transaction.dead_letter_ids(by_queue("nothing"), 100, [])
    order = sorted(dead, key=lambda letter: (letter.discarded_at, letter.id), reverse=True)
    assert chosen == [letter.id for letter in order]
    assert len(chosen) == 6
    assert newest == chosen[1:3]
    assert none == []
