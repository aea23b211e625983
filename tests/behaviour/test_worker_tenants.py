"""Worker directives stay within a tenant: one tenant cannot quiet or stop another's worker of
the same id."""

from __future__ import annotations

import httpx
import pytest

from tests.behaviour.ojs_http import assert_error, forbid_server_errors

pytestmark = pytest.mark.anyio

ACME = {"X-OJS-Tenant": "acme"}
GLOBEX = {"X-OJS-Tenant": "globex"}


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def beat(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    response = await client.post(
        "/ojs/v1/workers/heartbeat", json={"worker_id": "w1", "active_jobs": []}, headers=headers
    )
    assert response.status_code == 200, response.text
    return str(response.json()["state"])


async def test_a_directive_reaches_only_the_callers_tenants_worker(
    client: httpx.AsyncClient,
) -> None:
    assert await beat(client, ACME) == "running"
    foreign = await client.post("/ojs/v1/admin/workers/w1/quiet", headers=GLOBEX)
    assert_error(foreign, 404, "not_found")
    assert await beat(client, ACME) == "running"

    assert await beat(client, GLOBEX) == "running"  # globex's own w1
    assert (await client.post("/ojs/v1/admin/workers/w1/quiet", headers=GLOBEX)).status_code == 200
    assert await beat(client, GLOBEX) == "quiet"
    assert await beat(client, ACME) == "running"

    assert (await client.post("/ojs/v1/admin/workers/w1/resume", headers=GLOBEX)).status_code == 200
    assert await beat(client, GLOBEX) == "running"


async def test_an_unknown_worker_is_404(client: httpx.AsyncClient) -> None:
    assert_error(await client.post("/ojs/v1/admin/workers/nobody/terminate"), 404, "not_found")
