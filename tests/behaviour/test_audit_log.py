"""The audit log on both stores: one record per operator action, committed with the action;
append-only by trigger; one hash chain per tenant that `verify` checks, and that tampering
straight in the database (an altered, removed or out-of-order row) breaks, naming the record."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import httpx
import psycopg
import pytest

from redrive.api.app import create_app
from redrive.domain.audit import Action, AuditQuery, AuditRecord, record_hash
from redrive.domain.caller import SYSTEM, Role
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.keys import KeyRequest
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import (
    assert_error,
    enqueue,
    explain_incidents,
    fetch,
    forbid_server_errors,
    kill_job,
)
from tests.support.callers import ACROSS_TENANTS, CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

AUDIT = "/ojs/v1/admin/audit"


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def records(client: httpx.AsyncClient, **query: str) -> list[dict[str, Any]]:
    """The records (the tests but two act in the default tenant only)."""
    response = await client.get(AUDIT, params=query)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["records"]
    return found


async def verify(client: httpx.AsyncClient, tenant: str | None = None) -> dict[str, Any]:
    """GET /verify: every tenant's chain (auth is off), or only `tenant`'s."""
    headers = {} if tenant is None else {"X-OJS-Tenant": tenant}
    response = await client.get(f"{AUDIT}/verify", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def execute(service: Service, *statements: str) -> None:
    """Run SQL straight on the database, as someone with its password would."""
    store = service.runtime.store
    if isinstance(store, SqliteStore):
        database = store.connection

        def run() -> None:
            for statement in statements:
                database.execute(statement)

        await store.call(run)
        return
    assert isinstance(store, PostgresStore)
    async with await psycopg.AsyncConnection.connect(store.url, autocommit=True) as connection:
        for statement in statements:
            await connection.execute(statement)


async def drop_triggers(service: Service) -> None:
    """What a tamperer with owner rights does first: lift the append-only refusal."""
    if isinstance(service.runtime.store, SqliteStore):
        await execute(
            service,
            "DROP TRIGGER audit_log_no_update",
            "DROP TRIGGER audit_log_no_delete",
        )
    else:
        await execute(service, "DROP TRIGGER audit_log_append_only ON audit_log")


# --- one record per action ----------------------------------------------------------------------

Act = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]


async def retry_one(client: httpx.AsyncClient) -> httpx.Response:
    job_id = await kill_job(client)
    return await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")


async def delete_one(client: httpx.AsyncClient) -> httpx.Response:
    job_id = await kill_job(client)
    return await client.delete(f"/ojs/v1/dead-letter/{job_id}")


async def bulk_retry(client: httpx.AsyncClient) -> httpx.Response:
    await kill_job(client, queue="mail")
    await kill_job(client, queue="mail")
    await kill_job(client, queue="other")
    await explain_incidents(client)  # one incident: one root-cause record
    body = {"filter": {"queue": "mail"}, "confirm": True}
    return await client.post("/ojs/v1/dead-letter/retry", json=body)


async def purge(client: httpx.AsyncClient) -> httpx.Response:
    await kill_job(client, queue="mail")
    await kill_job(client, queue="mail")
    return await client.delete("/ojs/v1/dead-letter?queue=mail&confirm=true")


async def pause(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post("/ojs/v1/queues/mail/pause")


async def resume(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post("/ojs/v1/queues/mail/resume")


RULE = {"name": "timeouts", "filter": {"error_type": "Timeout"}, "delay": "PT5M"}
RULES = "/ojs/v1/admin/dead-letter/rules"


async def create_rule(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post(RULES, json=RULE)


async def update_rule(client: httpx.AsyncClient) -> httpx.Response:
    assert (await client.post(RULES, json=RULE)).status_code == 201
    return await client.patch(f"{RULES}/timeouts", json={"enabled": False})


async def delete_rule(client: httpx.AsyncClient) -> httpx.Response:
    assert (await client.post(RULES, json=RULE)).status_code == 201
    return await client.delete(f"{RULES}/timeouts")


RETENTION = "/ojs/v1/admin/dead-letter/retention"


async def set_retention(client: httpx.AsyncClient) -> httpx.Response:
    return await client.put(f"{RETENTION}/mail", json={"max_count": 10})


async def remove_retention(client: httpx.AsyncClient) -> httpx.Response:
    assert (await client.put(f"{RETENTION}/mail", json={"max_count": 10})).status_code == 200
    return await client.delete(f"{RETENTION}/mail")


async def quiet_worker(client: httpx.AsyncClient) -> httpx.Response:
    await fetch(client, ["mail"], worker_id="w1")
    return await client.post("/ojs/v1/admin/workers/w1/quiet")


CRON = {"name": "nightly", "expression": "0 3 * * *", "type": "report.build"}


async def register_cron(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post("/ojs/v1/cron", json=CRON)


async def disable_cron(client: httpx.AsyncClient) -> httpx.Response:
    assert (await client.post("/ojs/v1/cron", json=CRON)).status_code == 201
    return await client.patch("/ojs/v1/cron/nightly", json={"enabled": False})


async def delete_cron(client: httpx.AsyncClient) -> httpx.Response:
    assert (await client.post("/ojs/v1/cron", json=CRON)).status_code == 201
    return await client.delete("/ojs/v1/cron/nightly")


async def cancel_job(client: httpx.AsyncClient) -> httpx.Response:
    job = await enqueue(client, queue="mail")
    return await client.post(f"/ojs/v1/jobs/{job['id']}/cancel")


# (act, the action its last record names, what the target holds, how many it affected); every
# record before the last one comes from the setup the act needs.
ACTIONS: list[tuple[Act, Action, dict[str, Any], int]] = [
    (retry_one, Action.DEAD_LETTER_RETRY, {"modified": False}, 1),
    (delete_one, Action.DEAD_LETTER_DELETE, {}, 1),
    (bulk_retry, Action.DEAD_LETTER_BULK_RETRY, {"limit": None}, 2),
    (purge, Action.DEAD_LETTER_PURGE, {"limit": None}, 2),
    (pause, Action.QUEUE_PAUSE, {"queue": "mail"}, 1),
    (resume, Action.QUEUE_RESUME, {"queue": "mail"}, 1),
    (create_rule, Action.REPLAY_RULE_CREATE, {"name": "timeouts"}, 1),
    (update_rule, Action.REPLAY_RULE_UPDATE, {"name": "timeouts"}, 1),
    (delete_rule, Action.REPLAY_RULE_DELETE, {"name": "timeouts"}, 1),
    (set_retention, Action.RETENTION_POLICY_CHANGE, {"queue": "mail"}, 1),
    (remove_retention, Action.RETENTION_POLICY_CHANGE, {"queue": "mail", "policy": None}, 1),
    (quiet_worker, Action.WORKER_DIRECTIVE, {"worker_id": "w1", "directive": "quiet"}, 1),
    (register_cron, Action.CRON_REGISTER, {"name": "nightly", "replaced": False}, 1),
    (disable_cron, Action.CRON_UPDATE, {"name": "nightly", "enabled": False}, 1),
    (delete_cron, Action.CRON_DELETE, {"name": "nightly"}, 1),
    (cancel_job, Action.JOB_CANCEL, {"state_before": "available"}, 1),
]
SETUP_RECORDS: dict[Act, int] = dict.fromkeys(
    [update_rule, delete_rule, remove_retention, disable_cron, delete_cron, bulk_retry], 1
)


@pytest.mark.parametrize(
    ("act", "action", "target", "affected"), ACTIONS, ids=[case[0].__name__ for case in ACTIONS]
)
async def test_each_operator_action_writes_one_record(
    client: httpx.AsyncClient,
    clock: ManualClock,
    act: Act,
    action: Action,
    target: dict[str, Any],
    affected: int,
) -> None:
    response = await act(client)
    assert response.status_code < 300, response.text
    found = await records(client)
    assert len(found) == 1 + SETUP_RECORDS.get(act, 0)
    record = found[0]  # the newest
    assert record["action"] == action.value
    assert record["target"] == {**record["target"], **target}
    assert record["affected"] == affected
    assert record["outcome"] == "succeeded"
    assert (record["tenant_id"], record["actor"], record["role"]) == (
        DEFAULT_TENANT,
        "api",
        "admin",
    )
    assert record["key_id"] is None  # auth is off: no key
    assert record["request_id"] == response.headers["x-request-id"]
    assert record["seq"] == len(found)
    assert record["time"] is not None
    assert (await verify(client))["intact"] is True


async def test_a_retry_of_one_names_the_job_and_the_worker_protocol_is_not_audited(
    client: httpx.AsyncClient,
) -> None:
    job_id = await kill_job(client)  # enqueue, fetch, nack: worker work, not recorded
    assert await records(client) == []
    await client.post(f"/ojs/v1/dead-letter/{job_id}/retry", headers={"X-Request-Id": "req-1"})
    [record] = await records(client)
    assert record["target"] == {"job_id": job_id, "modified": False}
    assert record["request_id"] == "req-1"


async def test_a_bulk_action_names_its_filter(client: httpx.AsyncClient) -> None:
    await bulk_retry(client)
    record, explained = await records(client)
    assert explained["action"] == "incident.root_cause"
    assert record["target"] == {"filter": {"queue": "mail", "status": "dead"}, "limit": None}


async def test_a_dry_run_and_a_refused_action_write_nothing(client: httpx.AsyncClient) -> None:
    """A refusal (400, 404, 409) changes nothing and its transaction rolls back: no record.
    (A request refused by its caller's role is `denied`: the auth layer records that.)"""
    await kill_job(client, queue="mail")
    dry = await client.post("/ojs/v1/dead-letter/retry", json={"dry_run": True})
    assert dry.status_code == 200
    assert_error(await client.post("/ojs/v1/dead-letter/nope/retry"), 404, "not_found")
    assert_error(await client.delete("/ojs/v1/dead-letter/nope"), 404, "not_found")
    assert_error(await client.post("/ojs/v1/dead-letter/retry", json={}), 400, "invalid_request")
    assert_error(await client.post("/ojs/v1/admin/workers/ghost/quiet"), 404, "not_found")
    assert_error(await client.delete("/ojs/v1/cron/ghost"), 404, "not_found")
    job = await enqueue(client, queue="mail")
    assert (await client.post(f"/ojs/v1/jobs/{job['id']}/cancel")).status_code == 200
    assert_error(await client.post(f"/ojs/v1/jobs/{job['id']}/cancel"), 409, "conflict")
    assert [record["action"] for record in await records(client)] == ["job.cancel"]


async def test_a_denied_attempt_is_recorded_on_its_own(
    client: httpx.AsyncClient, service: Service
) -> None:
    await service.audit.record_attempt(CALLER, Action.DEAD_LETTER_PURGE, {"filter": {}})
    [record] = await records(client, outcome="denied")
    assert (record["action"], record["affected"], record["actor"]) == (
        "dead_letter.purge",
        0,
        "test",
    )
    assert (await verify(client))["intact"] is True


async def test_a_replay_rule_firing_is_recorded_as_the_rule(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    rule = {**RULE, "filter": {"queue": "flaky"}}
    assert (await client.post(RULES, json=rule)).status_code == 201
    await kill_job(client, queue="flaky")
    await kill_job(client, queue="flaky")
    clock.advance(6 * 60_000)
    assert await service.replay.replay_due() == {"timeouts": 2}
    [replayed] = await records(client, action="dead_letter.replay")
    assert (replayed["actor"], replayed["role"]) == ("rule:timeouts", "operator")
    assert replayed["affected"] == 2
    assert await service.replay.replay_due() == {"timeouts": 0}  # nothing replayed: no record
    assert len(await records(client, action="dead_letter.replay")) == 1


async def test_the_sweeper_prune_is_recorded_in_each_tenant_chain_it_touched(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    assert (
        await client.put(RETENTION, json={"max_age": "PT1H", "min_age": "P0D"})
    ).status_code == 200
    await kill_job(client, queue="mail")
    await kill_job(client, queue="mail", headers={"X-OJS-Tenant": "acme"})
    clock.advance(2 * 3_600_000)
    report = await service.retention.prune(SYSTEM)
    assert report.removed == 2
    pruned = await records(client, action="retention.prune")
    assert sorted(
        (record["tenant_id"], record["actor"], record["affected"]) for record in pruned
    ) == [
        (DEFAULT_TENANT, "system", 1),
        ("acme", "system", 1),
    ]
    assert pruned[0]["target"] == {"deleted": 2, "archived": 0, "archives": []}
    acme = await client.get(
        AUDIT, params={"action": "retention.prune"}, headers={"X-OJS-Tenant": "acme"}
    )
    assert [record["tenant_id"] for record in acme.json()["records"]] == ["acme"]
    checks = await service.audit.verify(ACROSS_TENANTS)
    assert [(check.tenant_id, check.records, check.intact) for check in checks] == [
        (DEFAULT_TENANT, 2, True),  # the policy change and the prune
        ("acme", 1, True),
    ]


# --- append-only ---------------------------------------------------------------------------------


async def test_the_database_refuses_to_update_or_delete_a_record(
    client: httpx.AsyncClient, service: Service
) -> None:
    await pause(client)
    refused = (sqlite3.Error, psycopg.Error)
    for statement in (
        "UPDATE audit_log SET actor = 'someone else'",
        "DELETE FROM audit_log",
        "DELETE FROM audit_chain_heads",
    ):
        with pytest.raises(refused, match=r"append-only|never deleted"):
            await execute(service, statement)
    assert len(await records(client)) == 1
    assert (await verify(client))["intact"] is True


async def test_a_reset_keeps_the_log_and_its_chain(
    client: httpx.AsyncClient, service: Service
) -> None:
    """The test hooks' reset empties the job tables, never the append-only log."""
    await pause(client)
    await service.reset()
    await pause(client)
    assert [record["seq"] for record in await records(client)] == [2, 1]
    assert (await verify(client))["intact"] is True
    with pytest.raises((sqlite3.Error, psycopg.Error), match="append-only"):
        await execute(service, "DELETE FROM audit_log")


# --- the chain ------------------------------------------------------------------------------------


async def build_log(client: httpx.AsyncClient) -> None:
    """A real log, through the HTTP API: five records in the default tenant, two in acme."""
    await retry_one(client)
    await pause(client)
    await resume(client)
    await create_rule(client)
    await register_cron(client)
    acme = {"X-OJS-Tenant": "acme"}
    assert (await client.post("/ojs/v1/queues/mail/pause", headers=acme)).status_code == 200
    assert (await client.post("/ojs/v1/queues/mail/resume", headers=acme)).status_code == 200


async def test_verify_passes_on_a_real_log_with_a_chain_per_tenant(
    client: httpx.AsyncClient, service: Service
) -> None:
    await build_log(client)
    body = await verify(client)
    assert body["intact"] is True
    chains = [(chain["tenant_id"], chain["records"], chain["head_seq"]) for chain in body["chains"]]
    assert chains == [(DEFAULT_TENANT, 5, 5), ("acme", 2, 2)]
    default_chain = body["chains"][0]
    [acme_chain] = (await verify(client, "acme"))["chains"]
    assert (acme_chain["tenant_id"], acme_chain["intact"]) == ("acme", True)
    everyone = await client.get(AUDIT)  # auth off: the server's owner reads every tenant's log
    assert len(everyone.json()["records"]) == 7
    checks = await service.audit.verify(ACROSS_TENANTS)
    assert [(check.tenant_id, check.records) for check in checks] == [
        (DEFAULT_TENANT, 5),
        ("acme", 2),
    ]
    default = [record for record in everyone.json()["records"] if record["tenant_id"] != "acme"]
    assert [record["seq"] for record in default] == [5, 4, 3, 2, 1]
    for newer, older in itertools.pairwise(default):
        assert newer["previous_hash"] == older["hash"]
    assert default[-1]["previous_hash"] == "0" * 64
    assert default_chain["head_hash"] == default[0]["hash"]


TAMPERING: list[tuple[str, list[str], int, str]] = [
    ("altered", ["UPDATE audit_log SET affected = 99 WHERE tenant_id = '_default' AND seq = 3"],
     3, "altered"),
    ("removed", ["DELETE FROM audit_log WHERE tenant_id = '_default' AND seq = 2"], 2, "missing"),
    ("newest removed", ["DELETE FROM audit_log WHERE tenant_id = '_default' AND seq = 5"],
     5, "missing"),
    ("moved to another tenant",
     ["UPDATE audit_log SET tenant_id = 'acme', seq = 3 WHERE tenant_id = '_default' AND seq = 4"],
     4, "missing"),
    ("copied out of order",
     ["INSERT INTO audit_log SELECT id || 'x', tenant_id, 6, time, key_id, actor, role, action, "
      "target, affected, request_id, outcome, previous_hash, hash FROM audit_log "
      "WHERE tenant_id = '_default' AND seq = 2"],
     6, "altered"),
    ("swapped",
     ["UPDATE audit_log SET seq = -seq WHERE tenant_id = '_default' AND seq IN (2, 3)",
      "UPDATE audit_log SET seq = seq + 5 WHERE tenant_id = '_default' AND seq IN (-2, -3)"],
     2, "altered"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("statements", "broken_seq", "problem"),
    [case[1:] for case in TAMPERING],
    ids=[case[0] for case in TAMPERING],
)
async def test_verify_names_the_record_after_tampering_in_the_database(
    client: httpx.AsyncClient,
    service: Service,
    statements: list[str],
    broken_seq: int,
    problem: str,
) -> None:
    await build_log(client)
    assert (await verify(client))["intact"] is True
    await drop_triggers(service)
    await execute(service, *statements)
    body = await verify(client)
    assert body["intact"] is False
    broken = next(chain for chain in body["chains"] if chain["tenant_id"] == DEFAULT_TENANT)
    assert (broken["intact"], broken["broken_seq"], broken["problem"]) == (
        False,
        broken_seq,
        problem,
    )
    assert broken["detail"]


async def test_a_rehashed_record_breaks_the_link_to_the_next(
    client: httpx.AsyncClient, service: Service
) -> None:
    """A tamperer who rewrites a record and its hash still breaks the next record's link."""
    await build_log(client)
    third = await default_record(service, 3)
    forged = replace(third, affected=7, hash="")
    await drop_triggers(service)
    await execute(
        service,
        f"UPDATE audit_log SET affected = 7, hash = '{record_hash(forged)}' "
        "WHERE tenant_id = '_default' AND seq = 3",
    )
    broken = await default_chain(client)
    assert (broken["broken_seq"], broken["problem"]) == (4, "reordered")


async def test_a_well_made_record_appended_behind_redrive_is_past_the_head(
    client: httpx.AsyncClient, service: Service
) -> None:
    """Even a record that links to the newest and hashes right was not appended by redrive:
    the chain head did not move."""
    await build_log(client)
    fifth = await default_record(service, 5)
    forged = replace(fifth, id=fifth.id + "x", seq=6, previous_hash=fifth.hash, hash="")
    forged = replace(forged, hash=record_hash(forged))
    values = ", ".join(
        "NULL" if value is None else str(value) if isinstance(value, int) else f"'{value}'"
        for value in forged.__dict__.values()
    )
    await execute(service, f"INSERT INTO audit_log VALUES ({values})")
    broken = await default_chain(client)
    assert (broken["broken_seq"], broken["problem"]) == (6, "reordered")


async def default_record(service: Service, seq: int) -> AuditRecord:
    found = await service.audit.list(CALLER, AuditQuery(limit=1000))
    return next(record for record in found if record.seq == seq)


async def default_chain(client: httpx.AsyncClient) -> dict[str, Any]:
    body = await verify(client)
    assert body["intact"] is False
    chain: dict[str, Any] = next(
        chain for chain in body["chains"] if chain["tenant_id"] == DEFAULT_TENANT
    )
    return chain


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"])
async def test_concurrent_appends_keep_one_unbroken_chain(
    client: httpx.AsyncClient, service: Service
) -> None:
    count = 40
    responses = await asyncio.gather(
        *(client.post(f"/ojs/v1/queues/q{index % 4}/pause") for index in range(count)),
        *(client.post("/ojs/v1/cron", json={**CRON, "name": f"c{index}"}) for index in range(10)),
    )
    assert all(response.status_code < 300 for response in responses)
    body = await verify(client)
    assert body["intact"] is True
    assert body["chains"][0]["records"] == body["chains"][0]["head_seq"] == count + 10
    found = await records(client, limit="1000")
    assert sorted(record["seq"] for record in found) == list(range(1, count + 11))


# --- listing ------------------------------------------------------------------------------------


async def test_filters_and_keyset_pages(client: httpx.AsyncClient, clock: ManualClock) -> None:
    for index in range(7):
        clock.advance(1_000)
        await client.post(f"/ojs/v1/queues/q{index}/pause")
    clock.advance(1_000)
    await client.post("/ojs/v1/queues/q0/resume")
    assert [r["target"]["queue"] for r in await records(client, action="queue.resume")] == ["q0"]
    assert len(await records(client, action="queue.pause")) == 7
    assert len(await records(client, target="q0")) == 2
    assert await records(client, actor="nobody") == []
    assert len(await records(client, actor="api", outcome="succeeded")) == 8

    pages: list[list[int]] = []
    query = {"limit": "3"}
    while True:
        response = await client.get(AUDIT, params=query)
        body = response.json()
        pages.append([record["seq"] for record in body["records"]])
        if "next_cursor" not in body["pagination"]:
            break
        query = {"limit": "3", "cursor": body["pagination"]["next_cursor"]}
    assert pages == [[8, 7, 6], [5, 4, 3], [2, 1]]

    [newest] = await records(client, limit="1")
    since = await records(client, since=newest["time"])
    assert [record["seq"] for record in since] == [8]
    until = await records(client, until=newest["time"], action="queue.pause", limit="2")
    assert [record["seq"] for record in until] == [7, 6]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("actoin=queue.pause", "actoin"),
        ("action=queue.explode", "action"),
        ("outcome=maybe", "outcome"),
        ("limit=0", "limit"),
        ("limit=²", "limit"),
        ("since=yesterday", "since"),
        ("cursor=not-ours", "cursor"),
        ("action=queue.pause&action=queue.resume", "action"),
    ],
)
async def test_bad_list_queries_are_refused(
    client: httpx.AsyncClient, query: str, field: str
) -> None:
    body = assert_error(await client.get(f"{AUDIT}?{query}"), 400, "invalid_request")
    assert body["details"]["field"] == field


async def test_a_tenant_sees_only_its_own_chain(client: httpx.AsyncClient) -> None:
    await build_log(client)
    acme = await client.get(AUDIT, headers={"X-OJS-Tenant": "acme"})
    assert {record["tenant_id"] for record in acme.json()["records"]} == {"acme"}
    checked = await client.get(f"{AUDIT}/verify", headers={"X-OJS-Tenant": "acme"})
    assert [chain["tenant_id"] for chain in checked.json()["chains"]] == ["acme"]


# --- with API keys --------------------------------------------------------------------------------


async def test_with_keys_a_record_names_the_key_its_name_role_and_tenant(
    store: Store, clock: ManualClock
) -> None:
    service = Service(Runtime(store, clock=clock, options=ServiceOptions(test_hooks=True)))
    made = {}
    for name, role in (("deployer", Role.OPERATOR), ("auditor", Role.ADMIN)):
        made[name] = await service.keys.create(ACROSS_TENANTS, KeyRequest("acme", name, role))
    app = create_app(service, max_body_bytes=64_000, auth_required=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as http:
        operator = {"Authorization": f"Bearer {made['deployer'].secret}"}
        admin = {"Authorization": f"Bearer {made['auditor'].secret}"}
        job_id = await kill_job(http, headers=admin)
        retried = await http.post(f"/ojs/v1/dead-letter/{job_id}/retry", headers=operator)
        assert retried.status_code == 200, retried.text
        assert_error(await http.get(AUDIT, headers=operator), 403, "forbidden")
        listed = await http.get(AUDIT, headers=admin, params={"action": "dead_letter.retry"})
        [record] = listed.json()["records"]
        assert (record["tenant_id"], record["actor"], record["role"]) == (
            "acme",
            "deployer",
            "operator",
        )
        assert record["key_id"] == made["deployer"].key.id
        assert record["request_id"] == retried.headers["x-request-id"]
        checked = await http.get(f"{AUDIT}/verify", headers=admin)
        assert [chain["tenant_id"] for chain in checked.json()["chains"]] == ["acme"]


async def test_with_keys_a_refused_key_is_recorded_and_a_missing_one_is_not(
    store: Store, clock: ManualClock
) -> None:
    service = Service(Runtime(store, clock=clock, options=ServiceOptions(test_hooks=True)))
    viewer = await service.keys.create(ACROSS_TENANTS, KeyRequest("acme", "intern", Role.VIEWER))
    admin = await service.keys.create(ACROSS_TENANTS, KeyRequest("acme", "auditor", Role.ADMIN))
    app = create_app(service, max_body_bytes=64_000, auth_required=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as http:
        as_viewer = {"Authorization": f"Bearer {viewer.secret}"}
        purge = await http.delete("/ojs/v1/dead-letter?queue=mail&confirm=true", headers=as_viewer)
        assert_error(purge, 403, "forbidden")
        elsewhere = {**as_viewer, "X-OJS-Tenant": "globex"}
        assert_error(await http.get("/ojs/v1/dead-letter", headers=elsewhere), 403, "forbidden")
        assert_error(await http.post("/ojs/v1/queues/mail/pause"), 401, "unauthenticated")
        as_admin = {"Authorization": f"Bearer {admin.secret}"}
        listed = await http.get(AUDIT, headers=as_admin)
        denied = listed.json()["records"]
        assert [(r["action"], r["outcome"], r["actor"]) for r in denied] == [
            ("access.denied", "denied", "intern"),
            ("access.denied", "denied", "intern"),
        ]
        assert [(r["target"]["method"], r["target"]["route"]) for r in denied] == [
            ("GET", "/ojs/v1/dead-letter"),
            ("DELETE", "/ojs/v1/dead-letter"),
        ]
        assert "globex" in denied[0]["target"]["reason"]
        assert {r["tenant_id"] for r in denied} == {"acme"}
        assert denied[0]["key_id"] == viewer.key.id
        assert (await http.get(f"{AUDIT}/verify", headers=as_admin)).json()["chains"][0][
            "intact"
        ] is True
