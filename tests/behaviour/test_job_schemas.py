"""Job schemas (the OJS job-versioning extension): registered per tenant, type and version,
replaced on a second registration, audited, read back; bad registrations refused."""

from __future__ import annotations

import httpx
import pytest

from redrive.domain.audit import Action, AuditQuery
from redrive.service.facade import Service
from tests.behaviour.ojs_http import assert_error, forbid_server_errors
from tests.support.callers import CALLER

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def test_a_schema_is_registered_replaced_read_back_and_audited(
    client: httpx.AsyncClient, service: Service
) -> None:
    path = "/ojs/v1/admin/schemas/email.send/2"
    first = await client.put(path, json={"schema": SCHEMA})
    assert first.status_code == 200, first.text
    assert first.json() == {
        **first.json(), "type": "email.send", "version": 2, "schema": SCHEMA, "created": True,
    }  # fmt: skip
    replacement = {"type": "array"}
    again = (await client.put(path, json={"schema": replacement})).json()
    assert (again["created"], again["schema"]) == (False, replacement)
    read = (await client.get(path)).json()
    assert (read["type"], read["version"], read["schema"]) == ("email.send", 2, replacement)
    assert_error(await client.get("/ojs/v1/admin/schemas/email.send/3"), 404, "not_found")
    other = await client.get(path, headers={"X-OJS-Tenant": "acme"})
    assert_error(other, 404, "not_found")
    records = await service.audit.list(CALLER, AuditQuery(action=Action.JOB_SCHEMA_REGISTER))
    assert [record.target_value()["replaced"] for record in records] == [True, False]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("email.send/2", {"schema": SCHEMA, "extra": 1}, "extra"),
        ("email.send/2", {}, "schema"),
        ("email.send/2", {"schema": "object"}, "schema"),
        ("email.send/2", {"schema": {"type": "no-such-type"}}, "schema"),
        ("email.send/2", ["schema"], "body"),
        ("email.send/0", {"schema": SCHEMA}, "version"),
        ("email.send/v2", {"schema": SCHEMA}, "version"),
        ("Email/2", {"schema": SCHEMA}, "type"),
    ],
)
async def test_a_bad_registration_is_refused_and_stores_nothing(
    client: httpx.AsyncClient, path: str, body: object, field: str
) -> None:
    response = await client.put(f"/ojs/v1/admin/schemas/{path}", json=body)
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == field
    assert_error(await client.get("/ojs/v1/admin/schemas/email.send/2"), 404, "not_found")


async def test_a_job_is_acked_by_its_own_path_and_keeps_its_version(
    client: httpx.AsyncClient,
) -> None:
    body = {"type": "data.process", "args": [1], "version": 3, "options": {"queue": "v"}}
    job_id = (await client.post("/ojs/v1/jobs", json=body)).json()["job"]["id"]
    fetched = (await client.post("/ojs/v1/workers/fetch", json={"queues": ["v"]})).json()
    assert fetched["jobs"][0]["version"] == 3
    wrong = await client.post(f"/ojs/v1/jobs/{job_id}/ack", json={"job_id": "other"})
    assert_error(wrong, 400, "invalid_request")
    acked = await client.post(f"/ojs/v1/jobs/{job_id}/ack", json={"worker_id": "w"})
    assert acked.status_code == 200, acked.text
    assert acked.json()["job"]["state"] == "completed"
    assert (await client.get(f"/ojs/v1/jobs/{job_id}")).json()["job"]["version"] == 3
    assert_error(await client.post(f"/ojs/v1/jobs/{job_id}/ack"), 409, "conflict")
