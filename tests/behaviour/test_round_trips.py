"""Round trips per operation on PostgreSQL, counted on the wire (a proxy between the store and
the server reads each message the store sends): each Sync or simple Query is one wait for the
server."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from redrive.api.worker_requests import fetch_request
from redrive.domain.audit import Action
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.envelope import read_envelope
from redrive.domain.errors import Conflict, Duplicate, NotFound, OjsError
from redrive.domain.listeners import WEBHOOK_QUEUE
from redrive.domain.webhooks import SubscriptionRequest
from redrive.ports import JobFilter
from redrive.service.attempts import AckRequest
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.postgres.store import PostgresStore
from tests.behaviour.ojs_http import explain_all
from tests.behaviour.test_dead_letters import make_dead_letters
from tests.support.callers import CALLER
from tests.support.clock import ManualClock
from tests.support.options import service_options
from tests.support.postgres import database_from_template
from tests.support.wire import Wire

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
async def wired(postgres_template: str) -> AsyncIterator[tuple[Service, Wire]]:
    """A service over a store of one pooled connection, through the proxy. The store's LISTEN
    connection is not opened: what the wire records is the pooled connection's alone."""
    with database_from_template(postgres_template) as url:
        wire = Wire(url)
        async with wire.serving() as proxied:
            store = PostgresStore(proxied, min_size=1, max_size=1)
            runtime = Runtime(store, ManualClock(), service_options(), random.Random(7))
            try:
                yield Service(runtime), wire
            finally:
                await store.close()


def job(queue: str = "mail") -> dict[str, object]:
    return {"type": "mail.send", "args": [1], "options": {"queue": queue}}


async def test_one_enqueue_is_one_round_trip(wired: tuple[Service, Wire]) -> None:
    """One statement (queue, job, event, NOTIFY) in PostgreSQL's implicit transaction: no
    BEGIN, no SET of the tenant the connection's session holds already, no COMMIT."""
    service, wire = wired
    # The pool's connection is made, and both enqueue statements prepared (a queue's first
    # enqueue writes its row; later ones, the queue known, run the statement without it).
    for _ in range(2):
        await service.jobs.enqueue(CALLER, read_envelope(job()))
    with wire.recording():
        enqueued = await service.jobs.enqueue(CALLER, read_envelope(job()))
    # The enqueue statement (prepared once per connection): Bind, Execute, Sync.
    assert wire.messages == ["Bind", "Execute", "Sync"]
    found = await service.jobs.get(CALLER, enqueued.id)
    assert found.state == "available"
    events = await service.events.list(CALLER, None, None, None, None, 10)
    assert [event.event.type for event in events] == ["job.enqueued"] * 3


async def test_an_enqueue_for_another_tenant_sets_the_session_tenant_first(
    wired: tuple[Service, Wire],
) -> None:
    service, wire = wired
    other = Caller.for_tenant("other", "test", Role.ADMIN)
    for _ in range(2):  # both enqueue statements prepared (see above)
        await service.jobs.enqueue(CALLER, read_envelope(job()))
    with wire.recording():
        enqueued = await service.jobs.enqueue(other, read_envelope(job()))
        await service.jobs.enqueue(other, read_envelope(job()))
    assert wire.messages == ["Query", "Bind", "Execute", "Sync", "Bind", "Execute", "Sync"]
    assert (await service.jobs.get(other, enqueued.id)).tenant_id == "other"
    with pytest.raises(NotFound):
        await service.jobs.get(CALLER, enqueued.id)


async def test_a_batch_enqueue_is_one_round_trip(wired: tuple[Service, Wire]) -> None:
    """As one job's enqueue: its statement alone, in PostgreSQL's implicit transaction (no
    BEGIN, no COMMIT)."""
    service, wire = wired
    await service.jobs.enqueue(CALLER, read_envelope(job()))
    requests = [read_envelope(job(queue)) for queue in ["mail", "sms", "mail", "push"] * 25]
    with wire.recording():
        jobs = await service.jobs.enqueue_batch(CALLER, requests)
    assert wire.round_trips == 1, wire.messages
    assert len(jobs) == 100
    queues = await service.queues.overview(CALLER)
    assert {queue.name for queue in queues} == {"mail", "sms", "push"}


async def test_a_subscribed_tenant_s_batch_adds_the_transaction_for_its_deliveries(
    wired: tuple[Service, Wire],
) -> None:
    """As one job's enqueue: the first batch tries its statement alone, which finds the
    subscription and writes nothing, then a transaction; the next goes straight to one."""
    service, wire = wired
    await service.jobs.enqueue(CALLER, read_envelope(job()))
    subscription = SubscriptionRequest("https://example.test/hook", ("job.enqueued",), None)
    await service.webhooks.create(CALLER, subscription)
    with wire.recording():
        await service.jobs.enqueue_batch(CALLER, [read_envelope(job()) for _ in range(3)])
    assert wire.round_trips == 5, wire.messages
    with wire.recording():
        await service.jobs.enqueue_batch(CALLER, [read_envelope(job()) for _ in range(3)])
    assert wire.round_trips == 4, wire.messages
    _, deliveries = await service.jobs.list(CALLER, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == 6


async def test_a_duplicate_enqueue_writes_nothing(wired: tuple[Service, Wire]) -> None:
    service, _ = wired
    first = await service.jobs.enqueue(CALLER, read_envelope(job()))
    again = read_envelope({**job("other"), "id": first.id})
    with pytest.raises(Duplicate):
        await service.jobs.enqueue(CALLER, again)
    events = await service.events.list(CALLER, None, None, None, None, 10)
    assert len(events) == 1
    assert {queue.name for queue in await service.queues.overview(CALLER)} == {"mail"}


async def test_a_subscribed_tenant_adds_one_round_trip_for_its_deliveries(
    wired: tuple[Service, Wire],
) -> None:
    """Its first enqueue tries one statement, which finds the subscription and writes nothing,
    then a transaction (BEGIN, the enqueue, the deliveries, COMMIT); its next ones go straight
    to the transaction, until one finds no subscription."""
    service, wire = wired
    await service.jobs.enqueue(CALLER, read_envelope(job()))
    subscription = SubscriptionRequest("https://example.test/hook", ("job.enqueued",), None)
    made = await service.webhooks.create(CALLER, subscription)
    with wire.recording():
        await service.jobs.enqueue(CALLER, read_envelope(job()))
    assert wire.round_trips == 5, wire.messages
    with wire.recording():
        await service.jobs.enqueue(CALLER, read_envelope(job()))
    assert wire.round_trips == 4, wire.messages
    _, deliveries = await service.jobs.list(CALLER, JobFilter(queue=WEBHOOK_QUEUE), 10, 0)
    assert deliveries == 2
    await service.webhooks.delete(CALLER, made.subscription.id)
    await service.jobs.enqueue(CALLER, read_envelope(job()))  # finds none: the hint is dropped
    with wire.recording():
        await service.jobs.enqueue(CALLER, read_envelope(job()))
    assert wire.round_trips == 1, wire.messages
    _, total = await service.jobs.list(CALLER, JobFilter(queue="mail"), 10, 0)
    assert total == 5


async def test_a_scheduled_job_is_one_round_trip_and_wakes_nobody(
    wired: tuple[Service, Wire],
) -> None:
    service, wire = wired
    await service.jobs.enqueue(CALLER, read_envelope(job()))
    later = {**job(), "options": {"queue": "mail", "delay_until": "2099-01-01T00:00:00Z"}}
    with wire.recording():
        scheduled = await service.jobs.enqueue(CALLER, read_envelope(later))
    assert wire.round_trips == 1, wire.messages
    assert (await service.jobs.get(CALLER, scheduled.id)).state == "scheduled"


async def test_a_fetch_of_a_hundred_jobs_is_five_round_trips(
    wired: tuple[Service, Wire],
) -> None:
    """Per claimed batch, not per job: BEGIN, promote due jobs, the claim (which skips paused
    queues and writes the started events itself), the worker's record, COMMIT."""
    service, wire = wired
    await service.jobs.enqueue_batch(CALLER, [read_envelope(job()) for _ in range(100)])
    request = fetch_request({"queues": ["mail"], "count": 100, "worker_id": "w1"})
    with wire.recording():
        claimed = await service.workers.fetch(CALLER, request)
    assert len(claimed) == 100
    assert wire.round_trips == 5, wire.messages
    events = await service.events.list(CALLER, "job.started", None, None, None, 200)
    assert [event.event.subject for event in events] == [job.id for job in claimed]


async def test_an_ack_of_a_hundred_jobs_is_three_round_trips(
    wired: tuple[Service, Wire],
) -> None:
    """BEGIN, the ack statement (the jobs and their events), COMMIT; a refused ack adds the lock
    that reads its job (and finds why)."""
    service, wire = wired
    await service.jobs.enqueue_batch(CALLER, [read_envelope(job()) for _ in range(100)])
    request = fetch_request({"queues": ["mail"], "count": 100, "worker_id": "w1"})
    claimed = await service.workers.fetch(CALLER, request)
    acks = [AckRequest(job.id, "w1", job.lease_token, None) for job in claimed]
    with wire.recording():
        outcomes = await service.workers.ack_many(CALLER, list[AckRequest | OjsError](acks[:99]))
    assert wire.round_trips == 3, wire.messages
    assert {outcome.state for outcome in outcomes if not isinstance(outcome, OjsError)} == {
        "completed"
    }
    with wire.recording():
        outcomes = await service.workers.ack_many(CALLER, list[AckRequest | OjsError](acks[98:]))
    assert wire.round_trips == 4, wire.messages
    assert isinstance(outcomes[0], Conflict)


async def test_a_bulk_retry_checks_the_redrive_policy_where_it_reads_the_ids_it_moves(
    wired: tuple[Service, Wire],
) -> None:
    """Prepared once: the policy's check and the ids read in one transaction (BEGIN, the check,
    the ids, COMMIT), the chunk's (BEGIN, the move, then the incidents' and the tallies' counts
    and the wake-up with COMMIT in one simple query) and the audit record's (BEGIN, the head,
    the record, COMMIT)."""
    service, wire = wired
    for queue in ("first", "second"):
        await make_dead_letters(service, 3, queue)
    await explain_all(service, CALLER)
    for queue in ("first", "second"):
        request = BulkRequest(parse_filter({"queue": queue}, 0), confirm=True)
        with wire.recording():
            result = await service.dead_letters.bulk_retry(CALLER, request)
        assert result.succeeded == 3
    assert wire.round_trips == 11, wire.messages
    assert wire.messages.count("Query") == 6, wire.messages  # a BEGIN and a COMMIT each
    counted = await service.dead_letters.stats(CALLER)
    assert counted.total == 0, counted  # the tallies counted them out, with the COMMIT


async def test_an_audit_record_locks_the_head_then_appends_and_moves_it_in_one_statement(
    wired: tuple[Service, Wire],
) -> None:
    """BEGIN, the head locked (its seq and hash make the record's), the record appended with the
    head moved to it, COMMIT; the chain still verifies."""
    service, wire = wired
    target = {"filter": {"queue": "mail"}}
    await service.audit.record_attempt(CALLER, Action.DEAD_LETTER_PURGE, target)
    with wire.recording():
        await service.audit.record_attempt(CALLER, Action.DEAD_LETTER_PURGE, target)
    assert wire.round_trips == 4, wire.messages
    [check] = await service.audit.verify(CALLER)
    expected = (CALLER.tenant_id, 2, 2, True)
    assert (check.tenant_id, check.records, check.head_seq, check.intact) == expected
