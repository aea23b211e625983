"""Dead-letter replay rules (automatic redrive, stopping at max_replays) and episode history."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from redrive.domain.durations import format_timestamp
from redrive.service.facade import Service
from tests.behaviour.ojs_http import (
    ack,
    assert_error,
    explain_incidents,
    fetch_one,
    forbid_server_errors,
    get_job,
    kill_job,
    nack,
)
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

RULES = "/ojs/v1/dead-letter/rules"
MINUTE = 60_000


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def create_rule(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await client.post(RULES, json=body)
    assert response.status_code == 201, response.text
    rule: dict[str, Any] = response.json()["rule"]
    return rule


async def dead_detail(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await client.get(f"/ojs/v1/dead-letter/{job_id}")
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


async def is_dead(client: httpx.AsyncClient, job_id: str) -> bool:
    return (await client.get(f"/ojs/v1/dead-letter/{job_id}")).status_code == 200


async def die_again(client: httpx.AsyncClient, queue: str, job_id: str, error_type: str) -> None:
    fetched = await fetch_one(client, queue)
    assert fetched["id"] == job_id
    outcome = await nack(client, job_id, type=error_type)
    assert outcome.json()["state"] == "discarded", outcome.text


# --- managing rules -----------------------------------------------------------------------------


async def test_rules_can_be_created_read_changed_and_deleted(client: httpx.AsyncClient) -> None:
    rule = await create_rule(
        client,
        name="retry-connection-errors",
        filter={"error_type": "ConnectionError", "queue": "billing"},
        delay="PT5M",
        max_replays=3,
        enabled=True,
    )
    assert rule["name"] == "retry-connection-errors"
    assert rule["delay"] in ("PT5M", "PT300S")
    assert rule["filter"] == {"error_type": "ConnectionError", "queue": "billing"}
    assert (rule["max_replays"], rule["enabled"], rule["replayed_total"]) == (3, True, 0)
    assert (await client.get(RULES)).json()["rules"] == [rule]
    for key in (rule["id"], rule["name"]):
        assert (await client.get(f"{RULES}/{key}")).json()["rule"] == rule

    response = await client.patch(
        f"{RULES}/{rule['name']}", json={"enabled": False, "delay": "PT1M"}
    )
    assert response.status_code == 200, response.text
    changed = response.json()["rule"]
    assert changed == {**rule, "enabled": False, "delay": changed["delay"]}
    assert changed["delay"] != rule["delay"]
    assert (await client.get(f"{RULES}/{rule['id']}")).json()["rule"] == changed

    duplicate = await client.post(RULES, json={"name": rule["name"], "filter": {"queue": "x"}})
    assert_error(duplicate, 409, "duplicate")

    deleted = await client.delete(f"{RULES}/{rule['id']}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"] is True
    assert_error(await client.get(f"{RULES}/{rule['id']}"), 404, "not_found")
    assert_error(await client.delete(f"{RULES}/{rule['id']}"), 404, "not_found")
    assert (await client.get(RULES)).json()["rules"] == []


GOOD_FILTER = {"error_type": "ConnectionError"}
BAD_RULES = [
    pytest.param({"filter": GOOD_FILTER}, "name", id="no-name"),
    pytest.param({"name": "bad name!", "filter": GOOD_FILTER}, "name", id="bad-name"),
    pytest.param({"name": "r"}, "filter", id="no-filter"),
    pytest.param({"name": "r", "filter": {}}, "filter", id="empty-filter"),
    pytest.param({"name": "r", "filter": {"colour": "red"}}, "filter.colour", id="unknown-key"),
    pytest.param({"name": "r", "filter": "queue=x"}, "filter", id="filter-string"),
    pytest.param({"name": "r", "filter": {"args_match": "nope"}}, "args_match", id="args_match"),
    pytest.param({"name": "r", "filter": {"queue": "Bad Queue"}}, "queue", id="queue"),
    pytest.param({"name": "r", "filter": {"since": "yesterday"}}, "since", id="since"),
    pytest.param({"name": "r", "filter": GOOD_FILTER, "delay": "5 minutes"}, "delay", id="delay"),
    pytest.param({"name": "r", "filter": GOOD_FILTER, "delay": 300}, "delay", id="delay-number"),
    pytest.param({"name": "r", "filter": GOOD_FILTER, "max_replays": 0}, "max_replays", id="zero"),
    pytest.param(
        {"name": "r", "filter": GOOD_FILTER, "max_replays": 1001}, "max_replays", id="too-many"
    ),
    pytest.param(
        {"name": "r", "filter": GOOD_FILTER, "max_replays": "3"}, "max_replays", id="replays-text"
    ),
    pytest.param(
        {"name": "r", "filter": GOOD_FILTER, "max_replays": True}, "max_replays", id="replays-bool"
    ),
    pytest.param({"name": "r", "filter": GOOD_FILTER, "enabled": "yes"}, "enabled", id="enabled"),
]


@pytest.mark.parametrize(("body", "field"), BAD_RULES)
async def test_an_invalid_rule_is_refused_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    error = assert_error(await client.post(RULES, json=body), 400, "invalid_request")
    assert error["details"].get("field") == field, error
    assert (await client.get(RULES)).json()["rules"] == []


async def test_an_invalid_change_leaves_the_rule_as_it_was(client: httpx.AsyncClient) -> None:
    rule = await create_rule(client, name="steady", filter=GOOD_FILTER, max_replays=2)
    changes: list[dict[str, Any]] = [
        {"max_replays": 0}, {"filter": {}}, {"delay": "soon"}, {"enabled": 1},
    ]  # fmt: skip
    for change in changes:
        assert_error(await client.patch(f"{RULES}/steady", json=change), 400, "invalid_request")
    assert (await client.get(f"{RULES}/steady")).json()["rule"] == rule
    assert_error(await client.patch(f"{RULES}/missing", json={"enabled": False}), 404, "not_found")


# --- replaying ----------------------------------------------------------------------------------


async def test_a_rule_waits_for_its_delay_and_records_the_replay_in_meta(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    rule = await create_rule(
        client, name="conn", filter={"error_type": "ConnectionError"}, delay="PT5M"
    )
    matching = await kill_job(client, "net", "net.call", "ConnectionError", args=[{"n": 1}])
    other = await kill_job(client, "net", "net.call", "ValueError")
    assert (await service.sweeper.sweep())["replay"] == 0
    clock.advance(5 * MINUTE - 1)
    assert (await service.sweeper.sweep())["replay"] == 0
    assert await is_dead(client, matching)

    clock.advance(1)
    assert (await service.sweeper.sweep())["replay"] == 1
    replayed = await get_job(client, matching)
    assert (replayed["state"], replayed["attempt"]) == ("available", 0)
    assert replayed["meta"] == {
        "ojs.replay_count": 1,
        "ojs.last_replayed_at": format_timestamp(clock.now_ms()),
        "ojs.replay_rule": "conn",
    }
    assert [error["type"] for error in replayed["errors"]] == ["ConnectionError"]
    assert not await is_dead(client, matching)
    assert await is_dead(client, other)

    history = await client.get("/ojs/v1/dead-letter?status=replayed")
    [episode] = history.json()["jobs"]
    assert (episode["id"], episode["moved_by"]) == (matching, "rule:conn")
    events = (await client.get("/ojs/v1/events?types=dead_letter.replayed")).json()["events"]
    assert [event["subject"] for event in events] == [matching]
    assert (await client.get(f"{RULES}/{rule['id']}")).json()["rule"]["replayed_total"] == 1
    fetched = await fetch_one(client, "net")
    assert (fetched["id"], fetched["args"]) == (matching, [{"n": 1}])


async def test_a_rule_stops_replaying_at_max_replays(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    await create_rule(
        client, name="three-times", filter={"queue": "flaky"}, delay="PT1M", max_replays=3
    )
    job_id = await kill_job(client, "flaky", "net.call", "ConnectionError")
    for replay in (1, 2, 3):
        clock.advance(MINUTE)
        assert (await service.sweeper.sweep())["replay"] == 1
        assert (await get_job(client, job_id))["meta"]["ojs.replay_count"] == replay
        await die_again(client, "flaky", job_id, "ConnectionError")

    for _ in range(3):
        clock.advance(10 * MINUTE)
        assert (await service.sweeper.sweep())["replay"] == 0
        assert await is_dead(client, job_id)

    dead = await dead_detail(client, job_id)
    assert dead["meta"]["ojs.replay_count"] == 3
    assert len(dead["errors"]) == 4
    episodes = dead["episodes"]
    assert [episode["status"] for episode in episodes] == ["replayed"] * 3 + ["dead"]
    assert [episode["replay_count"] for episode in episodes] == [0, 1, 2, 3]
    assert [episode["moved_by"] for episode in episodes] == ["rule:three-times"] * 3 + [None]
    rule = (await client.get(f"{RULES}/three-times")).json()["rule"]
    assert rule["replayed_total"] == 3
    events = (await client.get("/ojs/v1/events?types=dead_letter.replayed")).json()["events"]
    assert len(events) == 3
    metrics = (await client.get("/metrics")).text
    assert 'ojs_dead_letter_replayed_total{queue="flaky"} 3' in metrics

    manual = await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert manual.status_code == 200, manual.text
    assert manual.json()["job"]["state"] == "available"


async def test_a_disabled_rule_waits_until_enabled_and_a_deleted_rule_stops(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    await create_rule(client, name="later", filter={"queue": "paused"}, enabled=False)
    first = await kill_job(client, "paused", "p.job", "E")
    clock.advance(MINUTE)
    assert (await service.sweeper.sweep())["replay"] == 0
    assert await is_dead(client, first)

    response = await client.patch(f"{RULES}/later", json={"enabled": True})
    assert response.json()["rule"]["enabled"] is True
    assert (await service.sweeper.sweep())["replay"] == 1
    assert not await is_dead(client, first)
    assert (await ack(client, (await fetch_one(client, "paused"))["id"])).status_code == 200

    assert (await client.delete(f"{RULES}/later")).status_code == 200
    second = await kill_job(client, "paused", "p.job", "E")
    clock.advance(MINUTE)
    assert (await service.sweeper.sweep())["replay"] == 0
    assert await is_dead(client, second)


async def test_a_rule_replays_only_what_its_filter_selects(
    client: httpx.AsyncClient, clock: ManualClock, service: Service
) -> None:
    await create_rule(
        client,
        name="eu-charges",
        filter={"queue": "payments", "type": "payment.*", "args_match": '$.region == "eu"'},
    )
    ids = {
        "match": await kill_job(client, "payments", "payment.charge", "E", [{"region": "eu"}]),
        "match-2": await kill_job(client, "payments", "payment.refund", "F", [1, {"region": "eu"}]),
        "other-region": await kill_job(
            client, "payments", "payment.charge", "E", [{"region": "us"}]
        ),
        "other-type": await kill_job(client, "payments", "invoice.send", "E", [{"region": "eu"}]),
        "other-queue": await kill_job(client, "refunds", "payment.charge", "E", [{"region": "eu"}]),
    }
    assert (await service.sweeper.sweep())["replay"] == 2
    still_dead = {name for name, job_id in ids.items() if await is_dead(client, job_id)}
    assert still_dead == {"other-region", "other-type", "other-queue"}


# --- episodes -----------------------------------------------------------------------------------


async def test_a_job_retried_out_of_the_queue_that_dies_again_lists_both_episodes(
    client: httpx.AsyncClient, clock: ManualClock
) -> None:
    job_id = await kill_job(client, "twice", "t.job", "FirstError", args=["payload"])
    first = await dead_detail(client, job_id)
    died_first = clock.now_ms()
    clock.advance(MINUTE)
    retried = await client.post(
        f"/ojs/v1/dead-letter/{job_id}/retry", headers={"X-OJS-Actor": "alice"}
    )  # a client-set actor header is not believed: the server records its own name
    assert retried.status_code == 200, retried.text
    retried_at = clock.now_ms()
    clock.advance(MINUTE)
    await die_again(client, "twice", job_id, "SecondError")

    dead = await dead_detail(client, job_id)
    assert (dead["id"], dead["args"], dead["type"]) == (job_id, ["payload"], "t.job")
    assert [error["type"] for error in dead["errors"]] == ["FirstError", "SecondError"]
    assert dead["episodes"] == [
        {
            "episode_id": first["dead_letter_id"],
            "status": "retried",
            "reason": first["dead_letter_reason"],
            "error_type": "FirstError",
            "discarded_at": format_timestamp(died_first),
            "moved_at": format_timestamp(retried_at),
            "moved_by": "api",
            "replay_count": 0,
            "attempts": 1,
            "fingerprint": first["fingerprint"],
            "incident_id": first["incident_id"],
        },
        {
            "episode_id": dead["dead_letter_id"],
            "status": "dead",
            "reason": dead["dead_letter_reason"],
            "error_type": "SecondError",
            "discarded_at": format_timestamp(clock.now_ms()),
            "moved_at": None,
            "moved_by": None,
            "replay_count": 0,
            "attempts": 2,
            "fingerprint": dead["fingerprint"],
            "incident_id": dead["incident_id"],
        },
    ]
    assert first["incident_id"] != dead["incident_id"]  # it died of another error this time

    clock.advance(MINUTE)
    await explain_incidents(client)
    bulk = await client.post(
        "/ojs/v1/dead-letter/retry",
        json={"filter": {"queue": "twice"}, "confirm": True},
        headers={"X-OJS-Actor": "bob"},
    )
    assert bulk.json()["succeeded"] == 1
    await die_again(client, "twice", job_id, "ThirdError")
    episodes = (await dead_detail(client, job_id))["episodes"]
    assert [(e["status"], e["moved_by"]) for e in episodes] == [
        ("retried", "api"), ("retried", "api"), ("dead", None),
    ]  # fmt: skip
    assert [episode["attempts"] for episode in episodes] == [1, 2, 3]
