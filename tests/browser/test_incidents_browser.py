"""The incident workflow in a real browser: from the navigation to the list, into an incident,
acknowledge it, resolve it with a fix, watch a new dead letter regress it, and follow it to its
dead letters. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Api, screenshot

pytestmark = pytest.mark.xdist_group("browser")


def test_acknowledge_resolve_and_a_regression(page: Page, api: Api, backend: str) -> None:
    timeouts = [api.kill("billing", "charge.card", "GatewayTimeout", [n]) for n in range(3)]
    api.kill("mail", "mail.send", "SmtpError", [{"to": "a@x"}])
    page.goto("/ui")
    page.get_by_role("link", name="Incidents").click()
    expect(page).to_have_url(re.compile("/ui/incidents$"))
    rows = page.locator("#incidents tbody tr")
    expect(rows).to_have_count(2)
    screenshot(page, "incidents", backend)

    page.get_by_label("Order").select_option("count")
    page.get_by_role("button", name="Filter").click()
    first = rows.first
    expect(first).to_contain_text("charge.card")
    expect(first.locator("td.number").first).to_have_text("3")
    # Its trend: a sparkline whose accessible name gives the numbers, and the direction.
    expect(first.get_by_role("img", name=re.compile(r"\(3 in all\)"))).to_be_visible()
    expect(first).to_contain_text("rising: 3 in the last hour, 0 the hour before")
    first.get_by_role("link").click()
    expect(
        page.get_by_role("heading", name=re.compile("charge.card: GatewayTimeout"))
    ).to_be_visible()
    expect(page.get_by_test_id("dead-count")).to_have_text("3")

    page.get_by_role("button", name="Acknowledge").click()
    expect(page.locator(".flash")).to_contain_text("acknowledged")
    expect(page.get_by_role("button", name="Acknowledge")).to_have_count(0)
    page.get_by_label("Fix (a PR, a commit, a deployment)").fill("PR #481")
    page.get_by_role("button", name="Resolve").click()
    expect(page.locator(".flash")).to_contain_text("resolved")
    expect(page.get_by_test_id("fix-reference")).to_have_text("PR #481")
    screenshot(page, "incident-resolved", backend)

    api.kill("billing", "charge.card", "GatewayTimeout", [99])
    page.reload()
    expect(page.get_by_role("heading", name=re.compile("regressed"))).to_be_visible()
    expect(page.get_by_test_id("dead-count")).to_have_text("4")
    page.get_by_role("link", name="last 7 days").click()
    trend = page.get_by_test_id("trend")
    expect(trend).to_contain_text("rising: 4 in the last day, 0 the day before")
    expect(trend.get_by_role("img", name=re.compile(r"per day .*\(4 in all\)"))).to_be_visible()
    screenshot(page, "incident-trend", backend)
    page.get_by_role("link", name=re.compile("Every dead letter of this incident")).click()
    expect(page.get_by_test_id("match-count")).to_have_text("4")
    listed = page.locator("tbody tr[data-job-id]").evaluate_all(
        "rows => rows.map(row => row.dataset.jobId)"
    )
    assert set(timeouts) <= set(listed)
