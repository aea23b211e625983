"""redrive's producer side: `python redrive_producer.py (http URL | embedded DATABASE_URL) PATH
COUNT` (enqueue-one: COUNT no-op jobs, one call each; enqueue-batch: COUNT failing jobs, 1,000 per
call; retry: every dead letter). Over HTTP it is the Python client against `redrive serve`;
embedded it is the service on the database in this process, as `redrive worker --embedded` runs
it (to become the documented in-process API of issue 13 once that exists)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import redrive
from redrive.composition import build_service, open_store
from redrive.domain.caller import Caller, Role
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.envelope import read_envelope
from redrive.domain.job import DEFAULT_TENANT
from redrive.service.dead_letters import BulkRequest
from redrive.settings import Settings

BATCH = 1_000
FAILING = {"queue": "default", "retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}


def failing(index: int) -> dict[str, Any]:
    """One attempt, then the dead-letter queue."""
    return {"type": "bench.fail", "args": [index], "options": FAILING}


async def over_http(url: str, path: str, count: int) -> None:
    async with redrive.Client(url) as client:
        if path == "enqueue-one":
            for index in range(count):
                await client.enqueue("bench.noop", [index], queue="default")
        elif path == "enqueue-batch":
            for offset in range(0, count, BATCH):
                size = min(BATCH, count - offset)
                await client.enqueue_many([failing(offset + index) for index in range(size)])
        elif path == "retry":
            await client.retry_dead_letters()
        else:
            raise SystemExit(f"unknown path {path!r}")


async def embedded(database_url: str, path: str, count: int) -> None:
    settings = Settings(database_url=database_url)
    store = await open_store(settings)
    service = build_service(store, settings)
    caller = Caller.for_tenant(DEFAULT_TENANT, "bench", Role.ADMIN)
    try:
        if path == "enqueue-one":
            for index in range(count):
                body = {"type": "bench.noop", "args": [index], "options": {"queue": "default"}}
                await service.jobs.enqueue(caller, read_envelope(body))
        elif path == "enqueue-batch":
            for offset in range(0, count, BATCH):
                size = min(BATCH, count - offset)
                requests = [read_envelope(failing(offset + index)) for index in range(size)]
                await service.jobs.enqueue_batch(caller, requests)
        elif path == "retry":
            filters = parse_filter({}, service.now())
            await service.dead_letters.bulk_retry(caller, BulkRequest(filters, confirm=True))
        else:
            raise SystemExit(f"unknown path {path!r}")
    finally:
        await store.close()


if __name__ == "__main__":
    mode, target, path, count = sys.argv[1:5]
    run = over_http if mode == "http" else embedded
    asyncio.run(run(target, path, int(count)))
