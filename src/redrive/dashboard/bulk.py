"""Bulk retry, delete and purge from the dashboard: a dry-run count and sample first, then exactly
that set, either the rows the operator selected or everything a (time-pinned) filter matches."""

from __future__ import annotations

from typing import Any

from redrive.dashboard.filters import ListFilter
from redrive.dashboard.views import row
from redrive.domain.caller import Caller
from redrive.domain.dead_letter import DEAD, DeadLetter
from redrive.domain.dead_letter_filter import DeadLetterFilter, parse_filter
from redrive.domain.errors import InvalidRequest, NotFound
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.redrive import RedriveTask
from redrive.service.dead_letters import SAMPLE_SIZE, BulkRequest
from redrive.service.facade import Service

MAX_SELECTED = 500
ACTIONS = {
    "retry-selection": ("retry", "selection"),
    "delete-selection": ("delete", "selection"),
    "retry-filter": ("retry", "filter"),
    "purge-filter": ("delete", "filter"),
}


@frozen_dataclass
class BulkPlan:
    action: str  # retry or delete
    scope: str  # selection or filter
    ids: list[str]
    list_filter: ListFilter

    @property
    def do(self) -> str:
        return next(key for key, value in ACTIONS.items() if value == (self.action, self.scope))

    @classmethod
    def from_values(cls, do: str, ids: list[str], list_filter: ListFilter) -> BulkPlan:
        if do not in ACTIONS:
            raise InvalidRequest("choose an action: retry or delete, selection or filter", {})
        action, scope = ACTIONS[do]
        unique = list(dict.fromkeys(item.strip() for item in ids if item.strip()))
        if scope == "filter":
            unique = []  # rows ticked before choosing "all matching" are part of the filter anyway
        if scope == "selection" and not unique:
            raise InvalidRequest(
                "no rows were selected: tick the rows to act on, or use the buttons that act on "
                "everything matching the filter",
                {},
            )
        if len(unique) > MAX_SELECTED:
            raise InvalidRequest(f"select at most {MAX_SELECTED} rows at once", {})
        if list_filter.status != DEAD:
            raise InvalidRequest("only dead letters with status dead can be retried or deleted", {})
        return cls(action, scope, unique, list_filter)


async def _selected(service: Service, caller: Caller, ids: list[str]) -> list[DeadLetter]:
    """The selected jobs that still have a dead episode, in the order selected."""
    found: list[DeadLetter] = []
    for job_id in ids:
        try:
            dead, _ = await service.dead_letters.get(caller, job_id)
        except NotFound:
            continue
        found.append(dead)
    return found


def _filters(service: Service, list_filter: ListFilter) -> DeadLetterFilter:
    now = service.now()
    return parse_filter(list_filter.service_raw(now), now)


async def preview(service: Service, caller: Caller, plan: BulkPlan, pin: bool) -> dict[str, Any]:
    """What the confirmation page shows: the exact count, a sample, and the filter in words."""
    pinned = pin and plan.scope == "filter"
    list_filter = plan.list_filter.pinned(service.now()) if pinned else plan.list_filter
    if plan.scope == "selection":
        selected = await _selected(service, caller, plan.ids)
        count = len(selected)
        sample = [row(dead) for dead in selected[:SAMPLE_SIZE]]
        queues = sorted({dead.job.queue for dead in selected})
        gone = len(plan.ids) - count
    else:
        found = await service.dead_letters.preview(caller, _filters(service, list_filter))
        count, sample, gone = found.matched, [row(dead) for dead in found.sample], 0
        queues = sorted(found.by_queue)
    return {
        "page": "dead-letters",
        "title": "Confirm " + ("retry" if plan.action == "retry" else "delete"),
        "plan": plan,
        "filter": list_filter,
        "count": count,
        "sample": sample,
        "queues": queues,
        "gone": gone,
        "now": service.now(),
    }


def _plural(count: int) -> str:
    return f"{count} dead letter" + ("" if count == 1 else "s")


async def _execute_selection(service: Service, caller: Caller, plan: BulkPlan) -> str:
    """The selected rows, in one transaction: each moves once, whoever else acts at once."""
    if plan.action == "retry":
        result = await service.dead_letters.retry_selected(caller, plan.ids)
    else:
        result = await service.dead_letters.delete_selected(caller, plan.ids)
    return _summary(plan.action, len(result.moved), len(result.missing), result.queues)


def _paced_summary(task: RedriveTask) -> str:
    return (
        f"More than a burst: redrive {task.id} started, {_plural(task.to_move)} at "
        f"{task.rate_per_minute}/minute."
    )


def _summary(action: str, done: int, missing: int, queues: list[str]) -> str:
    if action == "retry":
        where = f" to queue {queues[0]}" if len(queues) == 1 else ""
        if len(queues) > 1:
            where = " to queues " + ", ".join(queues)
        text = f"Retried {_plural(done)}{where}."
    else:
        text = f"Deleted {_plural(done)}."
    if missing:
        text += f" {missing} had already left the dead-letter queue (moved by someone else)."
    return text


async def execute(
    service: Service, caller: Caller, plan: BulkPlan, expected: int
) -> tuple[str | None, bool]:
    """Do it, if the set is still the one confirmed. Returns (flash message, paced); the
    message is None when the count changed and the operator must look again; paced when a
    retry larger than a burst became a redrive task."""
    if plan.scope == "selection":
        return await _execute_selection(service, caller, plan), False
    filters = _filters(service, plan.list_filter)
    check = await service.dead_letters.preview(caller, filters)
    if check.matched != expected:
        return None, False
    # Never more than the operator confirmed.
    request = BulkRequest(filters, confirm=True, limit=expected)
    if plan.action == "retry":
        outcome = await service.redrives.bulk_retry(caller, request)
        if isinstance(outcome, RedriveTask):
            return _paced_summary(outcome), True
        result = outcome
    else:
        result = await service.dead_letters.purge(caller, request)
    missing = expected - result.succeeded  # moved by someone else since the check
    return _summary(plan.action, result.succeeded, missing, result.queues), False
