"""An operator's session in a real browser: filter, open a detail, retry one, retry with a changed
queue, bulk-retry a filtered set after its dry run, delete with confirmation, and check that the
database changed exactly as the pages said. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Api, screenshot

pytestmark = pytest.mark.xdist_group("browser")


# Pretend the tab is hidden or shown again, and note whether each htmx poll went out.
HIDE_TAB = """() => {
    window.liveRequests = [];
    document.addEventListener("htmx:beforeRequest", (event) => {
        window.liveRequests.push(event.defaultPrevented ? "skipped" : "sent");
    });
    Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
    document.dispatchEvent(new Event("visibilitychange"));
}"""
SHOW_TAB = """() => {
    Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
    document.dispatchEvent(new Event("visibilitychange"));
}"""


def seed(api: Api) -> dict[str, list[str]]:
    return {
        "mail": [api.kill("mail", "mail.send", "SmtpError", [{"to": f"u{n}@x"}]) for n in range(3)],
        "sms": [api.kill("sms", "sms.send", "GatewayTimeout", [n]) for n in range(2)],
        "report": [api.kill("reports", "report.build", "ValueError", ["q3"])],
    }


def rows(page: Page) -> list[str]:
    return [str(item) for item in page.locator("tbody tr[data-job-id]").evaluate_all(
        "rows => rows.map(row => row.dataset.jobId)"
    )]  # fmt: skip


def filter_list(page: Page, **fields: str) -> None:
    page.goto("/ui/dead-letters")
    for name, value in fields.items():
        page.locator(f"form.filters [name={name}]").fill(value)
    page.get_by_role("button", name="Apply filters").click()
    for name, value in fields.items():
        expect(page).to_have_url(re.compile(f"{name}={re.escape(value)}"))


def test_an_operator_session(page: Page, api: Api, backend: str) -> None:
    jobs = seed(api)
    page.goto("/ui")
    expect(page.get_by_test_id("dead-total")).to_have_text("6")
    expect(page.get_by_role("cell", name="SmtpError")).to_be_visible()
    screenshot(page, "overview", backend)

    # Filter the list: the URL keeps the filter, the count and rows follow it.
    filter_list(page, queue="mail")
    expect(page.get_by_test_id("match-count")).to_have_text("3")
    assert page.url.endswith("/ui/dead-letters?queue=mail&status=dead&limit=50")
    assert set(rows(page)) == set(jobs["mail"])
    screenshot(page, "dead-letters-filtered", backend)

    # Open a detail page: envelope, args, backtrace.
    first = rows(page)[0]
    page.locator(f'tr[data-job-id="{first}"] a').first.click()
    expect(page.get_by_role("heading", name=re.compile("mail.send in queue mail"))).to_be_visible()
    expect(page.get_by_test_id("backtrace")).to_contain_text("app/mail.py, line 12")
    expect(page.get_by_test_id("args")).to_contain_text('"to": "u')
    screenshot(page, "detail", backend)

    # Retry one.
    page.get_by_role("button", name="Retry now").click()
    expect(page.locator(".flash")).to_contain_text(f"Retried job {first} (mail.send) to queue mail")
    assert api.job(first)["state"] == "available"
    assert api.dead_letter_ids("retried") == {first}

    # Retry another with a modified queue, after seeing what changes.
    second = next(job_id for job_id in jobs["mail"] if job_id != first)
    page.goto(f"/ui/dead-letters/{second}")
    page.get_by_role("link", name="Retry with changes…").click()
    page.get_by_label("Queue").fill("mail-fixed")
    page.get_by_role("button", name="Preview changes").click()
    changed = page.locator("tr.changed")
    expect(changed).to_have_count(1)
    expect(changed.locator("th")).to_have_text("queue")
    screenshot(page, "retry-with-changes", backend)
    page.get_by_role("button", name="Retry with these changes").click()
    expect(page.locator(".flash")).to_contain_text("to queue mail-fixed with changes to queue")
    assert (api.job(second)["queue"], api.job(second)["state"]) == ("mail-fixed", "available")

    # The redrive policy: before a bulk retry, the incident's root cause and fix, recorded on
    # the incident page.
    dead = api.http.get(f"/ojs/v1/dead-letter/{jobs['sms'][0]}").json()["job"]
    page.goto(f"/ui/incidents/{dead['incident_id']}")
    expect(page.get_by_test_id("no-root-cause")).to_be_visible()
    page.locator("#rca-category").select_option("infrastructure")
    page.locator("#rca-cause").fill("the SMS gateway timed out during its upgrade")
    page.locator("#rca-fix").fill("PR #12")
    page.get_by_role("button", name="Record the root cause").click()
    expect(page.get_by_test_id("root-cause-fix")).to_have_text("PR #12")

    # Bulk-retry a filtered set, after seeing its dry-run count.
    filter_list(page, queue="sms")
    expect(page.get_by_test_id("match-count")).to_have_text("2")
    page.get_by_role("button", name="Retry all 2 matching…").click()
    expect(page.get_by_test_id("dry-run-count")).to_have_text("2")
    expect(page.get_by_text("queue is sms")).to_be_visible()
    screenshot(page, "bulk-confirm", backend)
    page.get_by_role("button", name="Retry these 2 dead letters").click()
    expect(page.locator(".flash")).to_contain_text("Retried 2 dead letters to queue sms.")
    expect(page.get_by_text("No dead letters match this filter")).to_be_visible()
    assert api.dead_letter_ids("retried") == {first, second, *jobs["sms"]}

    # Delete one, with confirmation.
    (report,) = jobs["report"]
    page.goto(f"/ui/dead-letters/{report}")
    page.get_by_role("link", name="Delete…").click()
    screenshot(page, "delete-confirm", backend)
    page.get_by_role("button", name="Delete 1 dead letter").click()
    expect(page.locator(".flash")).to_contain_text(f"Deleted dead letter {report}")

    # Select the last row and delete the selection.
    page.goto("/ui/dead-letters")
    (last,) = set(jobs["mail"]) - {first, second}
    assert rows(page) == [last]
    page.get_by_label(f"Select job {last}").check()
    expect(page.locator("[data-selected-count]")).to_have_text("1")
    page.get_by_role("button", name="Delete selected…").click()
    expect(page.get_by_test_id("dry-run-count")).to_have_text("1")
    page.get_by_role("button", name="Delete this dead letter").click()
    expect(page.locator(".flash")).to_contain_text("Deleted 1 dead letter.")
    expect(page.get_by_text("The dead-letter queue is empty")).to_be_visible()
    screenshot(page, "dead-letters-empty", backend)

    # The database holds exactly what the pages said.
    assert api.dead_letter_ids("dead") == set()
    assert api.dead_letter_ids("retried") == {first, second, *jobs["sms"]}
    assert api.dead_letter_ids("deleted") == {report, last}


def test_settings_pages_keyboard_and_back_button(page: Page, api: Api, backend: str) -> None:
    api.kill("mail", "mail.send", "SmtpError", [1])
    api.kill("sms", "sms.send", "GatewayTimeout", [2])
    page.goto("/ui/rules")
    page.get_by_label("Name").fill("smtp-retry")
    page.get_by_label("Filter (JSON)").fill('{"queue": "mail", "error_type": "SmtpError"}')
    page.get_by_role("button", name="Add rule").click()
    expect(page.locator(".flash")).to_contain_text("Created replay rule smtp-retry.")
    expect(page.get_by_role("rowheader", name="smtp-retry")).to_be_visible()
    screenshot(page, "rules", backend)

    page.goto("/ui/retention")
    page.locator("#q-queue").fill("mail")
    page.locator("#q-count").fill("50")
    page.get_by_role("button", name="Save queue policy").click()
    expect(page.locator(".flash")).to_contain_text("Retention for queue mail: keep 50")
    expect(page.get_by_role("cell", name="own policy")).to_be_visible()
    screenshot(page, "retention", backend)

    # Live updates: polls are skipped while the tab is hidden, and resume when it is visible.
    page.goto("/ui")
    expect(page.get_by_test_id("dead-total")).to_have_text("2")
    page.evaluate(HIDE_TAB)
    page.evaluate("htmx.trigger('#overview', 'refresh')")
    polls = page.evaluate("window.liveRequests")
    assert polls and set(polls) == {"skipped"}  # a timed poll may have been skipped too
    with page.expect_response(lambda response: response.url.endswith("/ui")) as refreshed:
        page.evaluate(SHOW_TAB)
    assert refreshed.value.status == 200
    assert refreshed.value.request.headers.get("hx-request") == "true"
    expect(page.locator("#live-status")).to_have_text("Live updates on")

    # Keyboard: the first Tab reaches the skip link, and focus is visible.
    page.goto("/ui/dead-letters")
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip to content")
    outline = page.locator(":focus").evaluate("element => getComputedStyle(element).outlineStyle")
    assert outline != "none"

    # Filters live in the URL: a filtered view survives back and forward.
    filter_list(page, queue="sms")
    expect(page.get_by_test_id("match-count")).to_have_text("1")
    page.goto("/ui/rules")
    page.go_back()
    expect(page).to_have_url(re.compile("queue=sms"))
    expect(page.get_by_test_id("match-count")).to_have_text("1")
    page.locator("form.filters [name=queue]").fill("")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.get_by_test_id("match-count")).to_have_text("2")
    page.go_back()  # within htmx's pushed history: the whole page comes back, filter and all
    expect(page).to_have_url(re.compile("queue=sms"))
    expect(page.get_by_test_id("match-count")).to_have_text("1")
    expect(page.locator("form.filters [name=queue]")).to_have_value("sms")
    expect(page.locator("form.filters")).to_have_count(1)
