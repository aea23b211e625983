"""Queue and server overview use-cases: list queues, per-state counts, pause, resume, stats."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from redrive.domain.audit import Action
from redrive.domain.caller import Caller
from redrive.domain.envelope import check_client_queue, validate_queue_name
from redrive.domain.events import Event
from redrive.domain.frozen import frozen_dataclass
from redrive.domain.job import STATES
from redrive.domain.records import QueueRecord
from redrive.service.audit import AuditService
from redrive.service.runtime import Runtime

MINUTE_MS = 60_000


def empty_counts() -> dict[str, int]:
    return dict.fromkeys(STATES, 0)


@frozen_dataclass
class QueueSummary:
    """A queue as its caller sees it: whether it is paused, since when it is known, and its jobs
    per state. For a caller spanning every tenant, a name covers every tenant's queue of that
    name: paused when any of them is (fetches across tenants skip it then), known since the
    first."""

    name: str
    paused: bool
    created_at: int | None
    counts: dict[str, int]


def _merged(records: list[QueueRecord]) -> dict[str, tuple[bool, int]]:
    """Per name: paused when any tenant's queue of that name is, and the earliest created_at."""
    merged: dict[str, tuple[bool, int]] = {}
    for record in records:
        paused, created_at = merged.get(record.name, (False, record.created_at))
        merged[record.name] = (paused or record.paused, min(created_at, record.created_at))
    return merged


class QueueService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.audit = AuditService(runtime)

    async def overview(self, caller: Caller) -> list[QueueSummary]:
        """Every queue of the caller's tenant (of every tenant for a caller spanning them) with
        its per-state counts and paused flag, sorted by name."""
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction(caller) as transaction:
            queues = await transaction.list_queues(tenant)
            counts = await transaction.count_jobs(tenant, None)
        per_queue: dict[str, dict[str, int]] = defaultdict(empty_counts)
        for (queue, state), count in counts.items():
            per_queue[queue][state] = count
        known = _merged(queues)
        return [
            QueueSummary(
                name=name,
                paused=known[name][0] if name in known else False,
                created_at=known[name][1] if name in known else None,
                counts=per_queue[name] if name in per_queue else empty_counts(),
            )
            for name in sorted(set(known) | set(per_queue))
        ]

    async def get(self, caller: Caller, name: str) -> QueueSummary:
        validate_queue_name(name, "queue")
        for queue in await self.overview(caller):
            if queue.name == name:
                return queue
        return QueueSummary(name=name, paused=False, created_at=None, counts=empty_counts())

    async def set_paused(self, caller: Caller, name: str, paused: bool) -> QueueRecord:
        """Pause or resume the caller's tenant's queue of this name; other tenants' queues of the
        same name are theirs to pause. The server's own queues are not paused by any tenant."""
        check_client_queue(name, "queue")
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            queue = await transaction.set_queue_paused(name, caller.tenant_id, paused, now)
            event_type = "queue.paused" if paused else "queue.resumed"
            await self.runtime.emit(
                transaction,
                [Event(event_type, caller.tenant_id, name, None, name, {"queue": name})],
                now,
            )
            action = Action.QUEUE_PAUSE if paused else Action.QUEUE_RESUME
            await self.audit.record(caller, transaction, action, {"queue": name}, 1)
        return queue

    async def totals(self, caller: Caller) -> dict[str, Any]:
        """Jobs per state, throughput over the last minute, and counts of queues and workers."""
        tenant = caller.tenant_scope
        now = self.runtime.now()
        async with self.runtime.store.transaction(caller) as transaction:
            counts = await transaction.count_jobs(tenant, None)
            finished = await transaction.count_finished_since(tenant, now - MINUTE_MS)
            workers = await transaction.list_workers(tenant)
            queues = await transaction.list_queues(tenant)
        jobs = empty_counts()
        for (_, state), count in counts.items():
            jobs[state] += count
        return {
            "queues": len({queue.name for queue in queues} | {queue for queue, _ in counts}),
            "workers": len(workers),
            "jobs": jobs,
            "total_jobs": sum(jobs.values()),
            "throughput": {
                "processed_per_minute": finished.get("completed", 0),
                "failed_per_minute": finished.get("discarded", 0),
            },
            "uptime_seconds": (now - self.runtime.started_at) // 1000,
        }
