"""Incident classes, root-cause records and the redrive policy on both stores: classification by
the built-in and configured rules and by operators, root-cause records (author from the caller,
dates, revisions, each edit audited, the Markdown template), the refusal of a redrive that touches
unexplained incidents (bulk by filter, by incident, a selection, dead letters in no incident),
single retries with a reason, the strict setting, poison pills and their override, and replay
rules that leave business and poison-pill incidents alone."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.domain.audit import Action, AuditQuery
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter import RetryOverride
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.errors import Forbidden, PoisonPill, RootCauseRequired
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.replay import RuleChanges
from redrive.domain.root_cause import parse_root_cause, parse_rules
from redrive.ports import Store
from redrive.service.dead_letters import RetryIntent
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from tests.behaviour.ojs_http import (
    assert_error,
    explain_incidents,
    forbid_server_errors,
    get_job,
    kill_job,
)
from tests.behaviour.test_incidents import forget_incidents
from tests.support.callers import CALLER, acting_as
from tests.support.clock import ManualClock
from tests.support.options import service_options

pytestmark = pytest.mark.anyio

INCIDENTS = "/ojs/v1/admin/incidents"
FIXED = {"category": "infrastructure", "root_cause": "the relay was down", "fix_reference": "PR 7"}


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def incident_of(client: httpx.AsyncClient, job_id: str) -> str:
    response = await client.get(f"/ojs/v1/dead-letter/{job_id}")
    assert response.status_code == 200, response.text
    return str(response.json()["job"]["incident_id"])


async def incident(client: httpx.AsyncClient, incident_id: str) -> dict[str, Any]:
    response = await client.get(f"{INCIDENTS}/{incident_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()["incident"]
    return found


async def explain(client: httpx.AsyncClient, incident_id: str, **changes: Any) -> dict[str, Any]:
    response = await client.put(f"{INCIDENTS}/{incident_id}/root-cause", json=FIXED | changes)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def bulk_retry(client: httpx.AsyncClient, **filters: str) -> httpx.Response:
    return await client.post("/ojs/v1/dead-letter/retry", json={"filter": filters, "confirm": True})


async def dead_count(service: Service) -> int:
    return (await service.dead_letters.stats(CALLER)).total


async def audited(service: Service, action: Action) -> list[dict[str, Any]]:
    found = await service.audit.list(CALLER, AuditQuery(action=action, limit=100))
    return [dict(record.target_value()) for record in found]


@pytest.fixture
async def configured(store: Store, clock: ManualClock) -> AsyncIterator[httpx.AsyncClient]:
    """A server with classification rules configured and strict single retries."""
    rules = parse_rules(
        [
            {"class": "poison_pill", "type": "report.*"},
            {"class": "business", "error_type": "timeout.*", "message": "quota"},
        ]
    )
    options = ServiceOptions(
        **{**vars(service_options()), "classification_rules": rules, "strict_redrive": True}
    )
    service = Service(Runtime(store, clock=clock, options=options, rng=random.Random(3)))
    transport = httpx.ASGITransport(app=create_app(service, max_body_bytes=64_000))
    async with httpx.AsyncClient(transport=transport, base_url="http://rules.test") as http:
        forbid_server_errors(http)
        yield http


# --- classification -----------------------------------------------------------------------------


async def test_incidents_open_with_the_class_the_built_in_rules_give(
    client: httpx.AsyncClient,
) -> None:
    expected = {
        "TimeoutError": "infrastructure", "ConnectionRefusedError": "infrastructure",
        "KeyError": "contract", "ValidationError": "contract",
        "CardDeclined": "business", "Boom": "unclassified",
    }  # fmt: skip
    for error_type, classification in expected.items():
        found = await incident(client, await incident_of(client, await kill_job(
            client, job_type="work.item", error_type=error_type)))  # fmt: skip
        assert found["class"] == classification, error_type
        assert found["classified_by"] is None
        assert found["default_action"]


async def test_configured_rules_come_before_the_built_in_ones(
    configured: httpx.AsyncClient,
) -> None:
    report = await kill_job(configured, job_type="report.build", error_type="TimeoutError")
    quota = await kill_job(configured, job_type="sync.push", error_type="TimeoutError",
                           args=[{"reason": "quota"}])  # fmt: skip
    plain = await kill_job(configured, job_type="sync.pull", error_type="TimeoutError")
    assert (await incident(configured, await incident_of(configured, report)))["class"] == (
        "poison_pill"
    )
    # The message is "TimeoutError happened": no quota in it, so the built-in rule decides.
    assert (await incident(configured, await incident_of(configured, quota)))["class"] == (
        "infrastructure"
    )
    assert (await incident(configured, await incident_of(configured, plain)))["class"] == (
        "infrastructure"
    )


async def test_an_operator_classifies_an_incident_audited_and_announced(
    client: httpx.AsyncClient, service: Service
) -> None:
    incident_id = await incident_of(client, await kill_job(client, error_type="Boom"))
    bad_bodies: list[Any] = [{}, {"class": "weather"}, {"class": "contract", "why": "x"}, [], 1]
    for bad in bad_bodies:
        refused = await client.post(f"{INCIDENTS}/{incident_id}/classify", json=bad)
        assert_error(refused, 400, "invalid_request")
    assert (await incident(client, incident_id))["class"] == "unclassified"
    missing = await client.post(f"{INCIDENTS}/inc_{'0' * 24}/classify", json={"class": "business"})
    assert_error(missing, 404, "not_found")

    changed = await client.post(f"{INCIDENTS}/{incident_id}/classify", json={"class": "business"})
    assert changed.status_code == 200, changed.text
    found = changed.json()["incident"]
    assert (found["class"], found["classified_by"]) == ("business", "api")
    assert "manual decision" in found["default_action"]
    assert await audited(service, Action.INCIDENT_CLASSIFY) == [
        {"incident_id": incident_id, "class": "business", "class_before": "unclassified"}
    ]
    events = await client.get("/ojs/v1/events", params={"types": "incident.classified"})
    [event] = events.json()["events"]
    assert event["data"]["class"] == "business"


# --- root-cause records -------------------------------------------------------------------------


async def test_a_root_cause_keeps_its_author_its_dates_and_every_edit(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    incident_id = await incident_of(client, await kill_job(client, job_type="mail.send"))
    empty = await client.get(f"{INCIDENTS}/{incident_id}/root-cause")
    assert empty.json()["root_cause"] is None
    assert "- **Root Cause**: [Description]" in empty.json()["markdown"]

    first = parse_root_cause({"category": "contract", "root_cause": "v2 payload",
                              "fix_reference": None})  # fmt: skip
    written_at = clock.now_ms()
    await service.incidents.record_root_cause(acting_as("alice"), incident_id, first)
    clock.advance(60_000)
    second = parse_root_cause({**FIXED, "category": "contract", "root_cause": "v2 payload"})
    _, saved = await service.incidents.record_root_cause(acting_as("bob"), incident_id, second)
    assert (saved.created_by, saved.updated_by, saved.revision) == ("alice", "bob", 2)
    assert (saved.created_at, saved.updated_at) == (written_at, written_at + 60_000)

    body = (await client.get(f"{INCIDENTS}/{incident_id}/root-cause")).json()
    assert body["root_cause"]["fix_reference"] == "PR 7"
    assert body["root_cause"]["created_by"] == "alice"
    assert body["incident"]["class"] == "contract"  # the category classifies the incident
    assert body["markdown"].splitlines() == [
        "## DLE Incident: mail.send",
        f"- **Date**: {body['incident']['first_seen_at'][:10]}",
        "- **Count**: 1 events",
        f"- **Error**: {body['incident']['message']}",
        "- **Root Cause**: v2 payload",
        "- **Fix Applied**: PR 7",
        "- **Redrive Date**: YYYY-MM-DD",
        "- **Category**: contract",
        f"- **Author**: alice (last edited by bob on {body['root_cause']['updated_at'][:10]})",
    ]
    events = await client.get("/ojs/v1/events", params={"types": "incident.root_cause_recorded"})
    assert [event["data"]["incident_id"] for event in events.json()["events"]] == [incident_id] * 2
    history = await audited(service, Action.INCIDENT_ROOT_CAUSE)
    assert [(item["revision"], item["fix_reference"]) for item in history] == [
        (2, "PR 7"), (1, None)
    ]  # fmt: skip


async def test_bad_root_cause_bodies_are_refused_and_change_nothing(
    client: httpx.AsyncClient,
) -> None:
    incident_id = await incident_of(client, await kill_job(client))
    bad_bodies: list[Any] = [
        None, [], {}, {"category": "contract"}, {"root_cause": "x"},
        {**FIXED, "category": "unclassified"}, {**FIXED, "root_cause": "  "},
        {**FIXED, "fix_reference": 7}, {**FIXED, "created_by": "mallory"},
        {**FIXED, "root_cause": "x" * 10_001},
    ]  # fmt: skip
    for body in bad_bodies:
        refused = await client.put(f"{INCIDENTS}/{incident_id}/root-cause", json=body)
        assert refused.status_code == 400, (body, refused.text)
    assert (await client.get(f"{INCIDENTS}/{incident_id}/root-cause")).json()["root_cause"] is None
    missing = await client.put(f"{INCIDENTS}/inc_{'0' * 24}/root-cause", json=FIXED)
    assert_error(missing, 404, "not_found")


# --- the redrive policy -------------------------------------------------------------------------


async def test_a_bulk_retry_names_every_incident_without_a_fix_and_moves_nothing(
    client: httpx.AsyncClient, service: Service
) -> None:
    smtp = [await kill_job(client, "mail", "mail.send", "SmtpError") for _ in range(2)]
    timeout = await kill_job(client, "mail", "mail.send", "TimeoutError")
    explained = await incident_of(client, smtp[0])
    await explain(client, explained)
    unfixed = await incident_of(client, timeout)
    await explain(client, unfixed, fix_reference=None)  # a record, but no fix yet

    refused = await bulk_retry(client, queue="mail")
    details = assert_error(refused, 409, "root_cause_required")["details"]
    assert details["incidents"] == [
        {"id": unfixed, "message": "TimeoutError happened", "class": "infrastructure"}
    ]
    assert unfixed in refused.json()["error"]["message"]
    assert await dead_count(service) == 3
    # The refusal moved nothing and is not audited (the check runs in the transaction that
    # reads the ids to move); each retry that went is, once.
    assert await audited(service, Action.DEAD_LETTER_BULK_RETRY) == []
    # Another filter that touches only the explained incident goes.
    only = await bulk_retry(client, queue="mail", error_type="SmtpError")
    assert only.json()["succeeded"] == 2
    await explain(client, unfixed)
    assert (await bulk_retry(client, queue="mail")).json()["succeeded"] == 1
    assert await dead_count(service) == 0
    query = AuditQuery(action=Action.DEAD_LETTER_BULK_RETRY, limit=100)
    found = await service.audit.list(CALLER, query)
    outcomes = sorted((record.outcome, record.affected) for record in found)
    assert outcomes == [("succeeded", 1), ("succeeded", 2)]


async def test_dead_letters_in_no_incident_count_as_lacking_a_root_cause(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = [await kill_job(client, "old", "mail.send", "SmtpError") for _ in range(2)]
    await explain_incidents(client)
    await forget_incidents(service)  # as before migration 0009, not yet backfilled
    refused = await bulk_retry(client, queue="old")
    details = assert_error(refused, 409, "root_cause_required")["details"]
    assert details["incidents"] == [{"id": None, "message": None, "class": None}]
    with pytest.raises(RootCauseRequired):
        await service.dead_letters.retry_selected(CALLER, jobs)
    assert await dead_count(service) == 2
    await service.incidents.backfill()
    await explain_incidents(client)
    assert (await bulk_retry(client, queue="old")).json()["succeeded"] == 2


async def test_only_dead_letters_in_no_incident_that_the_filter_matches_refuse_a_redrive(
    client: httpx.AsyncClient, service: Service
) -> None:
    await kill_job(client, "old", "mail.send", "SmtpError")
    await kill_job(client, "old", "mail.send", "SmtpError")
    await forget_incidents(service)  # as before migration 0009, not yet backfilled
    for _ in range(3):
        await kill_job(client, "new", "mail.send", "SmtpError")
    await explain_incidents(client)
    # The old ones, in no incident, are in another queue: the new ones' incident is explained.
    assert (await bulk_retry(client, queue="new")).json()["succeeded"] == 3
    refused = await bulk_retry(client, type="mail.send")
    details = assert_error(refused, 409, "root_cause_required")["details"]
    assert details["incidents"] == [{"id": None, "message": None, "class": None}]
    assert await dead_count(service) == 2


async def test_a_selection_of_several_needs_root_causes_and_one_alone_does_not(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = [await kill_job(client, "mail", "mail.send", "SmtpError") for _ in range(3)]
    with pytest.raises(RootCauseRequired) as refusal:
        await service.dead_letters.retry_selected(CALLER, jobs[:2])
    assert [item["id"] for item in refusal.value.details["incidents"]] == [
        await incident_of(client, jobs[0])
    ]
    assert await dead_count(service) == 3
    assert (await service.dead_letters.retry_selected(CALLER, [jobs[0]])).moved == [jobs[0]]
    await explain_incidents(client)
    assert (await service.dead_letters.retry_selected(CALLER, jobs[1:])).moved == jobs[1:]


async def test_the_check_by_filter_or_ids_is_callable_on_its_own(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = [await kill_job(client, "mail", "mail.send", "SmtpError") for _ in range(2)]
    mail = parse_filter({"queue": "mail"}, service.now())
    with pytest.raises(RootCauseRequired):
        await service.incidents.require_root_causes(CALLER, mail)
    with pytest.raises(RootCauseRequired):
        await service.incidents.require_root_causes(CALLER, job_ids=jobs)
    # Another tenant's caller sees none of these dead letters: nothing to explain.
    other = Caller.for_tenant("globex", "test", Role.ADMIN)
    await service.incidents.require_root_causes(other, mail)
    await explain_incidents(client)
    await service.incidents.require_root_causes(CALLER, mail)
    await service.incidents.require_root_causes(CALLER, job_ids=jobs)


async def test_a_single_retry_needs_no_root_cause_and_records_its_reason(
    client: httpx.AsyncClient, service: Service
) -> None:
    job_id = await kill_job(client)
    for bad in ({"reason": 7}, {"reason": ""}, {"force": "yes"}):
        refused = await client.post(f"/ojs/v1/dead-letter/{job_id}/retry", json=bad)
        assert_error(refused, 400, "invalid_request")
    retried = await client.post(
        f"/ojs/v1/dead-letter/{job_id}/retry", json={"reason": "reproducing it", "priority": 3}
    )
    assert retried.status_code == 200, retried.text
    assert (await get_job(client, job_id))["priority"] == 3
    [target] = await audited(service, Action.DEAD_LETTER_RETRY)
    assert target == {"job_id": job_id, "modified": True, "reason": "reproducing it"}


async def test_a_strict_server_asks_single_retries_for_a_root_cause(
    configured: httpx.AsyncClient,
) -> None:
    job_id = await kill_job(configured, job_type="mail.send")
    refused = await configured.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert_error(refused, 409, "root_cause_required")
    await explain_incidents(configured)
    assert (await configured.post(f"/ojs/v1/dead-letter/{job_id}/retry")).status_code == 200


async def test_a_poison_pill_is_not_redriven_unless_an_admin_forces_it_with_a_reason(
    client: httpx.AsyncClient, service: Service
) -> None:
    jobs = [await kill_job(client, "mail", "mail.send", "SmtpError") for _ in range(3)]
    incident_id = await incident_of(client, jobs[0])
    await explain(client, incident_id, category="poison_pill")  # a fix does not make it safe
    assert (await incident(client, incident_id))["class"] == "poison_pill"

    bulk = await bulk_retry(client, incident=incident_id)
    assert assert_error(bulk, 409, "poison_pill")["details"]["incidents"][0]["id"] == incident_id
    single = await client.post(f"/ojs/v1/dead-letter/{jobs[0]}/retry")
    assert_error(single, 409, "poison_pill")
    unexplained = await client.post(f"/ojs/v1/dead-letter/{jobs[0]}/retry", json={"force": True})
    assert_error(unexplained, 403, "forbidden")
    operator = Caller.for_tenant(DEFAULT_TENANT, "olga", Role.OPERATOR)
    with pytest.raises(Forbidden):
        await service.dead_letters.retry(
            operator, jobs[0], RetryOverride(), RetryIntent("it is fine now", force=True)
        )
    with pytest.raises(PoisonPill):
        await service.dead_letters.retry(CALLER, jobs[0], RetryOverride(), RetryIntent("why"))
    assert await dead_count(service) == 3

    forced = await client.post(
        f"/ojs/v1/dead-letter/{jobs[0]}/retry",
        json={"force": True, "reason": "the parser is fixed for this one"},
    )
    assert forced.status_code == 200, forced.text
    [target] = await audited(service, Action.DEAD_LETTER_RETRY)
    assert target["forced"] is True and target["reason"] == "the parser is fixed for this one"
    assert await dead_count(service) == 2


async def test_replay_rules_leave_business_and_poison_pill_incidents_alone(
    client: httpx.AsyncClient, service: Service
) -> None:
    await service.replay.create(CALLER, RuleChanges(name="net", filter={"queue": "net"}))
    network = await kill_job(client, "net", "net.call", "ConnectionError")
    declined = await kill_job(client, "net", "charge.card", "CardDeclined")
    pill = await kill_job(client, "net", "parse.feed", "Boom")
    await client.post(f"{INCIDENTS}/{await incident_of(client, pill)}/classify",
                      json={"class": "poison_pill"})  # fmt: skip
    assert (await incident(client, await incident_of(client, declined)))["class"] == "business"
    assert (await service.sweeper.sweep())["replay"] == 1
    assert (await get_job(client, network))["state"] == "available"
    assert (await get_job(client, declined))["state"] == "discarded"
    assert (await get_job(client, pill))["state"] == "discarded"


async def test_metrics_count_dead_letters_per_incident_class(client: httpx.AsyncClient) -> None:
    await kill_job(client, "net", "net.call", "ConnectionError")
    await kill_job(client, "net", "net.call", "ConnectionError")
    await kill_job(client, "mail", "mail.send", "KeyError")
    declined = await kill_job(client, "pay", "charge.card", "CardDeclined")
    assert (await client.post(f"/ojs/v1/dead-letter/{declined}/retry")).status_code == 200
    text = (await client.get("/metrics")).text
    assert "# TYPE ojs_dead_letter_by_incident_class gauge" in text
    assert 'ojs_dead_letter_by_incident_class{class="infrastructure"} 2' in text
    assert 'ojs_dead_letter_by_incident_class{class="contract"} 1' in text
    assert 'ojs_dead_letter_by_incident_class{class="business"} 0' in text


async def test_a_filter_by_error_type_alone_finds_its_incidents_from_its_dead_letters(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The error-type path of the check reads the incidents from the dead letters it matches."""
    smtp = [await kill_job(client, queue, "mail.send", "SmtpError") for queue in ("a", "b")]
    await kill_job(client, "a", "report.build", "SmtpError")  # another type: another incident
    await kill_job(client, "a", "mail.send", "TimeoutError")  # another error: not touched
    by_type = {await incident_of(client, smtp[0])}
    refused = await bulk_retry(client, error_type="SmtpError")
    named = assert_error(refused, 409, "root_cause_required")["details"]["incidents"]
    assert len(named) == 2 and by_type <= {item["id"] for item in named}
    for item in named:
        await explain(client, item["id"])
    assert (await bulk_retry(client, error_type="SmtpError")).json()["succeeded"] == 3
    await forget_incidents(service, "error_type = 'TimeoutError'")
    refused = await bulk_retry(client, error_type="TimeoutError")
    assert assert_error(refused, 409, "root_cause_required")["details"]["incidents"] == [
        {"id": None, "message": None, "class": None}
    ]
