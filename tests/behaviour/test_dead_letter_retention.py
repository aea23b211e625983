"""Dead-letter retention: policies (global and per queue), pruning by age and count, archives."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.domain.durations import format_timestamp
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from redrive.store.archive import FileArchive
from tests.behaviour.ojs_http import (
    ack,
    assert_error,
    enqueue,
    fetch_one,
    forbid_server_errors,
    kill_job,
    nack,
    retry_policy,
)
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

DAY = 86_400_000
RETENTION = "/ojs/v1/dead-letter/retention"
PRUNE = "/ojs/v1/dead-letter/prune"


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


@pytest.fixture(autouse=True)
async def no_floor(request: pytest.FixtureRequest, client: httpx.AsyncClient) -> None:
    """These tests are about max_age and max_count: the retention floor (min_age, P90D by
    default; tests/behaviour/test_retention_floor.py) is turned off, but for the defaults test."""
    if request.node.originalname != "test_global_policy_has_defaults_and_changes_at_run_time":
        await put_policy(client, {"min_age": "P0D"})


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    return tmp_path / "archive"


@pytest.fixture
def archiving_service(store: Store, clock: ManualClock, archive_dir: Path) -> Service:
    """Like the `service` fixture, but with an archive directory for pruning_policy archive."""
    runtime = Runtime(
        store,
        clock=clock,
        options=ServiceOptions(test_hooks=True),
        rng=random.Random(8),
        archive=FileArchive(str(archive_dir)),
    )
    return Service(runtime)


@pytest.fixture
async def archiving(archiving_service: Service) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(archiving_service, max_body_bytes=64_000)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://archive.test") as http:
        forbid_server_errors(http)
        yield http


async def labels(client: httpx.AsyncClient) -> set[str]:
    """The first arg (a label the test gave) of every dead letter listed now."""
    response = await client.get("/ojs/v1/dead-letter?limit=1000")
    assert response.status_code == 200, response.text
    return {job["args"][0] for job in response.json()["jobs"]}


async def kill_labelled(
    client: httpx.AsyncClient, clock: ManualClock, queue: str, label: str, error_type: str = "Boom"
) -> str:
    """A dead letter in `queue` whose args are [label]; the clock then moves on one second."""
    job_id = await kill_job(client, queue, f"{queue}.job", error_type, args=[label])
    clock.advance(1_000)
    return job_id


async def put_policy(client: httpx.AsyncClient, body: dict[str, Any], queue: str = "") -> None:
    path = f"{RETENTION}/{queue}" if queue else RETENTION
    response = await client.put(path, json=body)
    assert response.status_code == 200, response.text


async def prune_now(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post(PRUNE, json={"confirm": True})
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    return report


async def detail(client: httpx.AsyncClient, job_id: str) -> httpx.Response:
    response = await client.get(f"/ojs/v1/dead-letter/{job_id}")
    assert response.status_code == 200, response.text
    return response


# --- policies -----------------------------------------------------------------------------------


async def test_global_policy_has_defaults_and_changes_at_run_time(
    client: httpx.AsyncClient, service: Service
) -> None:
    body = (await client.get(RETENTION)).json()
    assert body["global"] == {
        "queue": None, "scope": "global", "max_age": "P180D", "max_count": 10_000,
        "pruning_policy": "delete", "min_age": "P90D",
    }  # fmt: skip
    assert body["queues"] == []
    assert body["next_prune_at"] == format_timestamp(service.retention.next_prune_at())

    response = await client.put(
        RETENTION, json={"max_age": "P30D", "max_count": 100, "pruning_policy": "delete"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["policy"]["max_age"] == "P30D"
    await put_policy(client, {"max_count": 50})
    expected = {
        "max_age": "P30D", "max_count": 50, "pruning_policy": "delete", "min_age": "P90D",
    }  # fmt: skip
    assert (await client.get(RETENTION)).json()["global"] == {
        "queue": None, "scope": "global", **expected,
    }  # fmt: skip
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()["retention"]
    assert {key: stats[key] for key in expected} == expected
    assert stats["queues"] == {}


BAD_POLICIES = [
    pytest.param({"max_age": "30 days"}, "max_age", id="max_age-prose"),
    pytest.param({"max_age": "P0D"}, "max_age", id="max_age-zero-days"),
    pytest.param({"max_age": "PT0S"}, "max_age", id="max_age-zero-seconds"),
    pytest.param({"max_age": "-P1D"}, "max_age", id="max_age-negative"),
    pytest.param({"max_age": ""}, "max_age", id="max_age-empty"),
    pytest.param({"max_age": 30}, "max_age", id="max_age-number"),
    pytest.param({"max_count": 0}, "max_count", id="max_count-zero"),
    pytest.param({"max_count": -5}, "max_count", id="max_count-negative"),
    pytest.param({"max_count": "100"}, "max_count", id="max_count-string"),
    pytest.param({"max_count": True}, "max_count", id="max_count-boolean"),
    pytest.param({"max_count": 2.5}, "max_count", id="max_count-fraction"),
    pytest.param({"max_count": 10**12}, "max_count", id="max_count-huge"),
    pytest.param({"pruning_policy": "shred"}, "pruning_policy", id="policy-unknown"),
    pytest.param({"pruning_policy": "DELETE"}, "pruning_policy", id="policy-uppercase"),
    pytest.param({"pruning_policy": None}, "pruning_policy", id="policy-null"),
    pytest.param({"max_age": "P30D", "max_count": 0}, "max_count", id="one-bad-of-two"),
]


@pytest.mark.parametrize("queue", ["", "billing"], ids=["global", "queue"])
@pytest.mark.parametrize(("body", "field"), BAD_POLICIES)
async def test_an_invalid_policy_is_refused_naming_the_field_and_changes_nothing(
    client: httpx.AsyncClient, body: dict[str, Any], field: str, queue: str
) -> None:
    path = f"{RETENTION}/{queue}" if queue else RETENTION
    before = (await client.get(RETENTION)).json()
    error = assert_error(await client.put(path, json=body), 400, "invalid_request")
    assert error["details"].get("field") == field, error
    assert field in error["message"]
    assert (await client.get(RETENTION)).json() == before
    if queue:
        policy = (await client.get(f"{RETENTION}/{queue}")).json()["policy"]
        assert policy["scope"] == "global"


async def test_unknown_policy_fields_and_bad_queue_names_are_refused(
    client: httpx.AsyncClient,
) -> None:
    error = assert_error(
        await client.put(RETENTION, json={"max_ages": "P1D"}), 400, "invalid_request"
    )
    assert "max_ages" in error["message"]
    assert_error(await client.put(RETENTION, json=["P1D"]), 400, "invalid_request")
    assert_error(
        await client.put(f"{RETENTION}/Bad Queue", json={"max_count": 5}), 400, "invalid_request"
    )
    assert (await client.get(RETENTION)).json()["queues"] == []


async def test_a_queue_override_is_readable_changeable_and_removable_at_run_time(
    client: httpx.AsyncClient,
) -> None:
    await put_policy(client, {"max_age": "P30D", "max_count": 100})
    inherited = (await client.get(f"{RETENTION}/billing")).json()["policy"]
    assert inherited == {
        "queue": "billing", "scope": "global", "max_age": "P30D", "max_count": 100,
        "pruning_policy": "delete", "min_age": "PT0S",
    }  # fmt: skip

    response = await client.put(f"{RETENTION}/billing", json={"max_count": 5})
    assert response.status_code == 200, response.text
    own = {"queue": "billing", "scope": "queue", "max_age": "P30D", "max_count": 5,
           "pruning_policy": "delete", "min_age": "PT0S"}  # fmt: skip
    assert response.json()["policy"] == own
    assert (await client.get(f"{RETENTION}/billing")).json()["policy"] == own

    await put_policy(client, {"max_age": "P365D", "pruning_policy": "archive"}, "billing")
    changed = {**own, "max_age": "P365D", "pruning_policy": "archive"}
    assert (await client.get(f"{RETENTION}/billing")).json()["policy"] == changed
    listing = (await client.get(RETENTION)).json()
    assert listing["queues"] == [changed]
    assert listing["global"]["max_count"] == 100
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()["retention"]
    assert stats["queues"] == {
        "billing": {
            "max_age": "P365D", "max_count": 5, "pruning_policy": "archive", "min_age": "PT0S",
        }
    }  # fmt: skip
    other = (await client.get(f"{RETENTION}/mail")).json()["policy"]
    assert (other["scope"], other["max_count"]) == ("global", 100)

    response = await client.delete(f"{RETENTION}/billing")
    assert response.status_code == 200, response.text
    assert response.json() == {"deleted": True, "queue": "billing"}
    assert (await client.get(f"{RETENTION}/billing")).json()["policy"] == inherited
    assert (await client.get(RETENTION)).json()["queues"] == []
    assert_error(await client.delete(f"{RETENTION}/billing"), 404, "not_found")


async def test_removing_an_override_puts_the_queue_back_under_the_global_cap(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("b1", "b2", "b3"):
        await kill_labelled(client, clock, "billing", label)
    await kill_labelled(client, clock, "mail", "m1")
    await put_policy(client, {"max_count": 1}, "billing")
    assert (await client.delete(f"{RETENTION}/billing")).status_code == 200

    report = await prune_now(client)
    assert (report["deleted"], report["archived"]) == (0, 0)
    assert await labels(client) == {"b1", "b2", "b3", "m1"}

    await put_policy(client, {"max_count": 2})
    report = await prune_now(client)
    assert report["deleted"] == 2
    assert report["by_queue"] == {"billing": 2}
    assert await labels(client) == {"b3", "m1"}


# --- pruning ------------------------------------------------------------------------------------


async def test_pruning_by_age_honours_per_queue_overrides(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    """Global: 10 days. billing: 30 days but at most 2. audit: 3 days. Now is day 14."""
    start = clock.now_ms()
    for day, entries in (
        (0, [("mail", "mail-0"), ("billing", "billing-0"), ("audit", "audit-0")]),
        (5, [("mail", "mail-5"), ("billing", "billing-5"), ("audit", "audit-5")]),
        (12, [("mail", "mail-12"), ("other", "other-12"), ("billing", "billing-12"),
              ("audit", "audit-12")]),
        (14, [("billing", "billing-14")]),
    ):  # fmt: skip
        clock.current = start + day * DAY
        for queue, label in entries:
            await kill_labelled(client, clock, queue, label)
    clock.current = start + 14 * DAY + 3_600_000
    await put_policy(client, {"max_age": "P10D", "max_count": 100})
    await put_policy(client, {"max_age": "P30D", "max_count": 2}, "billing")
    await put_policy(client, {"max_age": "P3D"}, "audit")

    report = await prune_now(client)
    assert report == {
        "deleted": 5, "archived": 0, "dead_letters": 5,
        "by_queue": {"mail": 1, "billing": 2, "audit": 2},
        "archives": [], "floor_holding": {},
    }  # fmt: skip
    assert await labels(client) == {
        "mail-5", "mail-12", "other-12", "billing-12", "billing-14", "audit-12",
    }  # fmt: skip
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["total"] == 6
    assert stats["by_queue"] == {"mail": 2, "other": 1, "billing": 2, "audit": 1}
    assert stats["oldest_at"] == format_timestamp(start + 5 * DAY)
    assert (await prune_now(client))["deleted"] == 0


async def test_pruning_by_count_caps_overridden_queues_alone_and_the_rest_together(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    """Global max_count 3 over a, b, c together; vip keeps 5 of its own; tiny keeps 1."""
    for label in ("vip-1", "vip-2", "vip-3", "vip-4"):
        await kill_labelled(client, clock, "vip", label)
    for queue, label in (("a", "a-1"), ("b", "b-1"), ("tiny", "tiny-1"), ("c", "c-1"),
                         ("a", "a-2"), ("tiny", "tiny-2"), ("b", "b-2"), ("c", "c-2"),
                         ("tiny", "tiny-3")):  # fmt: skip
        await kill_labelled(client, clock, queue, label)
    await put_policy(client, {"max_count": 3})
    await put_policy(client, {"max_count": 5}, "vip")
    await put_policy(client, {"max_count": 1}, "tiny")

    report = await prune_now(client)
    assert report["deleted"] == 5
    assert report["by_queue"] == {"a": 1, "b": 1, "c": 1, "tiny": 2}
    assert await labels(client) == {
        "vip-1", "vip-2", "vip-3", "vip-4", "a-2", "b-2", "c-2", "tiny-3",
    }  # fmt: skip
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["by_queue"] == {"vip": 4, "a": 1, "b": 1, "c": 1, "tiny": 1}


async def test_age_and_count_together_remove_old_ones_then_the_oldest_beyond_the_cap(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("old-1", "old-2"):
        await kill_labelled(client, clock, "mixed", label)
    clock.advance(20 * DAY)
    for label in ("new-1", "new-2", "new-3", "new-4"):
        await kill_labelled(client, clock, "mixed", label)
    await put_policy(client, {"max_age": "P7D", "max_count": 3})
    report = await prune_now(client)
    assert (report["deleted"], report["by_queue"]) == (3, {"mixed": 3})
    assert await labels(client) == {"new-2", "new-3", "new-4"}


async def test_one_prune_batch_over_many_groups_leaves_every_tally_exact(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    """The batch's tally changes (one row per queue, type and error type) are written by one
    statement: every group it touched is counted down by its own share, the others not at all."""
    groups = [
        (queue, f"{queue}.{kind}", error_type)
        for queue in ("mail", "sms")
        for kind in ("send", "digest")
        for error_type in ("Timeout", "Refused")
    ]
    for copies, (queue, job_type, error_type) in enumerate(groups, start=1):
        for _ in range(copies % 3 + 1):
            await kill_job(client, queue, job_type, error_type)
    clock.advance(10 * DAY)
    await kill_job(client, "mail", "mail.send", "Timeout")  # young: stays
    await kill_job(client, "push", "push.send", "Gone")  # young, in a group nothing prunes
    await put_policy(client, {"max_age": "P5D"})

    report = await prune_now(client)
    assert report["deleted"] == sum(copies % 3 + 1 for copies in range(1, len(groups) + 1))
    stats = (await client.get("/ojs/v1/dead-letter/stats")).json()
    assert stats["total"] == 2
    assert stats["by_queue"] == {"mail": 1, "push": 1}
    assert stats["by_type"] == {"mail.send": 1, "push.send": 1}
    assert stats["by_error_type"] == {"Timeout": 1, "Gone": 1}


async def test_the_sweeper_prunes_when_the_interval_boundary_passes(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    for label in ("s1", "s2", "s3"):
        await kill_labelled(client, clock, "swept", label)
    await put_policy(client, {"max_count": 1})
    boundary = service.retention.next_prune_at()
    assert boundary > clock.now_ms()
    assert "prune" not in await service.sweeper.sweep()
    assert await labels(client) == {"s1", "s2", "s3"}

    clock.current = boundary
    assert (await service.sweeper.sweep())["prune"] == 2
    assert await labels(client) == {"s3"}
    assert "prune" not in await service.sweeper.sweep()
    after = (await client.get(RETENTION)).json()["next_prune_at"]
    assert after == format_timestamp(boundary + service.runtime.options.prune_interval_ms)


async def test_pruning_emits_dead_letter_pruned_events_and_metrics_with_counts(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    for queue, label in (("alpha", "a1"), ("alpha", "a2"), ("alpha", "a3"), ("beta", "b1"),
                         ("beta", "b2"), ("gamma", "g1")):  # fmt: skip
        await kill_labelled(client, clock, queue, label)
    await put_policy(client, {"max_count": 1}, "alpha")
    await put_policy(client, {"max_count": 1}, "beta")
    report = await prune_now(client)
    assert report["by_queue"] == {"alpha": 2, "beta": 1}

    events = (await client.get("/ojs/v1/events?types=dead_letter.pruned")).json()["events"]
    counts = {event["data"]["queue"]: event["data"]["count"] for event in events}
    assert counts == {"alpha": 2, "beta": 1}
    assert all(event["time"] == format_timestamp(clock.now_ms()) for event in events)
    metrics = (await client.get("/metrics")).text
    assert 'ojs_dead_letter_pruned_total{queue="alpha"} 2' in metrics
    assert 'ojs_dead_letter_pruned_total{queue="beta"} 1' in metrics
    assert 'ojs_dead_letter_total{queue="alpha"} 1' in metrics
    assert 'ojs_dead_letter_total{queue="gamma"} 1' in metrics

    await kill_labelled(client, clock, "beta", "b3")
    clock.current = service.sweeper.next_prune_at  # the sweeper starts its interval when built
    assert (await service.sweeper.sweep())["prune"] == 1
    events = (await client.get("/ojs/v1/events?types=dead_letter.pruned")).json()["events"]
    assert [(event["data"]["queue"], event["data"]["count"]) for event in events[2:]] == [
        ("beta", 1)
    ]
    assert await labels(client) == {"a3", "b3", "g1"}


async def test_prune_needs_confirm_and_has_no_dry_run(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    await kill_labelled(client, clock, "kept", "k1")
    await kill_labelled(client, clock, "kept", "k2")
    await put_policy(client, {"max_count": 1})
    for body in ({}, {"confirm": False}, {"dry_run": True}):
        assert_error(await client.post(PRUNE, json=body), 400, "invalid_request")
    assert await labels(client) == {"k1", "k2"}
    events = (await client.get("/ojs/v1/events?types=dead_letter.pruned")).json()["events"]
    assert events == []


# --- archives -----------------------------------------------------------------------------------


async def kill_with_history(client: httpx.AsyncClient, clock: ManualClock, service: Service) -> str:
    """A job with a rich envelope that dies after three attempts, each with a different error."""
    job = await enqueue(
        client,
        "invoice.generate",
        [
            {"customer_id": "cust_123", "amount": 9999, "ratio": 0.25, "vip": True, "note": None,
             "city": "Zürich ✓", "lines": [1, "two", 3.5, {"deep": [False]}]},
            "second",
            42,
        ],
        meta={"trace_id": "t-1", "nested": {"k": [1, 2]}, "ünïcode": "✓"},
        queue="billing",
        priority=5,
        tags=["finance", "eu"],
        timeout_ms=30_000,
        retry=retry_policy(3, "dead_letter", jitter=False),
    )  # fmt: skip
    for attempt, (error_type, message) in enumerate(
        [("DatabaseConnectionError", "connection refused to billing-db:5432"),
         ("TimeoutError", "timed out after 30s"),
         ("DatabaseConnectionError", 'quote " and newline\n and tab\t')],
        start=1,
    ):  # fmt: skip
        await fetch_one(client, "billing")
        details = {"backtrace": ["at db.go:142", "at handler.go:58"], "attempt_seen": attempt}
        outcome = (await nack(client, job["id"], type=error_type, message=message,
                              details=details)).json()  # fmt: skip
        if attempt < 3:
            assert outcome["state"] == "retryable"
            clock.advance(60_000)
            await service.sweeper.sweep()
    assert outcome["state"] == "discarded"
    return str(job["id"])


async def test_archive_then_restore_round_trips_the_dead_letter_byte_for_byte(
    archiving: httpx.AsyncClient,
    archiving_service: Service,
    clock: ManualClock,
    archive_dir: Path,
) -> None:
    rich = await kill_with_history(archiving, clock, archiving_service)
    plain = await kill_labelled(archiving, clock, "mail", "plain", "SmtpError")
    numbers = await kill_job(archiving, "mail", "num.job", "E", args=[0, -1.5, 1e20, True, None])
    ids = [rich, plain, numbers]
    before = {job_id: await detail(archiving, job_id) for job_id in ids}
    assert len(before[rich].json()["job"]["errors"]) == 3

    await put_policy(archiving, {"max_age": "P10D", "pruning_policy": "archive"})
    clock.advance(11 * DAY)
    report = await prune_now(archiving)
    assert (report["deleted"], report["archived"]) == (0, 3)
    assert report["by_queue"] == {"billing": 1, "mail": 2}
    assert len(report["archives"]) == 1
    name = report["archives"][0]
    for job_id in ids:
        assert_error(await archiving.get(f"/ojs/v1/dead-letter/{job_id}"), 404, "not_found")
    assert (await archiving.get("/ojs/v1/dead-letter/stats")).json()["total"] == 0

    archives = (await archiving.get("/ojs/v1/dead-letter/archives")).json()["archives"]
    assert archives == [
        {"name": name, "entries": 3, "created_at": format_timestamp(clock.now_ms()),
         "restored_at": None}
    ]  # fmt: skip
    with gzip.open(archive_dir / name, "rt", encoding="utf-8") as lines:
        archived = [json.loads(line) for line in lines]
    assert sorted(row["job_id"] for row in archived) == sorted(ids)

    clock.advance(60_000)
    response = await archiving.post(f"/ojs/v1/dead-letter/archives/{name}/restore")
    assert response.status_code == 200, response.text
    assert response.json() == {"entries": 3, "restored": 3, "skipped": 0}
    for job_id in ids:
        after = await detail(archiving, job_id)
        assert after.json()["job"] == before[job_id].json()["job"]
        assert after.content == before[job_id].content
    stats = (await archiving.get("/ojs/v1/dead-letter/stats")).json()
    assert (stats["total"], stats["by_queue"]) == (3, {"billing": 1, "mail": 2})

    again = await archiving.post(f"/ojs/v1/dead-letter/archives/{name}/restore")
    assert again.json() == {"entries": 3, "restored": 0, "skipped": 3}
    assert (await archiving.get("/ojs/v1/dead-letter/stats")).json()["total"] == 3
    archives = (await archiving.get("/ojs/v1/dead-letter/archives")).json()["archives"]
    assert archives[0]["restored_at"] == format_timestamp(clock.now_ms())


async def test_archive_by_count_then_restore_brings_back_exactly_the_archived_ones(
    archiving: httpx.AsyncClient, clock: ManualClock
) -> None:
    ids = {label: await kill_labelled(archiving, clock, "capped", label) for label in "abcde"}
    before = {label: await detail(archiving, job_id) for label, job_id in ids.items()}
    await put_policy(archiving, {"max_count": 2, "pruning_policy": "archive"})
    report = await prune_now(archiving)
    assert (report["deleted"], report["archived"]) == (0, 3)
    assert await labels(archiving) == {"d", "e"}

    for name in report["archives"]:
        response = await archiving.post(f"/ojs/v1/dead-letter/archives/{name}/restore")
        assert response.status_code == 200, response.text
    assert await labels(archiving) == set("abcde")
    for label, job_id in ids.items():
        assert (await detail(archiving, job_id)).content == before[label].content


async def test_per_queue_pruning_policy_archives_one_queue_and_deletes_the_others(
    archiving: httpx.AsyncClient, clock: ManualClock
) -> None:
    for queue, label in (("billing", "b1"), ("mail", "m1"), ("billing", "b2"), ("mail", "m2")):
        await kill_labelled(archiving, clock, queue, label)
    await put_policy(archiving, {"max_age": "P1D"})
    await put_policy(archiving, {"pruning_policy": "archive"}, "billing")
    clock.advance(2 * DAY)
    report = await prune_now(archiving)
    assert (report["deleted"], report["archived"]) == (2, 2)
    assert report["by_queue"] == {"billing": 2, "mail": 2}
    assert await labels(archiving) == set()

    listed = (await archiving.get("/ojs/v1/dead-letter/archives")).json()["archives"]
    assert [archive["name"] for archive in listed] == report["archives"]
    assert sum(archive["entries"] for archive in listed) == 2
    for name in report["archives"]:
        await archiving.post(f"/ojs/v1/dead-letter/archives/{name}/restore")
    assert await labels(archiving) == {"b1", "b2"}


async def test_restore_keeps_each_episode_as_it_was(
    archiving: httpx.AsyncClient,
    archiving_service: Service,
    clock: ManualClock,
) -> None:
    """A job that died, was retried and died again, and a job that was retried and completed:
    after archive and restore, the first is dead once with both episodes, the second not dead."""
    twice = await kill_job(archiving, "history", "h.job", "FirstError")
    clock.advance(1_000)
    retried = await archiving.post(
        f"/ojs/v1/dead-letter/{twice}/retry", headers={"X-OJS-Actor": "alice"}
    )
    assert retried.status_code == 200, retried.text
    await fetch_one(archiving, "history")
    assert (await nack(archiving, twice, type="SecondError")).json()["state"] == "discarded"

    healed = await kill_job(archiving, "history", "h.job", "Flaky")
    assert (await archiving.post(f"/ojs/v1/dead-letter/{healed}/retry")).status_code == 200
    await fetch_one(archiving, "history")
    assert (await ack(archiving, healed)).status_code == 200

    before = await detail(archiving, twice)
    assert [episode["status"] for episode in before.json()["job"]["episodes"]] == [
        "retried", "dead",
    ]  # fmt: skip
    await put_policy(archiving, {"max_age": "P1D", "pruning_policy": "archive"})
    clock.advance(2 * DAY)
    report = await prune_now(archiving)
    assert report["by_queue"] == {"history": 1}
    assert (await archiving.get("/ojs/v1/dead-letter/stats")).json()["total"] == 0

    for name in report["archives"]:
        response = await archiving.post(f"/ojs/v1/dead-letter/archives/{name}/restore")
        assert response.status_code == 200, response.text
    after = await detail(archiving, twice)
    assert after.json()["job"] == before.json()["job"]
    assert after.content == before.content
    assert_error(await archiving.get(f"/ojs/v1/dead-letter/{healed}"), 404, "not_found")
    listed = (await archiving.get("/ojs/v1/dead-letter")).json()
    assert [job["id"] for job in listed["jobs"]] == [twice]
    stats = (await archiving.get("/ojs/v1/dead-letter/stats")).json()
    assert (stats["total"], stats["by_error_type"]) == (1, {"SecondError": 1})


async def test_restore_of_an_unknown_archive_is_404(archiving: httpx.AsyncClient) -> None:
    for name in ("nope.jsonl.gz", "..%2F..%2Fetc%2Fpasswd"):
        response = await archiving.post(f"/ojs/v1/dead-letter/archives/{name}/restore")
        assert response.status_code == 404, response.text


async def test_archive_policy_without_an_archive_directory_loses_nothing(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("x1", "x2", "x3"):
        await kill_labelled(client, clock, "noarchive", label)
    await put_policy(client, {"max_count": 1, "pruning_policy": "archive"})
    response = await client.post(PRUNE, json={"confirm": True})
    assert 400 <= response.status_code < 500, response.text
    assert await labels(client) == {"x1", "x2", "x3"}
    assert (await client.get("/ojs/v1/dead-letter/stats")).json()["total"] == 3
    assert (await client.get("/ojs/v1/dead-letter/archives")).json()["archives"] == []
