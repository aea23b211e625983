"""Webhook subscriptions over HTTP on both stores: the OJS shape, the secret answered once and
stored only sealed, strict input (a refusal writes nothing), tenants kept apart, audit records
without URLs or secrets, and the reserved delivery queue closed to clients."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from redrive.api.app import create_app
from redrive.domain.audit import AuditQuery
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from tests.behaviour.ojs_http import assert_error, forbid_server_errors
from tests.support.callers import ACROSS_TENANTS
from tests.support.clock import ManualClock
from tests.support.options import TEST_SECRET_BOX

pytestmark = pytest.mark.anyio

SUBSCRIPTIONS = "/ojs/v1/webhooks/subscriptions"
ACME = {"X-OJS-Tenant": "acme"}
GLOBEX = {"X-OJS-Tenant": "globex"}
HOOK_URL = "https://hooks.example.com/ojs"
HOOK: dict[str, Any] = {"url": HOOK_URL, "events": ["job.completed", "dead_letter.*"]}
GIVEN_SECRET = "whk_test_secret_given_0001"


async def create(client: httpx.AsyncClient, headers: dict[str, str], **body: Any) -> Any:
    made = await client.post(SUBSCRIPTIONS, json={**HOOK, **body}, headers=headers)
    assert made.status_code == 201, made.text
    return made.json()["subscription"]


async def subscription_ids(client: httpx.AsyncClient, headers: dict[str, str]) -> list[str]:
    listed = await client.get(SUBSCRIPTIONS, headers=headers)
    assert listed.status_code == 200, listed.text
    return [item["id"] for item in listed.json()["subscriptions"]]


async def test_a_subscription_is_made_read_changed_and_deleted(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)
    made = await create(client, ACME, description="alerts")
    assert made["id"].startswith("sub_")
    assert made["url"] == HOOK["url"] and made["events"] == HOOK["events"]
    assert made["active"] is True and made["description"] == "alerts"
    assert made["secret"].startswith("whsec_")  # made by the server, answered this once
    path = f"{SUBSCRIPTIONS}/{made['id']}"
    read = (await client.get(path, headers=ACME)).json()["subscription"]
    assert "secret" not in read
    assert read == {key: value for key, value in made.items() if key != "secret"}
    changed = await client.patch(
        path, json={"events": ["job.failed"], "active": False, "description": ""}, headers=ACME
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()["subscription"]
    assert (body["events"], body["active"], body["description"]) == (["job.failed"], False, None)
    assert body["url"] == HOOK["url"] and "secret" not in body
    assert await subscription_ids(client, ACME) == [made["id"]]
    deleted = await client.delete(path, headers=ACME)
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert await subscription_ids(client, ACME) == []
    assert_error(await client.get(path, headers=ACME), 404, "not_found")


async def test_a_secret_of_the_callers_own_is_answered_once_and_rotated(
    client: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    made = await create(client, ACME, secret=GIVEN_SECRET)
    assert made["secret"] == GIVEN_SECRET
    path = f"{SUBSCRIPTIONS}/{made['id']}"
    rotated = await client.post(f"{path}/rotate-secret", headers=ACME)
    assert rotated.status_code == 200, rotated.text
    body = rotated.json()["subscription"]
    assert body["secret"].startswith("whsec_") and body["secret"] != GIVEN_SECRET
    assert body["previous_secret_until"] is not None
    chosen = await client.post(f"{path}/rotate-secret", json={"secret": "x" * 20}, headers=ACME)
    assert chosen.json()["subscription"]["secret"] == "x" * 20
    assert "secret" not in (await client.get(path, headers=ACME)).json()["subscription"]


def stored_bytes(store: Store, database_url: str) -> bytes:
    """Every byte the database holds: the SQLite file and its write-ahead log, or on PostgreSQL
    every row of every table, read as the tables' owner."""
    if store.backend == "sqlite":
        path = Path(database_url.removeprefix("sqlite:///"))
        files = [path, path.with_name(path.name + "-wal")]
        connection = sqlite3.connect(path)  # the rows too, whatever the pages hold
        tables = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        rows = "".join(
            repr(connection.execute(f'SELECT * FROM "{table}"').fetchall()) for (table,) in tables
        )
        connection.close()
        return b"".join(file.read_bytes() for file in files if file.exists()) + rows.encode()
    with psycopg.connect(database_url) as owner:
        names = owner.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return "".join(
            repr(owner.execute(f'SELECT * FROM "{name}"').fetchall())
            for (name,) in names.fetchall()
        ).encode()


async def test_no_secret_is_stored_in_clear(
    client: httpx.AsyncClient, store: Store, database_url: str
) -> None:
    made = await create(client, ACME, secret=GIVEN_SECRET)
    rotated = await client.post(
        f"{SUBSCRIPTIONS}/{made['id']}/rotate-secret", json={"secret": "y" * 24}, headers=ACME
    )
    generated = (await create(client, ACME))["secret"]
    assert rotated.status_code == 200
    held = stored_bytes(store, database_url)
    assert HOOK_URL.encode() in held  # the scan reads the subscriptions' rows
    for secret in (GIVEN_SECRET, "y" * 24, generated, generated.removeprefix("whsec_")):
        assert secret.encode() not in held, secret


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://example.com/x"}, "events"),
        ({"events": ["job.completed"]}, "url"),
        ({**HOOK, "colour": "red"}, "colour"),
        ({**HOOK, "url": "ftp://example.com/x"}, "url"),
        ({**HOOK, "url": "https://user:pw@example.com/x"}, "url"),
        ({**HOOK, "url": "https://example.com/x#top"}, "url"),
        ({**HOOK, "url": 7}, "url"),
        ({**HOOK, "events": "job.completed"}, "events"),
        ({**HOOK, "events": []}, "events"),
        ({**HOOK, "events": ["job.finished"]}, "events"),
        ({**HOOK, "events": ["nothing.*"]}, "events"),
        ({**HOOK, "events": ["job.completed", "job.completed"]}, "events"),
        ({**HOOK, "secret": "short"}, "secret"),
        ({**HOOK, "secret": "has spaces in it, see"}, "secret"),
        ({**HOOK, "secret": "whsec_!!!notbase64"}, "secret"),
        ({**HOOK, "active": "yes"}, "active"),
        ({**HOOK, "description": 5}, "description"),
    ],
)
async def test_a_bad_subscription_is_refused_naming_the_field_and_nothing_is_made(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    forbid_server_errors(client)
    error = assert_error(
        await client.post(SUBSCRIPTIONS, json=body, headers=ACME), 400, "invalid_request"
    )
    assert error["details"]["field"] == field
    assert await subscription_ids(client, ACME) == []


async def test_bad_changes_and_queries_are_refused(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)
    made = await create(client, ACME)
    path = f"{SUBSCRIPTIONS}/{made['id']}"
    for body in ({}, {"url": None}, {"secret": GIVEN_SECRET}, {"active": 1}, {"events": ["x"]}):
        assert_error(await client.patch(path, json=body, headers=ACME), 400, "invalid_request")
    assert_error(
        await client.post(f"{path}/rotate-secret", json={"secret": 5}, headers=ACME),
        400,
        "invalid_request",
    )
    assert_error(await client.patch(path, content=b"{", headers=ACME), 400, "invalid_payload")
    for query in ({"status": "lost"}, {"limit": "0"}, {"cursor": "%%%"}, {"since": "x"}):
        answered = await client.get("/ojs/v1/webhooks/deliveries", params=query, headers=ACME)
        assert_error(answered, 400, "invalid_request")
    unchanged = (await client.get(path, headers=ACME)).json()["subscription"]
    assert unchanged == {key: value for key, value in made.items() if key != "secret"}


async def test_a_private_target_is_refused_unless_the_server_allows_it(store: Store) -> None:
    strict = Service(Runtime(store, clock=ManualClock(), options=ServiceOptions(
        secret_box=TEST_SECRET_BOX), rng=random.Random(1)))  # fmt: skip
    transport = httpx.ASGITransport(app=create_app(strict))
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as http:
        for url in ("http://127.0.0.1:9/x", "http://localhost/x", "http://[::1]/x",
                    "http://10.1.2.3/x", "http://169.254.169.254/latest"):  # fmt: skip
            refused = await http.post(SUBSCRIPTIONS, json={**HOOK, "url": url})
            assert (
                "REDRIVE_WEBHOOK_ALLOW_PRIVATE_TARGETS"
                in assert_error(refused, 400, "invalid_request")["message"]
            )
        assert (await http.post(SUBSCRIPTIONS, json=HOOK)).status_code == 201


async def test_without_a_server_key_no_subscription_is_made(store: Store) -> None:
    keyless = Service(Runtime(store, clock=ManualClock(), options=ServiceOptions()))
    transport = httpx.ASGITransport(app=create_app(keyless))
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as http:
        refused = await http.post(SUBSCRIPTIONS, json=HOOK)
        error = assert_error(refused, 409, "not_configured")
        assert "REDRIVE_SECRET_KEY" in error["message"]
        assert (await http.get(SUBSCRIPTIONS)).json() == {"subscriptions": []}


async def test_tenants_see_and_change_only_their_own_subscriptions(
    client: httpx.AsyncClient,
) -> None:
    forbid_server_errors(client)
    acme = await create(client, ACME)
    globex = await create(client, GLOBEX)
    assert await subscription_ids(client, ACME) == [acme["id"]]
    assert await subscription_ids(client, GLOBEX) == [globex["id"]]
    path = f"{SUBSCRIPTIONS}/{acme['id']}"
    assert_error(await client.get(path, headers=GLOBEX), 404, "not_found")
    assert_error(await client.patch(path, json={"active": False}, headers=GLOBEX), 404, "not_found")
    assert_error(await client.post(f"{path}/rotate-secret", headers=GLOBEX), 404, "not_found")
    assert_error(await client.delete(path, headers=GLOBEX), 404, "not_found")
    answered = await client.get(
        "/ojs/v1/webhooks/deliveries", params={"subscription_id": acme["id"]}, headers=GLOBEX
    )
    assert_error(answered, 404, "not_found")
    assert (await client.get(path, headers=ACME)).json()["subscription"]["active"] is True


async def test_every_change_is_audited_without_the_url_or_a_secret(
    client: httpx.AsyncClient, service: Service
) -> None:
    made = await create(client, ACME, secret=GIVEN_SECRET)
    path = f"{SUBSCRIPTIONS}/{made['id']}"
    await client.patch(path, json={"url": "https://other.example.com/x"}, headers=ACME)
    await client.post(f"{path}/rotate-secret", headers=ACME)
    await client.delete(path, headers=ACME)
    records = await service.audit.list(ACROSS_TENANTS, AuditQuery(limit=10))
    actions = [(record.tenant_id, record.action) for record in reversed(records)]
    assert actions == [
        ("acme", "webhook.create"), ("acme", "webhook.update"),
        ("acme", "webhook.rotate_secret"), ("acme", "webhook.delete"),
    ]  # fmt: skip
    assert records[2].target_value()["changed"] == ["url"]
    for record in records:
        assert record.target_value()["subscription_id"] == made["id"]
        assert "example.com" not in record.target and GIVEN_SECRET not in record.target


async def test_the_delivery_queue_is_closed_to_clients(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)
    job = {"type": "webhook.deliver", "args": [], "options": {"queue": "redrive.webhooks"}}
    assert_error(await client.post("/ojs/v1/jobs", json=job), 400, "invalid_request")
    fetch = {"queues": ["redrive.webhooks"]}
    assert_error(await client.post("/ojs/v1/workers/fetch", json=fetch), 400, "invalid_request")
    paused = await client.post("/ojs/v1/queues/redrive.webhooks/pause")
    assert_error(paused, 400, "invalid_request")
    cron = {"name": "n", "expression": "0 3 * * *", "type": "a.b",
            "options": {"queue": "redrive.other"}}  # fmt: skip
    assert_error(await client.post("/ojs/v1/cron", json=cron), 400, "invalid_request")
