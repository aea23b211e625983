"""Incidents without a database: which state each change starts from and leads to, what a batch
of dead letters adds to each incident, and strict list queries with their cursors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from redrive.domain.dead_letter import RETRIED, DeadLetter, new_dead_letter
from redrive.domain.errors import Conflict, InvalidRequest
from redrive.domain.fingerprint import DEFAULT_FINGERPRINTER, Fingerprint
from redrive.domain.incident import (
    ACKNOWLEDGED,
    IGNORED,
    OPEN,
    REGRESSED,
    RESOLVED,
    STATES,
    TRANSITIONS,
    Incident,
    Sort,
    Transition,
    arrival,
    check_fix_reference,
    decide,
    encode_incident_cursor,
    entries_of,
    parse_incident_query,
)
from redrive.domain.job import Job

NOW = 1_790_000_000_000
INCIDENT = Incident(
    id="inc_" + "a" * 24, tenant_id="acme", type="charge.card", fingerprint="f" * 32,
    fingerprint_version=1, error_type="TimeoutError", message="timed out", state=OPEN,
    dead_count=2, total_count=3, first_seen_at=NOW - 10, last_seen_at=NOW - 5,
    queues=("billing",), sample_dead_letter_id="ep", state_changed_at=NOW - 10,
    state_changed_by="dead_letter:ep",
)  # fmt: skip
# (from state, transition) -> the state it leads to, or None where it is refused.
EXPECTED = {
    (OPEN, Transition.ACKNOWLEDGE): ACKNOWLEDGED,
    (OPEN, Transition.RESOLVE): RESOLVED,
    (OPEN, Transition.IGNORE): IGNORED,
    (OPEN, Transition.REOPEN): None,
    (ACKNOWLEDGED, Transition.ACKNOWLEDGE): None,
    (ACKNOWLEDGED, Transition.RESOLVE): RESOLVED,
    (ACKNOWLEDGED, Transition.IGNORE): IGNORED,
    (ACKNOWLEDGED, Transition.REOPEN): OPEN,
    (RESOLVED, Transition.ACKNOWLEDGE): None,
    (RESOLVED, Transition.RESOLVE): None,
    (RESOLVED, Transition.IGNORE): IGNORED,
    (RESOLVED, Transition.REOPEN): OPEN,
    (REGRESSED, Transition.ACKNOWLEDGE): ACKNOWLEDGED,
    (REGRESSED, Transition.RESOLVE): RESOLVED,
    (REGRESSED, Transition.IGNORE): IGNORED,
    (REGRESSED, Transition.REOPEN): None,
    (IGNORED, Transition.ACKNOWLEDGE): None,
    (IGNORED, Transition.RESOLVE): None,
    (IGNORED, Transition.IGNORE): None,
    (IGNORED, Transition.REOPEN): OPEN,
}


def test_the_table_names_every_state_and_transition() -> None:
    assert set(EXPECTED) == {(state, transition) for state in STATES for transition in Transition}
    assert set(TRANSITIONS) == set(Transition)


@pytest.mark.parametrize(("start", "transition"), sorted(EXPECTED))
def test_each_change_from_each_state(start: str, transition: Transition) -> None:
    incident = replace(INCIDENT, state=start, fix_reference="old fix")
    target = EXPECTED[(start, transition)]
    fix = "PR 1" if transition == Transition.RESOLVE else None
    if target is None:
        with pytest.raises(Conflict) as refused:
            decide(incident, transition, fix, NOW, "ops")
        assert refused.value.details["state"] == start
        return
    change = decide(incident, transition, fix, NOW, "ops")
    assert (change.expected_state, change.state) == (start, target)
    assert (change.changed_at, change.changed_by) == (NOW, "ops")
    assert change.fix_reference == ("PR 1" if transition == Transition.RESOLVE else "old fix")


def test_a_resolution_needs_a_fix_reference() -> None:
    with pytest.raises(InvalidRequest) as refused:
        decide(INCIDENT, Transition.RESOLVE, None, NOW, "ops")
    assert refused.value.details == {"field": "fix_reference"}


@pytest.mark.parametrize("value", [None, "", "   ", 5, "x" * 501, "tab\there"])
def test_a_fix_reference_is_printable_text(value: object) -> None:
    with pytest.raises(InvalidRequest):
        check_fix_reference(value)
    assert check_fix_reference("  PR #12 ") == "PR #12"


def dead(
    episode_id: str, at: int, queue: str = "billing", job_type: str = "charge.card"
) -> tuple[DeadLetter, Fingerprint]:
    job = Job(
        id=f"job-{episode_id}", tenant_id="acme", type=job_type, queue=queue, args=[],
        state="discarded", created_at=at, discarded_at=at,
        error={"type": "TimeoutError", "message": "timed out after 30s"},
    )  # fmt: skip
    fingerprint = DEFAULT_FINGERPRINTER.fingerprint(job)
    return new_dead_letter(episode_id, job, "max_attempts_exceeded", at, fingerprint), fingerprint


def test_a_batch_adds_one_entry_per_incident_in_id_order() -> None:
    found = [
        dead("e3", NOW + 3, "billing-slow"),
        dead("e1", NOW + 1),
        dead("e2", NOW + 2),
        dead("r1", NOW + 1, job_type="charge.refund"),
    ]
    moved = (replace(found[1][0], status=RETRIED), found[1][1])
    entries = entries_of([found[0], moved, found[2], found[3]])
    assert [entry.id for entry in entries] == sorted(entry.id for entry in entries)
    card = next(entry for entry in entries if entry.type == "charge.card")
    assert (card.dead_count, card.total_count) == (2, 3)
    assert (card.first_seen_at, card.last_seen_at) == (NOW + 1, NOW + 3)
    assert card.queues == ("billing", "billing-slow")
    assert (card.sample_dead_letter_id, card.arrival) == ("e3", arrival("e3"))
    assert card.message == "timed out after <duration>"
    assert card.id == found[0][0].incident_id
    refund = next(entry for entry in entries if entry.type == "charge.refund")
    assert (refund.dead_count, refund.total_count, refund.fingerprint) == (1, 1, card.fingerprint)
    assert entries_of([]) == []


def test_an_entry_knows_whether_its_upsert_opened_or_regressed_the_incident() -> None:
    [entry] = entries_of([dead("e9", NOW)])
    mine = replace(INCIDENT, state_changed_by=entry.arrival)
    assert entry.opened(mine) and not entry.regressed(mine)
    assert entry.regressed(replace(mine, state=REGRESSED))
    assert not entry.opened(INCIDENT) and not entry.regressed(replace(INCIDENT, state=REGRESSED))


def test_a_list_query_is_read_strictly() -> None:
    query = parse_incident_query(
        {"state": "open, regressed,open", "type": "charge.*", "queue": "billing",
         "error_type": "TimeoutError", "sort": "count", "limit": "20"}
    )  # fmt: skip
    assert query.states == (OPEN, REGRESSED)
    assert (query.type, query.type_prefix) == (None, "charge.")
    assert (query.queue, query.error_type, query.sort, query.limit) == (
        "billing", "TimeoutError", Sort.COUNT, 20,
    )  # fmt: skip
    assert parse_incident_query({"state": "", "type": "a.b"}).type == "a.b"
    assert parse_incident_query({}).sort == Sort.RECENT


def test_a_cursor_belongs_to_its_order() -> None:
    cursor = encode_incident_cursor(INCIDENT, Sort.COUNT)
    query = parse_incident_query({"sort": "count", "cursor": cursor})
    assert (query.cursor_value, query.cursor_id) == (INCIDENT.dead_count, INCIDENT.id)
    recent = parse_incident_query({"cursor": encode_incident_cursor(INCIDENT, Sort.RECENT)})
    assert recent.cursor_value == INCIDENT.last_seen_at
    with pytest.raises(InvalidRequest) as refused:
        parse_incident_query({"cursor": cursor})
    assert refused.value.details["field"] == "cursor"
