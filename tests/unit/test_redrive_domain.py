"""The pure parts of redrive tasks: pacing (no burst at the start, at most a minute's credit),
who may set which rate, the state changes, and verification's decisions on incidents."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.domain import redrive
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import Conflict, Forbidden, InvalidRequest
from redrive.domain.incident import ACKNOWLEDGED, IGNORED, OPEN, REGRESSED, RESOLVED, Incident
from redrive.domain.redrive import ItemOutcome, RedriveRequest, RedriveTask

NOW = 1_790_000_000_000
TASK = RedriveTask(
    id="rdt_1", tenant_id="t", state=redrive.RUNNING, filter={"queue": "q"}, incident_id="inc_1",
    rate_per_minute=100, critical=False, reason=None, created_by="o", created_at=NOW,
    updated_at=NOW, updated_by="o", finished_at=None, paced_until=NOW, to_move=200, moved=0,
    skipped=0, succeeded=0, dead_again=0, queues=("q",),
)  # fmt: skip
INCIDENT = Incident(
    id="inc_1", tenant_id="t", type="a.b", fingerprint="f" * 32, fingerprint_version=1,
    error_type="E", message="m", state=OPEN, dead_count=0, total_count=3, first_seen_at=NOW,
    last_seen_at=NOW, queues=("q",), sample_dead_letter_id=None, state_changed_at=NOW,
    state_changed_by="x",
)  # fmt: skip
OPERATOR = Caller.for_tenant("t", "o", Role.OPERATOR)
ADMIN = Caller.for_tenant("t", "a", Role.ADMIN)


def test_pacing_spends_the_rate_evenly_from_the_start() -> None:
    assert redrive.due(TASK, NOW) == (0, NOW)
    assert redrive.due(TASK, NOW + 599) == (0, NOW)
    count, paced = redrive.due(TASK, NOW + 1_000)
    assert (count, paced) == (1, NOW + 600)
    assert redrive.due(replace(TASK, paced_until=paced), NOW + 1_200) == (1, NOW + 1_200)
    assert redrive.due(TASK, NOW + 60_000) == (100, NOW + 60_000)


def test_the_pace_after_part_of_what_is_due_costs_each_its_share_of_the_rate() -> None:
    assert redrive.paced_after(TASK, NOW + 60_000, 0) == NOW
    assert redrive.paced_after(TASK, NOW + 60_000, 30) == NOW + 18_000
    assert redrive.paced_after(TASK, NOW + 60_000, 100) == redrive.due(TASK, NOW + 60_000)[1]
    later = NOW + 10 * 60_000  # at most a minute of credit: the pace starts a minute back
    assert redrive.paced_after(TASK, later, 1) == later - 60_000 + 600


def test_unspent_credit_is_kept_for_at_most_a_minute() -> None:
    after_downtime = NOW + 10 * 60_000
    count, paced = redrive.due(TASK, after_downtime)
    assert (count, paced) == (100, after_downtime)
    assert redrive.due(replace(TASK, moved=150, skipped=45), after_downtime)[0] == 5
    assert redrive.due(replace(TASK, state=redrive.PAUSED), after_downtime)[0] == 0


def test_rates_above_the_default_are_critical_admins_with_a_reason() -> None:
    request = RedriveRequest(DeadLetterFilter(queue="q"))
    assert redrive.check_rate(request, OPERATOR, 1000) == 100
    critical = replace(request, rate_per_minute=1000, critical=True, reason="outage")
    assert redrive.check_rate(critical, ADMIN, 1000) == 1000
    with pytest.raises(Forbidden):
        redrive.check_rate(critical, OPERATOR, 1000)
    with pytest.raises(InvalidRequest):
        redrive.check_rate(replace(critical, reason=None), ADMIN, 1000)
    with pytest.raises(InvalidRequest):
        redrive.check_rate(replace(critical, critical=False), ADMIN, 1000)
    with pytest.raises(InvalidRequest):
        redrive.check_rate(critical, ADMIN, 500)


def test_state_changes_start_from_their_states() -> None:
    assert redrive.change(TASK, redrive.Change.PAUSE) == redrive.PAUSED
    assert redrive.change(replace(TASK, state=redrive.PAUSED), redrive.Change.CANCEL) == (
        redrive.CANCELLED
    )
    for state in (redrive.COMPLETED, redrive.CANCELLED):
        with pytest.raises(Conflict):
            redrive.change(replace(TASK, state=state), redrive.Change.RESUME)


def test_verification_regresses_and_closes_incidents() -> None:
    assert ItemOutcome("rdt_1", redrive.DEAD_AGAIN, "inc_1", "inc_1").regresses
    assert not ItemOutcome("rdt_1", redrive.DEAD_AGAIN, "inc_1", "inc_2").regresses
    assert not ItemOutcome("rdt_1", redrive.SUCCEEDED, "inc_1", None).regresses
    change = redrive.regression(replace(INCIDENT, state=ACKNOWLEDGED), NOW, "v")
    assert change is not None and change.state == REGRESSED
    assert redrive.regression(replace(INCIDENT, state=IGNORED), NOW, "v") is None
    done = replace(TASK, state=redrive.COMPLETED, moved=3, succeeded=3, to_move=3)
    closed = redrive.closure(done, INCIDENT, NOW)
    assert closed is not None and closed.state == RESOLVED and "rdt_1" in str(closed.fix_reference)
    assert redrive.closure(replace(done, succeeded=2, dead_again=1), INCIDENT, NOW) is None
    assert redrive.closure(replace(done, state=redrive.RUNNING), INCIDENT, NOW) is None
    assert done.success_rate == 1.0 and TASK.success_rate is None
