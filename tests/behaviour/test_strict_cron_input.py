"""Cron bodies are read strictly at the edge: unknown keys and wrong types are 400s naming the
field, and nothing is registered or changed."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.behaviour.ojs_http import assert_error, forbid_server_errors

pytestmark = pytest.mark.anyio

GOOD = {"name": "nightly", "expression": "0 3 * * *", "job_template": {"type": "report.build"}}


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"schedule": "0 3 * * *"}, "schedule", id="unknown-key"),
        pytest.param({"name": 7}, "name", id="name-number"),
        pytest.param({"expression": ["0 3 * * *"]}, "expression", id="expression-list"),
        pytest.param({"timezone": 1}, "timezone", id="timezone-number"),
        pytest.param({"enabled": "yes"}, "enabled", id="enabled-string"),
        pytest.param({"overlap_policy": "sometimes"}, "overlap_policy", id="overlap"),
        pytest.param({"job_template": []}, "job_template", id="template-list"),
        pytest.param({"type": "inline.too"}, "type", id="template-and-inline"),
        pytest.param({"cron": "0 4 * * *"}, "cron", id="expression-and-cron"),
    ],
)
async def test_a_bad_cron_is_refused_and_nothing_is_registered(
    client: httpx.AsyncClient, changes: dict[str, Any], field: str
) -> None:
    response = await client.post("/ojs/v1/cron", json={**GOOD, **changes})
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == field
    assert (await client.get("/ojs/v1/cron")).json()["crons"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"enabled": "false"}, "enabled", id="string"),
        pytest.param({"enabled": False, "paused": True}, "paused", id="unknown-key"),
        pytest.param([], "body", id="array"),
    ],
)
async def test_a_bad_enable_body_is_refused_and_changes_nothing(
    client: httpx.AsyncClient, body: object, field: str
) -> None:
    assert (await client.post("/ojs/v1/cron", json=GOOD)).status_code == 201
    response = await client.patch("/ojs/v1/cron/nightly", json=body)
    assert assert_error(response, 400, "invalid_request")["details"]["field"] == field
    assert (await client.get("/ojs/v1/cron/nightly")).json()["cron"]["enabled"] is True
