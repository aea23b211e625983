"""The dashboard's incident pages: the list with its filters and orders (linked from the
navigation), one incident with its dead letters and the state buttons, and those buttons' posts
(CSRF-checked, refused where the state does not allow them, recorded as the dashboard's)."""

from __future__ import annotations

import httpx
import pytest

from redrive.domain.audit import AuditQuery
from redrive.domain.trend import HOUR_MS
from redrive.service.facade import Service
from tests.behaviour.test_incidents import die, incident_of
from tests.dashboard.conftest import post_form, session_token
from tests.support.callers import ACROSS_TENANTS
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_the_incident_list_filters_and_orders(
    dashboard: httpx.AsyncClient, clock: ManualClock
) -> None:
    timeout = await incident_of(dashboard, await die(dashboard))
    await die(dashboard, "stripe API timed out after 99s (POST /v1/charges)")
    clock.advance(1_000)
    declined = await incident_of(dashboard, await die(dashboard, "card_declined", "CardError"))

    page = await dashboard.get("/ui/incidents")
    assert page.status_code == 200
    assert 'href="/ui/incidents" aria-current="page"' in page.text
    assert page.text.index(declined) < page.text.index(timeout)  # the most recent first
    assert "stripe API timed out after &lt;duration&gt; (POST /v1/charges)" in page.text
    by_count = await dashboard.get("/ui/incidents", params={"sort": "count", "state": ""})
    assert by_count.text.index(timeout) < by_count.text.index(declined)
    only = await dashboard.get("/ui/incidents", params={"error_type": "CardError"})
    assert declined in only.text and timeout not in only.text
    none = await dashboard.get("/ui/incidents", params={"state": "resolved"})
    assert "No incidents match" in none.text
    paged = await dashboard.get("/ui/incidents", params={"limit": "1"})
    assert "More incidents" in paged.text
    refused = await dashboard.get("/ui/incidents", params={"sort": "sideways"})
    assert refused.status_code == 400
    assert "sort must be recent or count" in refused.text


async def test_an_incident_page_changes_state_with_its_buttons(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    job = await die(dashboard)
    incident = await incident_of(dashboard, job)
    page = await dashboard.get(f"/ui/incidents/{incident}")
    assert page.status_code == 200
    assert f'href="/ui/dead-letters/{job}"' in page.text
    assert f'href="/ui/dead-letters?incident={incident}"' in page.text
    for button in (">Acknowledge</button>", ">Ignore</button>", ">Resolve</button>"):
        assert button in page.text
    assert ">Reopen</button>" not in page.text
    detail = await dashboard.get(f"/ui/dead-letters/{job}")
    assert f'href="/ui/incidents/{incident}"' in detail.text
    listed = await dashboard.get("/ui/dead-letters", params={"incident": incident})
    assert f'data-job-id="{job}"' in listed.text

    token = await session_token(dashboard)
    path = f"/ui/incidents/{incident}"
    forged = await post_form(dashboard, f"{path}/acknowledge", {})
    assert forged.status_code == 403
    acknowledged = await post_form(dashboard, f"{path}/acknowledge", {"csrf_token": token})
    assert acknowledged.status_code == 303
    shown = await dashboard.get(acknowledged.headers["location"])
    assert "acknowledged." in shown.text  # the flash
    assert ">Acknowledge</button>" not in shown.text
    assert ">Reopen</button>" in shown.text

    missing_fix = await post_form(dashboard, f"{path}/resolve", {"csrf_token": token})
    assert missing_fix.status_code == 400
    assert "fix_reference must be a non-empty string" in missing_fix.text
    fields = {"csrf_token": token, "fix_reference": "PR #55"}
    resolved = await post_form(dashboard, f"{path}/resolve", fields)
    assert resolved.status_code == 303
    shown = await dashboard.get(resolved.headers["location"])
    assert '<dd data-testid="fix-reference">PR #55</dd>' in shown.text
    again = await post_form(dashboard, f"{path}/acknowledge", {"csrf_token": token})
    assert again.status_code == 409
    assert "cannot acknowledge incident" in again.text
    unknown = await post_form(dashboard, f"{path}/close", {"csrf_token": token})
    assert unknown.status_code == 404

    records = await service.audit.list(ACROSS_TENANTS, AuditQuery())
    incident_records = [r for r in records if r.action.startswith("incident.")]
    assert [(r.action, r.actor) for r in incident_records] == [
        ("incident.resolve", "dashboard"), ("incident.acknowledge", "dashboard"),
    ]  # fmt: skip


async def test_an_unknown_incident_is_a_not_found_page(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.get("/ui/incidents/inc_" + "0" * 24)
    assert response.status_code == 404


async def test_an_operator_records_the_root_cause_and_the_class_on_the_incident_page(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    incident = await incident_of(dashboard, await die(dashboard))
    path = f"/ui/incidents/{incident}"
    page = await dashboard.get(path)
    assert 'data-testid="no-root-cause"' in page.text
    assert '<dd data-testid="class">infrastructure (by the rules)</dd>' in page.text
    assert ">Record the root cause</button>" in page.text and ">Classify</button>" in page.text

    token = await session_token(dashboard)
    empty = await post_form(dashboard, f"{path}/root-cause", {"csrf_token": token,
                            "category": "contract", "root_cause": " "})  # fmt: skip
    assert empty.status_code == 400 and "root_cause must be a non-empty string" in empty.text
    fields = {"csrf_token": token, "category": "contract", "root_cause": "v2 payloads",
              "fix_reference": "PR #77"}  # fmt: skip
    recorded = await post_form(dashboard, f"{path}/root-cause", fields)
    assert recorded.status_code == 303, recorded.text
    shown = await dashboard.get(recorded.headers["location"])
    assert "Root cause of incident" in shown.text
    assert '<dd data-testid="root-cause-fix">PR #77</dd>' in shown.text
    assert '<dd data-testid="class">contract (by <span class="mono">dashboard</span>)</dd>' in (
        shown.text
    )
    classified = await post_form(dashboard, f"{path}/classify",
                                 {"csrf_token": token, "class": "poison_pill"})  # fmt: skip
    assert classified.status_code == 303
    shown = await dashboard.get(classified.headers["location"])
    assert "archive and discard" in shown.text
    bad = await post_form(dashboard, f"{path}/classify", {"csrf_token": token, "class": "x"})
    assert bad.status_code == 400
    records = await service.audit.list(ACROSS_TENANTS, AuditQuery())
    assert [r.action for r in records if r.action.startswith("incident.")] == [
        "incident.classify", "incident.root_cause"  # the category classified it: one record
    ]  # fmt: skip


def sparkline_of(page: str, incident: str) -> str:
    """The SVG in the incident's row of the list."""
    row = page[page.index(f'<tr data-incident-id="{incident}"') :]
    row = row[: row.index("</tr>")]
    return row[row.index("<svg") : row.index("</svg>") + len("</svg>")]


async def test_the_incident_list_draws_each_incidents_trend(
    dashboard: httpx.AsyncClient, clock: ManualClock
) -> None:
    incident = await incident_of(dashboard, await die(dashboard))  # 4 hours before the reading
    clock.advance(HOUR_MS)
    await die(dashboard)
    await die(dashboard)
    clock.advance(HOUR_MS)
    for _ in range(3):
        await die(dashboard)
    quiet = await incident_of(dashboard, await die(dashboard, "card_declined", "CardError"))
    clock.advance(2 * HOUR_MS)  # nothing for two hours

    page = (await dashboard.get("/ui/incidents")).text
    svg = sparkline_of(page, incident)
    expected = ",".join(str(count) for count in [0] * 19 + [1, 2, 3, 0, 0])
    assert f'data-counts="{expected}"' in svg
    assert 'role="img"' in svg
    label = (
        f"Dead letters per hour over the last 24 hours, oldest first: {expected.replace(',', ', ')}"
        " (6 in all). Quiet: none in the last 2 hours, 6 in the last 24 hours."
    )
    assert f'aria-label="{label}"' in svg and f"<title>{label}</title>" in svg
    assert svg.count("<rect") == 24
    assert svg.count('class="bar"') == 3  # three buckets had arrivals, the others are empty
    assert "quiet: none in the last 2 hours, 6 in the last 24 hours" in page
    declined = ",".join(["0"] * 21 + ["1", "0", "0"])
    assert f'data-counts="{declined}"' in sparkline_of(page, quiet)

    for _ in range(4):
        await die(dashboard)
    page = (await dashboard.get("/ui/incidents")).text
    assert "rising: 4 in the last hour, 0 the hour before" in page
    week = (await dashboard.get("/ui/incidents", params={"trend": "7d"})).text
    assert 'data-counts="0,0,0,0,0,0,10"' in sparkline_of(week, incident)
    assert '<option value="7d" selected>last 7 days</option>' in week
    refused = await dashboard.get("/ui/incidents", params={"trend": "month"})
    assert refused.status_code == 400
    assert "trend must be one of 24h, 7d" in refused.text


async def test_an_incident_page_charts_its_trend(
    dashboard: httpx.AsyncClient, clock: ManualClock
) -> None:
    incident = await incident_of(dashboard, await die(dashboard))
    clock.advance(HOUR_MS)
    await die(dashboard)
    await die(dashboard)
    page = (await dashboard.get(f"/ui/incidents/{incident}")).text
    figure = page[page.index('data-testid="trend"') : page.index("</figure>")]
    assert 'data-counts="' + ",".join(["0"] * 22 + ["1", "2"]) + '"' in figure
    assert figure.count('<rect class="bar') == 24
    assert "rising: 2 in the last hour, 1 the hour before" in figure
    # Now is 2026-09-21 15:13:20 UTC: each bar is titled with its hour's start and count.
    assert "<title>2026-09-21 14:13:20 UTC: 2</title>" in figure
    assert "<title>2026-09-21 13:13:20 UTC: 1</title>" in figure
    week = (await dashboard.get(f"/ui/incidents/{incident}", params={"trend": "7d"})).text
    assert 'data-counts="0,0,0,0,0,0,3"' in week
    refused = await dashboard.get(f"/ui/incidents/{incident}", params={"trend": "1y"})
    assert refused.status_code == 400
