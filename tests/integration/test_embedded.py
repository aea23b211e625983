"""`redrive.Embedded`: enqueue one and many and retry dead letters by filter on a database URL,
with no server, on both stores."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import redrive
from redrive.api.worker_requests import fetch_request, nack_request
from redrive.client import JobSpec
from redrive.domain.errors import Duplicate, InvalidRequest, RootCauseRequired
from redrive.ports import JobFilter
from redrive.settings import Settings
from tests.support.callers import CALLER

pytestmark = pytest.mark.anyio
DEAD_ON_FIRST_FAILURE = {"max_attempts": 1, "on_exhaustion": "dead_letter"}


async def test_enqueue_one_and_many_commit_jobs_and_their_events(database_url: str) -> None:
    async with redrive.Embedded(database_url, settings=Settings()) as jobs:
        first = await jobs.enqueue("mail.send", ["ada"], queue="mail", priority=3)
        many = await jobs.enqueue_many(
            [JobSpec("mail.send", [n], queue="mail") for n in range(3)]
            + [{"type": "sms.send", "args": [], "options": {"queue": "sms"}}]
        )
        service = jobs.service
        found = await service.jobs.get(CALLER, first)
        assert (found.type, found.queue, found.priority, found.args) == (
            "mail.send",
            "mail",
            3,
            ["ada"],
        )
        assert len(many) == 4 and len(set(many)) == 4
        events = await service.events.list(CALLER, None, None, None, None, 100)
        assert sorted(str(event.event.subject) for event in events) == sorted([first, *many])
    # Reopened: what was enqueued is there (committed before the call returned).
    async with redrive.Embedded(database_url, settings=Settings()) as again:
        assert (await again.service.jobs.get(CALLER, many[-1])).queue == "sms"


async def test_bad_input_is_refused_and_writes_nothing(database_url: str) -> None:
    async with redrive.Embedded(database_url, settings=Settings()) as jobs:
        with pytest.raises(InvalidRequest):
            await jobs.enqueue("", [])
        taken = await jobs.enqueue("mail.send", [], id="019a0000-0000-7000-8000-000000000001")
        with pytest.raises(Duplicate):
            await jobs.enqueue_many(
                [JobSpec("mail.send", [1]), JobSpec("mail.send", [2], id=taken)]
            )
        with pytest.raises(InvalidRequest):
            await jobs.retry_dead_letters({"colour": "red"})
        listed, total = await jobs.service.jobs.list(CALLER, JobFilter(), 10, 0)
        assert total == 1 and [job.id for job in listed] == [taken]


class Recorded(Mapping[str, Any]):
    """An envelope that records whether the cyclic collector runs while it is read."""

    def __init__(self, body: dict[str, Any], seen: list[bool]) -> None:
        self.body = body
        self.seen = seen

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def __iter__(self) -> Iterator[str]:
        self.seen.append(gc.isenabled())
        return iter(self.body)

    def __len__(self) -> int:
        return len(self.body)


async def test_enqueue_many_pauses_the_collector_and_leaves_it_as_it_was(
    database_url: str,
) -> None:
    """The collector is paused while a batch is made, and enabled again after the call, whether
    it succeeds or fails; one the caller paused stays paused."""
    seen: list[bool] = []
    async with redrive.Embedded(database_url, settings=Settings()) as jobs:
        assert gc.isenabled()
        await jobs.enqueue_many([Recorded({"type": "mail.send", "args": [1]}, seen)])
        assert seen == [False] and gc.isenabled()
        with pytest.raises(InvalidRequest):
            await jobs.enqueue_many([Recorded({"type": "", "args": []}, seen)])
        assert seen == [False, False] and gc.isenabled()
        gc.disable()
        try:
            await jobs.enqueue_many([Recorded({"type": "mail.send", "args": [2]}, seen)])
            assert not gc.isenabled()
        finally:
            gc.enable()
        _, total = await jobs.service.jobs.list(CALLER, JobFilter(), 10, 0)
        assert total == 2


async def test_retry_dead_letters_by_filter(database_url: str) -> None:
    async with redrive.Embedded(database_url, settings=Settings()) as jobs:
        dead = [
            await jobs.enqueue(kind, [], queue=queue, options={"retry": DEAD_ON_FIRST_FAILURE})
            for kind, queue in [("mail.send", "mail"), ("mail.send", "mail"), ("sms.send", "sms")]
        ]
        await _fail_all(jobs, dead)
        with pytest.raises(RootCauseRequired) as refused:
            await jobs.retry_dead_letters({"queue": "mail"})
        [incident] = refused.value.details["incidents"]
        await jobs.record_root_cause(incident["id"], "infrastructure", "relay down", "PR #3")
        assert await jobs.retry_dead_letters({"queue": "mail"}) == 2
        assert await jobs.retry_dead_letters({"queue": "mail"}) == 0
        with pytest.raises(InvalidRequest):  # a redrive of everything is refused
            await jobs.retry_dead_letters()
        states = {(await jobs.service.jobs.get(CALLER, job)).state for job in dead[:2]}
        assert states == {"available"}
        assert (await jobs.service.jobs.get(CALLER, dead[2])).state == "discarded"


async def _fail_all(jobs: redrive.Embedded, ids: list[str]) -> None:
    """Each job fetched and failed once: with max_attempts 1 it goes to the dead-letter queue."""
    service = jobs.service
    claimed = await service.workers.fetch(
        CALLER, fetch_request({"queues": ["mail", "sms"], "count": len(ids)})
    )
    assert sorted(job.id for job in claimed) == sorted(ids)
    for job in claimed:
        failure = {"job_id": job.id, "error": {"code": "x", "message": "no"}}
        assert (await service.workers.nack(CALLER, nack_request(failure))).state == "discarded"
