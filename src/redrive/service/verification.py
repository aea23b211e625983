"""Post-redrive verification: when jobs a redrive task requeued end (succeed, or die again), count
them on their task in the same transaction, regress the incident of those that died again the
same way, and (if set) resolve the incident of a task whose every redriven job succeeded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from redrive.domain.events import Event, incident_event
from redrive.ports import AttemptWrites
from redrive.service.runtime import Runtime

if TYPE_CHECKING:  # the redrive module is imported when a redriven job ends: most never do
    from redrive.domain.redrive import RedriveOutcome


async def verify(
    runtime: Runtime, transaction: AttemptWrites, outcomes: list[RedriveOutcome], now: int
) -> None:
    """Set-based: one statement for the items, one for the tasks' counts; incidents are read
    only for the few outcomes that change one. Nothing at all for jobs no task redrove."""
    if not outcomes:
        return
    from redrive.domain.redrive import closure, regression

    items, tasks = await transaction.record_redrive_outcomes(outcomes)
    for item in items:
        counter = (
            runtime.metrics.redrive_succeeded
            if item.state == "succeeded"
            else runtime.metrics.redrive_dead_again
        )
        counter[item.task_id] += 1
    events: list[Event] = []
    regressed = {item.incident_id for item in items if item.regresses and item.incident_id}
    for incident_id in sorted(regressed):
        incident = await transaction.get_incident(incident_id, None)
        change = None if incident is None else regression(incident, now, "redrive verification")
        changed = change and await transaction.change_incident_state(change, None)
        if changed:
            events.append(incident_event("incident.regressed", changed))
    if runtime.options.redrive_auto_close:
        for task in tasks:
            if task.incident_id is None:
                continue
            incident = await transaction.get_incident(task.incident_id, None)
            change = None if incident is None else closure(task, incident, now)
            changed = change and await transaction.change_incident_state(change, None)
            if changed:
                events.append(incident_event("incident.resolved", changed))
    await runtime.emit(transaction, events, now)
