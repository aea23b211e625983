"""The dashboard's alerts: a banner on every page while alerts fire (none without), the alerts
page with its state filter, and its acknowledge button (CSRF-checked, 409 a second time,
recorded as the dashboard's), after which the banner is gone."""

from __future__ import annotations

import httpx
import pytest

from redrive.domain.alerts import AlertQuery
from redrive.domain.audit import Action, AuditQuery
from redrive.service.facade import Service
from tests.behaviour.test_alerts import die
from tests.dashboard.conftest import post_form, session_token
from tests.support.callers import ACROSS_TENANTS

pytestmark = pytest.mark.anyio
BANNER = 'data-testid="alert-banner"'


async def test_a_banner_on_every_page_while_alerts_fire(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    assert BANNER not in (await dashboard.get("/ui")).text
    await die(dashboard, 11)
    await service.sweeper.evaluate_alerts()
    for path in ("/ui", "/ui/dead-letters", "/ui/incidents", "/ui/retention", "/ui/alerts"):
        page = await dashboard.get(path)
        assert page.status_code == 200, path
        assert BANNER in page.text, path
        assert "2 alerts firing" in page.text and "1 warning, 1 info" in page.text, path
        assert 'href="/ui/alerts?state=firing"' in page.text


async def test_the_alerts_page_acknowledges_with_its_button(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    await die(dashboard)
    await service.sweeper.evaluate_alerts()
    [alert] = await service.alerts.search(ACROSS_TENANTS, AlertQuery())
    page = await dashboard.get("/ui/alerts")
    assert f'data-alert-id="{alert.id}"' in page.text
    assert 'href="/ui/alerts" aria-current="page"' in page.text
    assert ">Acknowledge</button>" in page.text
    none = await dashboard.get("/ui/alerts", params={"state": "resolved"})
    assert "No alerts match" in none.text
    refused = await dashboard.get("/ui/alerts", params={"state": "sideways"})
    assert refused.status_code == 400

    token = await session_token(dashboard)
    path = f"/ui/alerts/{alert.id}/acknowledge"
    assert (await post_form(dashboard, path, {})).status_code == 403
    acknowledged = await post_form(dashboard, path, {"csrf_token": token})
    assert acknowledged.status_code == 303
    shown = await dashboard.get(acknowledged.headers["location"])
    assert "acknowledged." in shown.text  # the flash
    assert ">Acknowledge</button>" not in shown.text
    assert BANNER not in shown.text  # nothing firing any more
    again = await post_form(dashboard, path, {"csrf_token": token})
    assert again.status_code == 409
    records = await service.audit.list(ACROSS_TENANTS, AuditQuery(action=Action.ALERT_ACKNOWLEDGE))
    assert [(r.actor, r.target_value()["alert_id"]) for r in records] == [("dashboard", alert.id)]
