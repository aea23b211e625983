"""The dashboard's redrives: "redrive with pacing" on an incident page starts a task, the
Redrives page shows its progress (polling while one runs) and pauses, resumes and cancels it."""

from __future__ import annotations

import httpx
import pytest

from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.redrive import RedriveRequest
from redrive.ports import Store
from redrive.service.facade import Service
from tests.behaviour.ojs_http import explain_all
from tests.behaviour.test_incidents import die, incident_of
from tests.behaviour.test_redrive_failures import GAPPY, PICKY, kill, restarted, tick
from tests.dashboard.conftest import post_form, session_token
from tests.support.callers import ACROSS_TENANTS, CALLER
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_redrive_with_pacing_from_an_incident_and_steer_it(
    dashboard: httpx.AsyncClient, service: Service, clock: ManualClock
) -> None:
    incident = await incident_of(dashboard, await die(dashboard))
    await die(dashboard, "stripe API timed out after 99s (POST /v1/charges)")
    await explain_all(service, ACROSS_TENANTS)  # the redrive policy asks for a root cause
    page = await dashboard.get(f"/ui/incidents/{incident}")
    assert ">Redrive with pacing</button>" in page.text
    empty = await dashboard.get("/ui/redrives")
    assert "No redrive yet." in empty.text and "hx-trigger" not in empty.text

    token = await session_token(dashboard)
    forged = await post_form(dashboard, "/ui/redrives", {"incident": incident})
    assert forged.status_code == 403
    started = await post_form(
        dashboard,
        "/ui/redrives",
        {"csrf_token": token, "incident": incident, "rate_per_minute": "60"},
    )
    assert started.status_code == 303, started.text
    listed = await dashboard.get(started.headers["location"])
    assert "started: 2 at 60/minute" in listed.text
    [task] = await service.redrives.search(ACROSS_TENANTS)
    assert (task.incident_id, task.to_move, task.state) == (incident, 2, "running")
    assert 'hx-trigger="every 2s"' in listed.text and '<progress max="2" value="0">' in listed.text

    clock.advance(1_000)
    await service.redrives.advance()
    paused = await post_form(dashboard, f"/ui/redrives/{task.id}/pause", {"csrf_token": token})
    assert paused.status_code == 303
    shown = await dashboard.get("/ui/redrives")
    assert f"Redrive {task.id}: paused." in shown.text and ">Resume</button>" in shown.text
    assert '<progress max="2" value="1">' in shown.text
    await post_form(dashboard, f"/ui/redrives/{task.id}/resume", {"csrf_token": token})
    cancelled = await post_form(dashboard, f"/ui/redrives/{task.id}/cancel", {"csrf_token": token})
    assert cancelled.status_code == 303
    assert (await service.redrives.get(ACROSS_TENANTS, task.id)).state == "cancelled"
    unknown = await post_form(dashboard, f"/ui/redrives/{task.id}/explode", {"csrf_token": token})
    assert unknown.status_code == 404
    bad = await post_form(dashboard, "/ui/redrives", {"csrf_token": token, "incident": "x"})
    assert bad.status_code == 400


async def test_the_page_shows_failed_dead_letters_and_why_a_task_failed(
    dashboard: httpx.AsyncClient, service: Service, store: Store, clock: ManualClock
) -> None:
    await kill(service, 5, "billing")  # n = 3 is the payload PICKY refuses
    refusing = await service.redrives.start(
        CALLER, RedriveRequest(DeadLetterFilter(queue="billing"))
    )
    await tick(restarted(store, clock, PICKY), clock, 60)
    await kill(service, 2, "later")
    stopped = await service.redrives.start(CALLER, RedriveRequest(DeadLetterFilter(queue="later")))
    await tick(restarted(store, clock, GAPPY), clock, 60)

    page = await dashboard.get("/ui/redrives")
    assert page.status_code == 200
    rows = {task_id: page.text.split(f'data-task-id="{task_id}"')[1].split("</tr>")[0]
            for task_id in (refusing.id, stopped.id)}  # fmt: skip
    assert '<td class="number" data-testid="failed" title=' in rows[refusing.id]
    assert ">1</td>" in rows[refusing.id] and "status-completed" in rows[refusing.id]
    assert '<progress max="5" value="5">' in rows[refusing.id]
    assert "status-failed" in rows[stopped.id]
    failure = (await service.redrives.get(CALLER, stopped.id)).failure
    assert failure is not None and failure.job_id is not None
    assert (
        f'missing_upcaster</span> at job <span class="mono">{failure.job_id}</span>'
        in (rows[stopped.id])
    )
    assert "no upcaster for billing.charge v1-&gt;v2" in rows[stopped.id]
