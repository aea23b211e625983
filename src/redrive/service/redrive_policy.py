"""The redrive policy (seed 003 §4.1, §5.1): which redrives need every incident they touch to be
explained by a root cause with a fix reference, and the one check every redrive path calls
(bulk retry by filter, a retry of a selection, an incident redrive, paced redrive tasks, and
single retries when REDRIVE_STRICT_REDRIVE is on). Poison pills are refused here too."""

from __future__ import annotations

from collections.abc import Sequence

from redrive.domain.dead_letter import DeadLetter
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.errors import InvalidRequest
from redrive.domain.root_cause import MAX_LISTED, Unexplained, refusal
from redrive.ports import IncidentStore


def refuse_unfiltered(filters: DeadLetterFilter) -> None:
    """A redrive with no filter at all is refused, whatever `confirm` says (RULE-040-040)."""
    if filters.is_empty:
        raise InvalidRequest(
            "a redrive needs a filter (queue, type, error_type, incident, ...): a redrive of the "
            "whole dead-letter queue is refused, confirmed or not",
            {"field": "filter"},
        )


async def require_root_causes(
    transaction: IncidentStore,
    filters: DeadLetterFilter | None = None,
    dead_letters: Sequence[DeadLetter] = (),
    tenant_id: str | None = None,
) -> None:
    """Refuse (409 `root_cause_required`, or `poison_pill`) a redrive of the dead letters
    matching `filters` (scoped to the caller's tenant already) or of `dead_letters` when an
    incident they belong to lacks a root cause with a fix reference or is a poison pill; dead
    letters in no incident count as lacking. `details.incidents` names them (id, message,
    class). One set-based query whatever the number of dead letters."""
    found: list[Unexplained] = []
    if filters is not None:
        found += await transaction.unexplained_incidents(filters, MAX_LISTED + 1)
    if dead_letters:
        ids = sorted({dead.incident_id for dead in dead_letters if dead.incident_id})
        found += await transaction.unexplained_among(ids, tenant_id)
        if any(dead.incident_id is None for dead in dead_letters):
            found.append(Unexplained(None, None, None))
    error = refusal(found)
    if error is not None:
        raise error
