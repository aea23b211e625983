"""Queue and server overview use-cases: list queues, per-state counts, pause, resume, stats."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from redrive.domain.caller import SYSTEM, Caller
from redrive.domain.envelope import validate_queue_name
from redrive.domain.events import Event
from redrive.domain.job import STATES
from redrive.service.runtime import Runtime

MINUTE_MS = 60_000


def empty_counts() -> dict[str, int]:
    return dict.fromkeys(STATES, 0)


class QueueService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def overview(self, caller: Caller) -> list[dict[str, Any]]:
        """Every known queue with its per-state counts and paused flag, sorted by name."""
        tenant = caller.tenant_scope
        async with self.runtime.store.transaction() as transaction:
            queues = await transaction.list_queues()
            counts = await transaction.count_jobs(tenant, None)
        per_queue: dict[str, dict[str, int]] = defaultdict(empty_counts)
        for (queue, state), count in counts.items():
            per_queue[queue][state] = count
        known = {queue["name"]: queue for queue in queues}
        names = sorted(set(known) | set(per_queue))
        if tenant is not None:
            names = [name for name in names if name in per_queue]
        return [
            {
                "name": name,
                "paused": bool(known.get(name, {}).get("paused", False)),
                "created_at": known.get(name, {}).get("created_at"),
                "counts": per_queue[name] if name in per_queue else empty_counts(),
            }
            for name in names
        ]

    async def get(self, caller: Caller, name: str) -> dict[str, Any]:
        tenant = caller.tenant_scope
        validate_queue_name(name, "queue")
        for queue in await self.overview(SYSTEM):
            if queue["name"] == name:
                break
        else:
            queue = {"name": name, "paused": False, "created_at": None, "counts": empty_counts()}
        if tenant is not None:
            async with self.runtime.store.transaction() as transaction:
                counts = await transaction.count_jobs(tenant, name)
            queue["counts"] = empty_counts() | {state: n for (_, state), n in counts.items()}
        return queue

    async def set_paused(self, caller: Caller, name: str, paused: bool) -> dict[str, Any]:
        validate_queue_name(name, "queue")
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            queue = await transaction.set_queue_paused(name, caller.tenant_id, paused, now)
            event_type = "queue.paused" if paused else "queue.resumed"
            await self.runtime.emit(
                transaction,
                [Event(event_type, caller.tenant_id, name, None, name, {"queue": name})],
                now,
            )
        return queue

    async def totals(self, caller: Caller) -> dict[str, Any]:
        """Jobs per state, throughput over the last minute, and counts of queues and workers."""
        tenant = caller.tenant_scope
        now = self.runtime.now()
        async with self.runtime.store.transaction() as transaction:
            counts = await transaction.count_jobs(tenant, None)
            finished = await transaction.count_finished_since(tenant, now - MINUTE_MS)
            workers = await transaction.list_workers(tenant)
            queues = await transaction.list_queues()
        jobs = empty_counts()
        for (_, state), count in counts.items():
            jobs[state] += count
        return {
            "queues": len({queue["name"] for queue in queues} | {queue for queue, _ in counts}),
            "workers": len(workers),
            "jobs": jobs,
            "total_jobs": sum(jobs.values()),
            "throughput": {
                "processed_per_minute": finished.get("completed", 0),
                "failed_per_minute": finished.get("discarded", 0),
            },
            "uptime_seconds": (now - self.runtime.started_at) // 1000,
        }
