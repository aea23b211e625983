"""Incidents: dead letters grouped by (tenant, job type, fingerprint). Their states and the
changes operators make to them, what a batch of new dead letters adds to each, and list queries.

An incident's id is derived from its key, so a dead letter names its incident before the
incident's row is written (no lookup on the way into the dead-letter queue). Its counts live on
its row: `dead_count` (dead now) and `total_count` (every episode ever), kept in step in the
transactions that move dead letters in and out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from redrive.domain.cursor import decode_cursor, encode_cursor
from redrive.domain.dead_letter import DEAD, DeadLetter
from redrive.domain.errors import Conflict, InvalidRequest
from redrive.domain.fingerprint import Fingerprint
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.root_cause import UNCLASSIFIED, ClassificationRule, classify

# The trend windows are parsed by the list query that asks for them: a bulk retry, which reads
# and explains incidents but lists none, loads no trend module (1.4 ms of CPU).
if TYPE_CHECKING:
    from redrive.domain.trend import Window

OPEN = "open"
ACKNOWLEDGED = "acknowledged"
RESOLVED = "resolved"
REGRESSED = "regressed"
IGNORED = "ignored"
STATES = (OPEN, ACKNOWLEDGED, RESOLVED, REGRESSED, IGNORED)
ID_PATTERN = re.compile(r"inc_[0-9a-f]{24}")  # what fingerprint.incident_id makes
MAX_FIX_REFERENCE = 500


class Transition(StrEnum):
    """What an operator may do to an incident (a regression is the server's, on arrival)."""

    ACKNOWLEDGE = "acknowledge"
    RESOLVE = "resolve"
    IGNORE = "ignore"
    REOPEN = "reopen"


# Each transition: the states it starts from, and the state it leads to.
TRANSITIONS: dict[Transition, tuple[frozenset[str], str]] = {
    Transition.ACKNOWLEDGE: (frozenset({OPEN, REGRESSED}), ACKNOWLEDGED),
    Transition.RESOLVE: (frozenset({OPEN, ACKNOWLEDGED, REGRESSED}), RESOLVED),
    Transition.IGNORE: (frozenset({OPEN, ACKNOWLEDGED, REGRESSED, RESOLVED}), IGNORED),
    Transition.REOPEN: (frozenset({ACKNOWLEDGED, RESOLVED, IGNORED}), OPEN),
}


def arrival(episode_id: str) -> str:
    """Who changes an incident's state when a dead letter arrives (opens or regresses it)."""
    return f"dead_letter:{episode_id}"


@frozen_dataclass
class Incident:
    """One group of dead letters: its key, what its errors read, its counts and its state (who
    last changed it, when, and the fix reference of a resolution)."""

    id: str
    tenant_id: str
    type: str
    fingerprint: str
    fingerprint_version: int
    error_type: str | None
    message: str
    state: str
    dead_count: int
    total_count: int
    first_seen_at: int
    last_seen_at: int
    queues: tuple[str, ...]
    sample_dead_letter_id: str | None
    state_changed_at: int
    state_changed_by: str
    fix_reference: str | None = None
    classification: str = UNCLASSIFIED
    classified_by: str | None = None  # None: the classification rules, when it opened


@frozen_dataclass
class IncidentEntry:
    """What a batch of dead letters adds to one incident (created with it when it is new):
    counts, the times they died, their queues, the newest as the sample, and `arrival`, the
    state changer that marks a change this batch made (an opening or a regression)."""

    id: str
    tenant_id: str
    type: str
    fingerprint: str
    fingerprint_version: int
    error_type: str | None
    message: str
    dead_count: int
    total_count: int
    first_seen_at: int
    last_seen_at: int
    queues: tuple[str, ...]
    sample_dead_letter_id: str
    arrival: str
    classification: str = UNCLASSIFIED  # what the rules say; kept if the incident exists

    def opened(self, incident: Incident) -> bool:
        """Whether the upsert of this entry created the incident."""
        return incident.state == OPEN and incident.state_changed_by == self.arrival

    def regressed(self, incident: Incident) -> bool:
        """Whether this entry reopened a resolved incident."""
        return incident.state == REGRESSED and incident.state_changed_by == self.arrival


def entries_of(
    found: Iterable[tuple[DeadLetter, Fingerprint]],
    rules: Sequence[ClassificationRule] = (),
) -> list[IncidentEntry]:
    """One entry per incident the dead letters belong to, in id order (so that concurrent
    writers lock incidents in one order), classified by `rules` (then the built-in ones; a new
    incident takes the class, an existing one keeps its own); only episodes still `dead` count
    as dead now."""
    groups: dict[str, list[tuple[DeadLetter, Fingerprint]]] = {}
    for dead, fingerprint in found:
        if dead.incident_id is not None:
            groups.setdefault(dead.incident_id, []).append((dead, fingerprint))
    entries = []
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda pair: (pair[0].discarded_at, pair[0].id))
        first, newest = members[0], members[-1][0]
        entries.append(
            IncidentEntry(
                id=key,
                tenant_id=newest.job.tenant_id,
                type=newest.job.type,
                fingerprint=first[1].value,
                fingerprint_version=first[1].version,
                error_type=first[1].error_type,
                message=first[1].message,
                dead_count=sum(1 for dead, _ in members if dead.status == DEAD),
                total_count=len(members),
                first_seen_at=first[0].discarded_at,
                last_seen_at=newest.discarded_at,
                queues=tuple(sorted({dead.job.queue for dead, _ in members})),
                sample_dead_letter_id=newest.id,
                arrival=arrival(newest.id),
                classification=classify(
                    rules, newest.job.type, first[1].error_type, first[1].message
                ),
            )
        )
    return entries


@frozen_dataclass
class StateChange:
    """An operator's change of one incident's state, guarded by the state it was decided from."""

    incident_id: str
    transition: Transition
    expected_state: str
    state: str
    fix_reference: str | None
    changed_at: int
    changed_by: str


def decide(
    incident: Incident, transition: Transition, fix_reference: str | None, now: int, actor: str
) -> StateChange:
    """The change `transition` makes, or a conflict when the incident's state forbids it. A
    resolution needs a fix reference; any other change keeps the one the incident has."""
    sources, target = TRANSITIONS[transition]
    if incident.state not in sources:
        allowed = sorted(sources)
        raise Conflict(
            f"cannot {transition.value} incident {incident.id} in state {incident.state} "
            f"(only from {', '.join(allowed)})",
            {"incident_id": incident.id, "state": incident.state, "allowed": allowed},
        )
    if transition == Transition.RESOLVE and not fix_reference:
        raise InvalidRequest("a resolution needs a fix reference", {"field": "fix_reference"})
    kept = fix_reference if transition == Transition.RESOLVE else incident.fix_reference
    return StateChange(incident.id, transition, incident.state, target, kept, now, actor)


def check_fix_reference(value: object) -> str:
    """What a resolution names as its fix (a PR, a commit, a deployment), trimmed."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(
            "fix_reference must be a non-empty string (a PR, a commit, a deployment)",
            {"field": "fix_reference"},
        )
    if len(value) > MAX_FIX_REFERENCE or not value.isprintable():
        raise InvalidRequest(
            f"fix_reference must be at most {MAX_FIX_REFERENCE} printable characters",
            {"field": "fix_reference"},
        )
    return value.strip()


def check_id(text: str) -> str:
    if ID_PATTERN.fullmatch(text) is None:
        raise InvalidRequest("incident must be an incident id (inc_ and 24 hex digits)",
                             {"field": "incident"})  # fmt: skip
    return text


# ---- list queries ---------------------------------------------------------------------------


class Sort(StrEnum):
    RECENT = "recent"  # the newest dead letter first
    COUNT = "count"  # the most dead now first


QUERY_KEYS = ("state", "type", "queue", "error_type", "sort", "trend")
PAGING_KEYS = ("limit", "cursor")
DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_TEXT = 255


@frozen_dataclass
class IncidentQuery:
    """Which incidents to list and in which order: `states` (any of them; None is every
    state), a job type (ending in * for a prefix), a queue among those affected, an error type.
    Keyset pages: the cursor is the sort value and id of the last incident of the page before.
    `trend`: the window of the arrivals to show with each incident (None: none asked for)."""

    tenant_id: str | None = None
    states: tuple[str, ...] | None = None
    type: str | None = None
    type_prefix: str | None = None
    queue: str | None = None
    error_type: str | None = None
    sort: Sort = Sort.RECENT
    limit: int = DEFAULT_PAGE
    cursor_value: int | None = None
    cursor_id: str | None = None
    trend: Window | None = None


def sort_value(incident: Incident, sort: Sort) -> int:
    return incident.dead_count if sort == Sort.COUNT else incident.last_seen_at


def encode_incident_cursor(incident: Incident, sort: Sort) -> str:
    return encode_cursor(sort_value(incident, sort), f"{sort.value}:{incident.id}")


def _cursor(text: str, sort: Sort) -> tuple[int, str]:
    value, rest = decode_cursor(text)
    named, _, found = rest.partition(":")
    if named != sort.value or ID_PATTERN.fullmatch(found) is None:
        raise InvalidRequest(
            "cursor is not one this server issued for this sort", {"field": "cursor"}
        )
    return value, found


def _text(text: str, name: str) -> str:
    if len(text) > MAX_TEXT or not text.isprintable():
        raise InvalidRequest(
            f"{name} must be at most {MAX_TEXT} printable characters", {"field": name}
        )
    return text


def _states(text: str) -> tuple[str, ...]:
    states = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    wrong = [state for state in states if state not in STATES]
    if wrong or not states:
        raise InvalidRequest(
            f"state must be one or more (comma-separated) of {', '.join(STATES)}",
            {"field": "state", "allowed": list(STATES)},
        )
    return states


def _limit(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_PAGE:
        raise InvalidRequest(f"limit must be from 1 to {MAX_PAGE}", {"field": "limit"})
    return int(text)


def parse_incident_query(values: Mapping[str, str]) -> IncidentQuery:
    """A list request's query string (one value per key) as a query; unknown keys and bad
    values are refused, naming them. Empty values mean "any"."""
    unknown = sorted(set(values) - {*QUERY_KEYS, *PAGING_KEYS})
    if unknown:
        allowed = [*QUERY_KEYS, *PAGING_KEYS]
        raise InvalidRequest(
            f"unknown query parameter {unknown[0]!r}; the parameters are {', '.join(allowed)}",
            {"field": unknown[0], "allowed": allowed},
        )
    given = {key: value for key, value in values.items() if value != ""}
    try:
        sort = Sort(given.get("sort", Sort.RECENT.value))
    except ValueError as error:
        raise InvalidRequest(
            "sort must be recent or count", {"field": "sort", "allowed": [s.value for s in Sort]}
        ) from error
    job_type = _text(given["type"], "type") if "type" in given else None
    prefix = job_type[:-1] if job_type is not None and job_type.endswith("*") else None
    cursor = _cursor(given["cursor"], sort) if "cursor" in given else (None, None)
    from redrive.domain.trend import parse_window

    return IncidentQuery(
        states=_states(given["state"]) if "state" in given else None,
        type=None if prefix is not None else job_type,
        type_prefix=prefix,
        queue=_text(given["queue"], "queue") if "queue" in given else None,
        error_type=_text(given["error_type"], "error_type") if "error_type" in given else None,
        sort=sort,
        limit=_limit(given["limit"]) if "limit" in given else DEFAULT_PAGE,
        cursor_value=cursor[0],
        cursor_id=cursor[1],
        trend=parse_window(given.get("trend")),
    )
