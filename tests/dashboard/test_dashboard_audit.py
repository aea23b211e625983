"""The dashboard's audit page: records with filters, the chains verified on demand, linked from
the navigation; an action taken in the dashboard is recorded as the dashboard's."""

from __future__ import annotations

import httpx
import pytest

from redrive.service.facade import Service
from tests.behaviour.test_audit_log import drop_triggers, execute
from tests.dashboard.conftest import post_form, session_token

pytestmark = pytest.mark.anyio


async def test_the_audit_page_lists_filters_and_verifies(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    assert (await dashboard.post("/ojs/v1/queues/mail/pause")).status_code == 200
    assert (await dashboard.post("/ojs/v1/queues/mail/resume")).status_code == 200
    token = await session_token(dashboard)
    created = await post_form(
        dashboard, "/ui/rules",
        {"csrf_token": token, "name": "smtp-retry", "filter": '{"queue": "mail"}',
         "delay": "PT5M", "max_replays": "3", "enabled": "on"},
    )  # fmt: skip
    assert created.status_code == 303, created.text

    page = await dashboard.get("/ui/audit")
    assert page.status_code == 200
    assert 'href="/ui/audit" aria-current="page"' in page.text
    for text in ("queue.pause", "queue.resume", "replay_rule.create", "smtp-retry"):
        assert text in page.text
    assert '<td class="mono">dashboard</td>' in page.text  # the rule made in the dashboard
    assert '<td class="mono">api</td>' in page.text
    filtered = await dashboard.get("/ui/audit", params={"action": "queue.resume", "actor": ""})
    assert "queue.resume</td>" in filtered.text
    assert "queue.pause</td>" not in filtered.text
    assert "No audit records match" in (await dashboard.get("/ui/audit?actor=nobody")).text
    paged = await dashboard.get("/ui/audit", params={"limit": "2"})
    assert "Older records" in paged.text

    verified = await dashboard.get("/ui/audit/verify")
    assert "intact" in verified.text
    assert "broken" not in verified.text
    await drop_triggers(service)
    await execute(service, "UPDATE audit_log SET affected = 5 WHERE seq = 2")
    broken = await dashboard.get("/ui/audit/verify")
    assert "broken at record 2 (altered)" in broken.text


async def test_a_bad_audit_query_is_an_error_page(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.get("/ui/audit?action=queue.explode")
    assert response.status_code == 400
    assert "action must be one of" in response.text
