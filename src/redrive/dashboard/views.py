"""Service results turned into template context: overview, list, detail, retry preview."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from redrive.dashboard.filters import ListFilter
from redrive.domain.caller import Caller
from redrive.domain.cursor import decode_cursor, encode_cursor
from redrive.domain.dead_letter import DEAD, DeadLetter, RetryOverride, apply_override
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.durations import format_timestamp
from redrive.domain.errors import NotFound
from redrive.domain.job import STATES, Job
from redrive.ports import Page
from redrive.service.facade import Service

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
TOP_ERROR_TYPES = 8
MESSAGE_SNIPPET = 120


def pretty_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def error_message(dead: DeadLetter) -> str:
    error = dead.job.error or (dead.job.errors[-1] if dead.job.errors else {})
    message = str(error.get("message") or dead.reason or "")
    return message if len(message) <= MESSAGE_SNIPPET else message[: MESSAGE_SNIPPET - 1] + "…"


def row(dead: DeadLetter) -> dict[str, Any]:
    return {
        "episode_id": dead.id,
        "job_id": dead.job_id,
        "queue": dead.job.queue,
        "type": dead.job.type,
        "error_type": dead.error_type or "unknown",
        "message": error_message(dead),
        "attempts": len(dead.job.errors) or dead.job.attempt,
        "max_attempts": dead.job.max_attempts,
        "discarded_at": dead.discarded_at,
        "status": dead.status,
        "moved_by": dead.moved_by,
        "legal_holds": dead.legal_holds,
    }


async def count_between(service: Service, caller: Caller, since: int, until: int | None) -> int:
    raw: dict[str, Any] = {"since": format_timestamp(since)}
    if until is not None:
        raw["until"] = format_timestamp(until)
    filters = parse_filter(raw, service.now())
    _, total = await service.dead_letters.search(caller, filters, Page(limit=1))
    return total


async def trend(service: Service, caller: Caller, now: int) -> dict[str, Any]:
    """Still-dead letters by when they died; the last 24 hours against the 24 before."""
    last_hour = await count_between(service, caller, now - HOUR_MS, None)
    last_day = await count_between(service, caller, now - DAY_MS, None)
    day_before = await count_between(service, caller, now - 2 * DAY_MS, now - DAY_MS - 1)
    last_week = await count_between(service, caller, now - 7 * DAY_MS, None)
    if last_day > day_before:
        direction = "rising"
    elif last_day < day_before:
        direction = "falling"
    else:
        direction = "steady"
    return {
        "last_hour": last_hour,
        "last_day": last_day,
        "day_before": day_before,
        "last_week": last_week,
        "direction": direction,
    }


async def oldest(service: Service, caller: Caller, oldest_at: int | None) -> DeadLetter | None:
    if oldest_at is None:
        return None
    filters = parse_filter({"until": format_timestamp(oldest_at)}, service.now())
    items, _ = await service.dead_letters.search(caller, filters, Page(limit=1))
    return items[0] if items else None


async def overview(service: Service, caller: Caller) -> dict[str, Any]:
    now = service.now()
    stats = await service.dead_letters.stats(caller)
    queues = await service.queues.overview(caller)
    by_error = sorted(stats.by_error_type.items(), key=lambda item: (-item[1], item[0]))
    return {
        "now": now,
        "states": STATES,
        "queues": queues,
        "dead_total": stats.total,
        "dead_by_queue": stats.by_queue,
        "top_errors": by_error[:TOP_ERROR_TYPES],
        "trend": await trend(service, caller, now),
        "oldest": await oldest(service, caller, stats.oldest_at),
        "oldest_at": stats.oldest_at,
        "next_prune_at": service.retention.next_prune_at(),
        "young_at_next_prune": await service.retention.young_at_next_prune(caller),
    }


async def dead_letter_list(
    service: Service, caller: Caller, list_filter: ListFilter, limit: int, cursor: str | None
) -> dict[str, Any]:
    now = service.now()
    filters = parse_filter(list_filter.service_raw(now), now)
    page = Page(limit=limit + 1)  # one more than shown: is there an older page?
    if cursor:
        moment, episode_id = decode_cursor(cursor)
        page = Page(limit=limit + 1, cursor_at=moment, cursor_id=episode_id)
    found, total = await service.dead_letters.search(caller, filters, page)
    items = found[:limit]
    last = items[-1] if items else None
    next_cursor = encode_cursor(last.discarded_at, last.id) if last and len(found) > limit else None
    stats = await service.dead_letters.stats(caller)
    return {
        "now": now,
        "filter": list_filter,
        "rows": [row(dead) for dead in items],
        "total": total,
        "dead_total": stats.total,
        "queues": sorted(stats.by_queue),
        "error_types": sorted(stats.by_error_type),
        "limit": limit,
        "cursor": cursor or "",
        "next_cursor": next_cursor,
        "actionable": list_filter.status == DEAD,
    }


@dataclass
class Detail:
    episode: DeadLetter
    history: list[DeadLetter]
    current: Job | None


async def detail(service: Service, caller: Caller, job_id: str, where: dict[str, str]) -> Detail:
    """The episode the link names (else the dead one, else the latest), every episode of the job,
    and the job as it is now when it is no longer dead."""
    history = await service.dead_letters.episodes(caller, job_id)
    named = [dead for dead in history if dead.id == where.get("episode")]
    dead_now = [dead for dead in history if dead.status == DEAD]
    episode = (named or dead_now or history)[-1]
    current: Job | None = None
    if not dead_now:
        try:
            current = await service.jobs.get(caller, job_id)
        except NotFound:
            current = None
    return Detail(episode, history, current)


CHANGEABLE = ("queue", "priority", "args", "meta", "retry")


def job_values(job: Job) -> dict[str, Any]:
    return {
        "queue": job.queue,
        "priority": job.priority,
        "args": job.args,
        "meta": job.meta,
        "retry": job.retry.to_document(),
    }


def retry_changes(job: Job, override: RetryOverride) -> list[dict[str, Any]]:
    """Field by field: what the job has now and what it will have when retried."""
    before = job_values(job)
    after = job_values(apply_override(job, override))
    return [
        {"field": name, "before": before[name], "after": after[name],
         "changed": before[name] != after[name]}
        for name in CHANGEABLE
    ]  # fmt: skip
