"""Unit tests for the retention floor's cut-offs and for which dead letters a legal hold covers
(the statements' `not_held` fragment decides the same, set-based: the behaviour tests check it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.domain.dead_letter import DeadLetter
from redrive.domain.job import Job
from redrive.domain.legal_hold import FILTER, INCIDENT, JOB, LegalHold, with_holds
from redrive.domain.retention import DAY_MS, RetentionPolicy

NOW = 1_772_359_200_000
JOB_ROW = Job(id="j1", tenant_id="acme", type="charge", queue="billing", args=[], state="discarded",
              created_at=NOW)  # fmt: skip
DEAD = DeadLetter(id="e1", job=JOB_ROW, reason="boom", discarded_at=NOW, error_type="Timeout",
                  incident_id="inc_" + "a" * 24)  # fmt: skip


def hold(scope: str, **target: str | None) -> LegalHold:
    return LegalHold(id="hold_1", tenant_id="acme", scope=scope, reason="case", created_at=NOW,
                     created_by="admin", **target)  # type: ignore[arg-type]  # fmt: skip


def test_the_floor_wins_over_a_shorter_max_age_when_deleting_but_not_when_archiving() -> None:
    deleting = RetentionPolicy(max_age_ms=30 * DAY_MS, min_age_ms=90 * DAY_MS)
    assert deleting.age_cutoff(NOW) == NOW - 90 * DAY_MS
    assert deleting.count_cutoff(NOW) == NOW - 90 * DAY_MS
    archiving = replace(deleting, pruning_policy="archive")
    assert archiving.age_cutoff(NOW) == NOW - 30 * DAY_MS
    assert archiving.count_cutoff(NOW) is None
    assert RetentionPolicy(min_age_ms=0).count_cutoff(NOW) == NOW
    assert RetentionPolicy().to_document()["min_age"] == "P90D"


@pytest.mark.parametrize(
    ("held", "covers"),
    [
        (hold(JOB, job_id="j1"), True),
        (hold(JOB, job_id="j2"), False),
        (hold(INCIDENT, incident_id="inc_" + "a" * 24), True),
        (hold(INCIDENT, incident_id="inc_" + "b" * 24), False),
        (hold(FILTER, queue="billing"), True),
        (hold(FILTER, queue="billing", error_type="Timeout", type="charge"), True),
        (hold(FILTER, queue="billing", error_type="Refused"), False),
        (hold(FILTER, type="refund"), False),
        (replace(hold(JOB, job_id="j1"), tenant_id="globex"), False),
        (replace(hold(JOB, job_id="j1"), released_at=NOW), False),
    ],
)
def test_a_hold_covers_exactly_its_target_in_its_tenant_while_active(
    held: LegalHold, covers: bool
) -> None:
    assert held.covers(DEAD) is covers
    [marked] = with_holds([held], [DEAD])
    assert marked.legal_holds == (("hold_1",) if covers else ())


def test_an_incident_hold_does_not_cover_a_dead_letter_without_an_incident() -> None:
    unfiled = replace(DEAD, incident_id=None)
    assert not hold(INCIDENT, incident_id="inc_" + "a" * 24).covers(unfiled)
