"""The dashboard over HTTP: pages change nothing, forged posts are refused, actions do exactly what
their confirmation showed, and hostile content is shown as text. Each test runs on both stores."""

from __future__ import annotations

import base64
import html
import re
from typing import Any

import httpx
import pytest

from redrive.dashboard.csrf import COOKIE_NAME
from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter import RetryOverride
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.durations import format_timestamp
from redrive.domain.errors import NotFound
from redrive.domain.replay import RuleChanges
from redrive.domain.retention import PolicyChanges
from redrive.ports import Page
from redrive.service.facade import Service
from redrive.settings import Settings
from tests.behaviour.ojs_http import explain_all, kill_job
from tests.behaviour.test_redrive_tasks import kill
from tests.dashboard.conftest import (
    BASE_URL,
    hidden_fields,
    post_form,
    session_token,
)
from tests.support.callers import ACROSS_TENANTS, CALLER, acting_as
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def dead_ids(service: Service, **raw: str) -> list[str]:
    filters = parse_filter(raw, service.now())
    items, _ = await service.dead_letters.search(CALLER, filters, Page(limit=1000))
    return sorted(dead.job_id for dead in items)


async def snapshot(service: Service) -> dict[str, Any]:
    """Everything a page could conceivably change."""
    statuses = {}
    for status in ("dead", "retried", "deleted", "replayed"):
        statuses[status] = await dead_ids(service, status=status)
    events = await service.events.list(ACROSS_TENANTS, None, None, None, None, 1000)
    return {
        "statuses": statuses,
        "stats": await service.dead_letters.stats(CALLER),
        "queues": await service.queues.overview(CALLER),
        "events": [stored.id for stored in events],
        "rules": [rule.to_document() for rule in await service.replay.list(CALLER)],
        "policies": (await service.retention.policies(SYSTEM)).queues,
    }


async def test_every_page_renders_and_changes_nothing(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    first = await kill_job(dashboard, queue="mail", job_type="mail.send", error_type="Smtp")
    await kill_job(dashboard, queue="sms", job_type="sms.send", error_type="Timeout")
    await service.replay.create(CALLER, RuleChanges(name="smtp", filter={"queue": "mail"}))
    await service.retention.set_policy(CALLER, "mail", PolicyChanges(max_count=5))
    before = await snapshot(service)
    pages = [
        "/", "/ui", "/ui/", "/ui/dead-letters", "/ui/dead-letters?queue=mail&type=mail.",
        "/ui/dead-letters?within=PT1H&status=retried", "/ui/dead-letters/count?queue=mail",
        f"/ui/dead-letters/{first}", f"/ui/dead-letters/{first}/retry",
        f"/ui/dead-letters/{first}/retry?preview=1&queue=elsewhere&priority=9",
        f"/ui/dead-letters/{first}/delete", "/ui/dead-letters/bulk?do=retry-filter&queue=mail",
        "/ui/dead-letters/bulk?do=purge-filter",
        f"/ui/dead-letters/bulk?do=delete-selection&id={first}",
        "/ui/rules", "/ui/retention", "/ui/static/app.css", "/ui/static/htmx.min.js",
    ]  # fmt: skip
    for path in pages:
        response = await dashboard.get(path, follow_redirects=True)
        assert response.status_code == 200, (path, response.text[:500])
    partial = await dashboard.get("/ui/dead-letters", headers={"hx-request": "true"})
    assert partial.status_code == 200
    assert "<html" not in partial.text
    assert first in partial.text
    assert await snapshot(service) == before


async def test_root_redirects_to_the_dashboard(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.get("/")
    assert response.status_code == 307
    assert response.headers["location"] == "/ui"
    health = await dashboard.get("/ojs/v1/health")
    assert health.status_code == 200


FORGERIES = {
    "no token": ({"origin": BASE_URL}, None),
    "wrong token": ({"origin": BASE_URL}, "A" * 43),
    "cross-site origin": ({"origin": "http://evil.example"}, "session"),
    "cross-site fetch": ({"origin": BASE_URL, "sec-fetch-site": "cross-site"}, "session"),
    "foreign referer": ({"referer": "http://evil.example/page"}, "session"),
    "no origin at all": ({}, "session"),
}


@pytest.mark.parametrize("case", sorted(FORGERIES))
async def test_forged_posts_are_refused_and_change_nothing(
    dashboard: httpx.AsyncClient, service: Service, case: str
) -> None:
    job_id = await kill_job(dashboard, queue="mail")
    token = await session_token(dashboard)
    headers, submitted = FORGERIES[case]
    fields = (
        {} if submitted is None else {"csrf_token": token if submitted == "session" else submitted}
    )
    before = await snapshot(service)
    attempts = [
        (f"/ui/dead-letters/{job_id}/retry", {**fields, "queue": "other"}),
        (f"/ui/dead-letters/{job_id}/delete", fields),
        ("/ui/dead-letters/bulk/delete", {**fields, "do": "purge-filter", "expected": "1"}),
        ("/ui/dead-letters/bulk/retry", {**fields, "do": "retry-selection", "id": job_id}),
        ("/ui/rules", {**fields, "name": "r", "filter": '{"queue": "mail"}'}),
        ("/ui/retention", {**fields, "max_count": "1"}),
    ]
    for path, form in attempts:
        response = await post_form(dashboard, path, form, headers=headers)
        assert response.status_code == 403, (case, path, response.text[:300])
        assert response.headers["content-type"].startswith("text/html")
        assert "Nothing was changed" in response.text
        assert "set-cookie" not in response.headers  # the session's token stays as it was
    assert await snapshot(service) == before
    assert await dead_ids(service) == [job_id]


async def test_the_csrf_cookie_is_strict_and_http_only(dashboard: httpx.AsyncClient) -> None:
    response = await dashboard.get("/ui/dead-letters")
    cookie = response.headers["set-cookie"].lower()
    assert cookie.startswith(COOKIE_NAME)
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert "path=/ui" in cookie
    again = await dashboard.get("/ui/dead-letters")
    assert "set-cookie" not in again.headers  # one token per browser session


async def test_hostile_content_is_shown_as_text(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    hostile = "<script>alert('x')</script>"
    job_id = await kill_job(
        dashboard, queue="mail", job_type="mail.send", error_type=hostile,
        args=["<img src=x onerror=alert(1)>", {"html": "</pre><b>bold</b>"}],
    )  # fmt: skip
    for path in ("/ui/dead-letters", f"/ui/dead-letters/{job_id}", "/ui"):
        page = (await dashboard.get(path)).text
        assert "<script>alert" not in page
        assert "<img src=x" not in page
        assert "</pre><b>" not in page
    detail = (await dashboard.get(f"/ui/dead-letters/{job_id}")).text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in detail
    assert "&lt;img src=x onerror=alert(1)&gt;" in detail
    listing = await dashboard.get(f"/ui/dead-letters?error_type={hostile}")
    assert job_id in listing.text
    assert "content-security-policy" in listing.headers


async def test_retry_with_changes_shows_the_changes_then_applies_them(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    job_id = await kill_job(dashboard, queue="mail", job_type="mail.send", args=[1])
    await session_token(dashboard)
    preview = await dashboard.get(
        f"/ui/dead-letters/{job_id}/retry",
        params={"preview": "1", "queue": "mail-fixed", "priority": "7", "meta": '{"fix": 1}'},
    )
    assert preview.status_code == 200
    assert "these fields change: <strong>queue, priority, meta</strong>" in preview.text
    assert await dead_ids(service) == [job_id]
    fields = hidden_fields(preview.text)
    response = await post_form(
        dashboard, f"/ui/dead-letters/{job_id}/retry", {k: v[0] for k, v in fields.items()}
    )
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/ui/dead-letters"
    job = await service.jobs.get(CALLER, job_id)
    assert (job.state, job.queue, job.priority, job.meta["fix"]) == (
        "available",
        "mail-fixed",
        7,
        1,
    )
    assert await dead_ids(service) == []
    assert await dead_ids(service, status="retried") == [job_id]
    landing = await dashboard.get("/ui/dead-letters")
    assert f"Retried job {job_id} (mail.send) to queue mail-fixed" in landing.text
    assert "Retried job" not in (await dashboard.get("/ui/dead-letters")).text


async def test_bad_retry_changes_are_explained_and_change_nothing(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    job_id = await kill_job(dashboard, queue="mail")
    token = await session_token(dashboard)
    preview = await dashboard.get(
        f"/ui/dead-letters/{job_id}/retry", params={"preview": "1", "args": "{not json"}
    )
    assert preview.status_code == 400
    assert "args is not valid JSON" in preview.text
    response = await post_form(
        dashboard, f"/ui/dead-letters/{job_id}/retry",
        {"csrf_token": token, "queue": "bad queue name!", "priority": "1"},
    )  # fmt: skip
    assert response.status_code == 400
    assert "queue" in response.text
    assert await dead_ids(service) == [job_id]


async def test_bulk_retry_of_a_filter_does_exactly_what_the_dry_run_showed(
    dashboard: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    mail = [await kill_job(dashboard, queue="mail", job_type="mail.send") for _ in range(3)]
    sms = [await kill_job(dashboard, queue="sms", job_type="sms.send") for _ in range(2)]
    await explain_all(service, CALLER)
    await session_token(dashboard)
    confirm = await dashboard.get(
        "/ui/dead-letters/bulk", params={"do": "retry-filter", "type": "mail"}
    )
    assert confirm.status_code == 200
    assert 'data-testid="dry-run-count">3<' in confirm.text
    assert "type starts with mail" in confirm.text
    fields = hidden_fields(confirm.text)
    assert fields["expected"] == ["3"]
    assert fields["until"]  # pinned: later arrivals are not part of the confirmed set
    clock.advance(1_000)
    late = await kill_job(dashboard, queue="mail", job_type="mail.send")
    response = await post_form(dashboard, "/ui/dead-letters/bulk/retry", fields)
    assert response.status_code == 303, response.text
    assert sorted(await dead_ids(service, status="retried")) == sorted(mail)
    assert sorted(await dead_ids(service)) == sorted([*sms, late])
    landing = await dashboard.get(response.headers["location"])
    assert "Retried 3 dead letters to queue mail." in landing.text


async def test_bulk_action_refuses_when_the_set_changed_since_the_dry_run(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    ids = [await kill_job(dashboard, queue="mail") for _ in range(3)]
    await session_token(dashboard)
    confirm = await dashboard.get("/ui/dead-letters/bulk", params={"do": "purge-filter"})
    fields = hidden_fields(confirm.text)
    assert fields["expected"] == ["3"]
    await service.dead_letters.delete(acting_as("someone-else"), ids[0])
    response = await post_form(dashboard, "/ui/dead-letters/bulk/delete", fields)
    assert response.status_code == 409
    assert "you confirmed 3, now 2 match" in response.text
    assert sorted(await dead_ids(service)) == sorted(ids[1:])


async def test_bulk_delete_of_a_selection_moves_only_the_selected(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    ids = [await kill_job(dashboard, queue="mail") for _ in range(3)]
    await session_token(dashboard)
    confirm = await dashboard.get(
        "/ui/dead-letters/bulk", params={"do": "delete-selection", "id": ids[:2]}
    )
    assert 'data-testid="dry-run-count">2<' in confirm.text
    response = await post_form(
        dashboard, "/ui/dead-letters/bulk/delete", hidden_fields(confirm.text)
    )
    assert response.status_code == 303
    assert await dead_ids(service) == [ids[2]]
    assert sorted(await dead_ids(service, status="deleted")) == sorted(ids[:2])
    with pytest.raises(NotFound):
        await service.dead_letters.get(CALLER, ids[0])
    deleted, _ = await service.dead_letters.search(
        CALLER, parse_filter({"status": "deleted"}, service.now()), Page(limit=10)
    )
    assert {dead.moved_by for dead in deleted} == {"dashboard"}


async def test_rules_and_retention_are_edited_through_forms(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    token = await session_token(dashboard)
    created = await post_form(
        dashboard, "/ui/rules",
        {"csrf_token": token, "name": "smtp-retry", "filter": '{"queue": "mail"}',
         "delay": "PT5M", "max_replays": "2", "enabled": "on"},
    )  # fmt: skip
    assert created.status_code == 303, created.text
    (rule,) = await service.replay.list(CALLER)
    assert (rule.name, rule.filter, rule.delay_ms, rule.max_replays, rule.enabled) == (
        "smtp-retry", {"queue": "mail"}, 300_000, 2, True,
    )  # fmt: skip
    disabled = await post_form(dashboard, f"/ui/rules/{rule.id}", {"csrf_token": token})
    assert disabled.status_code == 303
    assert not (await service.replay.get(CALLER, rule.id)).enabled
    duplicate = await post_form(
        dashboard, "/ui/rules", {"csrf_token": token, "name": "smtp-retry", "filter": "{}"}
    )
    assert duplicate.status_code == 400
    assert await post_form(dashboard, f"/ui/rules/{rule.id}/delete", {"csrf_token": token})
    assert await service.replay.list(CALLER) == []

    saved = await post_form(
        dashboard, "/ui/retention",
        {"csrf_token": token, "queue": "mail", "max_age": "P7D", "max_count": "50",
         "pruning_policy": "delete"},
    )  # fmt: skip
    assert saved.status_code == 303
    policies = await service.retention.policies(SYSTEM)
    assert (policies.queues["mail"].max_age_ms, policies.queues["mail"].max_count) == (
        7 * 86_400_000, 50,
    )  # fmt: skip
    assert policies.updated["mail"]["updated_by"] == "dashboard"
    page = await dashboard.get("/ui/retention")
    assert "own policy" in page.text
    removed = await post_form(dashboard, "/ui/retention/mail/delete", {"csrf_token": token})
    assert removed.status_code == 303
    assert (await service.retention.policies(SYSTEM)).queues == {}
    bad = await post_form(dashboard, "/ui/retention", {"csrf_token": token, "max_age": "soon"})
    assert bad.status_code == 400
    assert "max_age" in bad.text


@pytest.mark.parametrize(
    "path",
    [
        "/ui/dead-letters?status=zombie",
        "/ui/dead-letters?cursor=%%%",
        "/ui/dead-letters?limit=7",
        "/ui/dead-letters?since=yesterday",
        "/ui/dead-letters?args_match=customer",
        "/ui/dead-letters/bulk?do=explode",
        "/ui/dead-letters/bulk?do=retry-selection",
        "/ui/dead-letters/no-such-job",
    ],
)
async def test_bad_input_gets_a_clear_page(dashboard: httpx.AsyncClient, path: str) -> None:
    response = await dashboard.get(path)
    assert response.status_code in (400, 404), response.text
    assert response.headers["content-type"].startswith("text/html")
    assert 'class="problem"' in response.text
    assert "Traceback" not in response.text


def test_the_server_binds_to_loopback_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDRIVE_HOST", raising=False)
    monkeypatch.setenv("REDRIVE_CONFIG_FILE", "/nonexistent/redrive.toml")
    assert Settings().host == "127.0.0.1"


async def test_an_episode_that_left_the_queue_keeps_its_page(
    dashboard: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    job_id = await kill_job(dashboard, queue="mail", job_type="mail.send")
    await service.dead_letters.retry(acting_as("dashboard"), job_id, RetryOverride())
    clock.advance(1_000)
    listing = await dashboard.get("/ui/dead-letters", params={"status": "retried"})
    assert job_id in listing.text
    link = re.search(rf'href="(/ui/dead-letters/{job_id}\?[^"]+)"', listing.text)
    assert link is not None
    page = await dashboard.get(html.unescape(link.group(1)))
    assert page.status_code == 200, page.text
    assert "This episode is no longer dead: it was retried by dashboard" in page.text
    assert "The job is now <strong>available</strong> in queue mail" in page.text
    assert "Retry now" not in page.text
    # Without the episode in the link, the job's latest episode is shown, with the same warning.
    latest = await dashboard.get(f"/ui/dead-letters/{job_id}")
    assert latest.status_code == 200, latest.text
    assert "This episode is no longer dead: it was retried by dashboard" in latest.text
    never = await dashboard.get("/ui/dead-letters/no-such-job")
    assert never.status_code == 404


async def test_pages_follow_the_cursor_and_stop_at_the_end(
    dashboard: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    ids = []
    for number in range(26):
        ids.append(await kill_job(dashboard, queue="mail", args=[number]))
        clock.advance(1_000)
    first = await dashboard.get("/ui/dead-letters", params={"limit": "25"})
    shown = re.findall(r'<tr data-job-id="([^"]+)"', first.text)
    assert shown == list(reversed(ids))[:25]
    older = re.search(r'href="([^"]+)" rel="next"', first.text)
    assert older is not None
    second = await dashboard.get(html.unescape(older.group(1)))
    assert re.findall(r'<tr data-job-id="([^"]+)"', second.text) == [ids[0]]
    assert 'rel="next"' not in second.text
    assert "« Newest" in second.text
    await service.dead_letters.delete(CALLER, ids[0])
    exact = await dashboard.get("/ui/dead-letters", params={"limit": "25"})
    assert len(re.findall(r"<tr data-job-id=", exact.text)) == 25
    assert 'rel="next"' not in exact.text


def listed(page: str) -> list[str]:
    return re.findall(r'<tr data-job-id="([^"]+)"', page)


async def test_every_filter_of_the_list(
    dashboard: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    early = await kill_job(dashboard, queue="mail", job_type="mail.send", error_type="Smtp",
                           args=[{"customer_id": "c_1"}])  # fmt: skip
    clock.advance(3_600_000)
    middle = clock.now_ms()
    late = await kill_job(dashboard, queue="mail", job_type="mail.digest", error_type="Timeout",
                          args=[{"customer_id": "c_2"}])  # fmt: skip
    other = await kill_job(dashboard, queue="sms", job_type="sms.send", error_type="Timeout")
    await service.dead_letters.retry(acting_as("dashboard"), other, RetryOverride())
    moment = format_timestamp(middle)[:16]  # what <input type="datetime-local"> sends
    cases: list[tuple[dict[str, str], list[str]]] = [
        ({}, [late, early]),
        ({"queue": "mail"}, [late, early]),
        ({"type": "mail.s"}, [early]),
        ({"type": "mail.*"}, [late, early]),
        ({"error_type": "Timeout"}, [late]),
        ({"since": moment}, [late]),
        ({"until": moment}, [early]),
        ({"within": "PT15M"}, [late]),
        ({"args": "c_2"}, [late]),
        ({"args_match": '$.customer_id == "c_1"'}, [early]),
        ({"status": "retried"}, [other]),
        ({"queue": "sms"}, []),
    ]
    for params, expected in cases:
        response = await dashboard.get("/ui/dead-letters", params=params)
        assert response.status_code == 200, (params, response.text[:300])
        assert listed(response.text) == expected, params
        count = re.search(r'data-testid="match-count">(\d+)<', response.text)
        assert count is not None
        assert int(count.group(1)) == len(expected), params
    empty = await dashboard.get("/ui/dead-letters", params={"queue": "sms"})
    assert "No dead letters match this filter" in empty.text
    assert "queue is sms" in empty.text


@pytest.mark.parametrize(
    "raw", [b"99999999999999999999999:x", b"-5:x", b"17:", b"17:a\x00b", b"junk"], ids=repr
)
async def test_a_page_link_the_dashboard_did_not_make_is_a_400_page(
    dashboard: httpx.AsyncClient, raw: bytes
) -> None:
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    response = await dashboard.get("/ui/dead-letters", params={"cursor": cursor})
    assert response.status_code == 400
    assert "cursor is not one this server issued" in html.unescape(response.text)


async def test_bulk_retry_past_a_burst_becomes_a_paced_redrive_task(
    dashboard: httpx.AsyncClient, service: Service
) -> None:
    ids = await kill(service, 101)
    await session_token(dashboard)
    confirm = await dashboard.get(
        "/ui/dead-letters/bulk", params={"do": "retry-filter", "queue": "billing"}
    )
    fields = hidden_fields(confirm.text)
    assert fields["expected"] == ["101"]
    response = await post_form(dashboard, "/ui/dead-letters/bulk/retry", fields)
    assert response.status_code == 303, response.text
    assert response.headers["location"].startswith("/ui/redrives")
    [task] = await service.redrives.search(CALLER)
    assert (task.state, task.to_move, task.rate_per_minute) == ("running", 101, 100)
    assert sorted(await dead_ids(service)) == sorted(ids)  # the task moves them at its pace
    landing = await dashboard.get(response.headers["location"])
    assert f"redrive {task.id} started, 101 dead letters at 100/minute" in landing.text
