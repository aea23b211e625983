"""The dashboard on retention and legal holds: the overview warns before a prune removes dead
letters younger than a week and says what the floor holds; lists and details show holds."""

from __future__ import annotations

import httpx
import pytest

from tests.behaviour.test_dead_letter_retention import kill_labelled, put_policy
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio


async def page(dashboard: httpx.AsyncClient, path: str) -> str:
    response = await dashboard.get(path)
    assert response.status_code == 200, response.text
    return response.text


async def test_the_overview_warns_before_a_prune_removes_dead_letters_younger_than_a_week(
    dashboard: httpx.AsyncClient, clock: ManualClock
) -> None:
    for label in ("a", "b", "c"):
        await kill_labelled(dashboard, clock, "mail", label)
    assert "young-prune-warning" not in await page(dashboard, "/ui")
    await put_policy(dashboard, {"max_count": 1})  # the floor (P90D) keeps the two extra
    assert "young-prune-warning" not in await page(dashboard, "/ui")
    assert "The floor and legal holds keep 2 dead letters" in await page(dashboard, "/ui/retention")

    await put_policy(dashboard, {"min_age": "PT1S"})
    assert "The next prune will remove 2 dead letters younger than a week." in await page(
        dashboard, "/ui"
    )
    assert "floor-holding" not in await page(dashboard, "/ui/retention")


async def test_held_dead_letters_carry_a_badge_and_their_holds_and_no_delete_button(
    dashboard: httpx.AsyncClient, clock: ManualClock
) -> None:
    held = await kill_labelled(dashboard, clock, "mail", "held")
    free = await kill_labelled(dashboard, clock, "mail", "free")
    response = await dashboard.post(
        "/ojs/v1/admin/legal-holds", json={"job_id": held, "reason": "case 9"}
    )
    assert response.status_code == 201, response.text
    hold_id = response.json()["legal_hold"]["id"]
    listing = await page(dashboard, "/ui/dead-letters")
    rows = {row.split('"')[0]: row for row in listing.split('data-job-id="')[1:]}
    assert 'data-testid="held"' in rows[held]
    assert 'data-testid="held"' not in rows[free]
    detail = await page(dashboard, f"/ui/dead-letters/{held}")
    assert f"Under legal hold {hold_id}" in detail
    assert f"/dead-letters/{held}/delete" not in detail
    assert f"/dead-letters/{free}/delete" in await page(dashboard, f"/ui/dead-letters/{free}")
