"""redrive's producer side: `python redrive_producer.py (http URL | embedded DATABASE_URL) PATH
COUNT` (enqueue-one: COUNT no-op jobs, one call each; enqueue-batch: COUNT failing jobs, 1,000 per
call; retry: every dead letter). Over HTTP it is the Python client against `redrive serve`;
embedded it is `redrive.Embedded`, the in-process API, on the database."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import redrive

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
    async with redrive.Embedded(database_url, actor="bench") as jobs:
        if path == "enqueue-one":
            for index in range(count):
                await jobs.enqueue("bench.noop", [index], queue="default")
        elif path == "enqueue-batch":
            for offset in range(0, count, BATCH):
                size = min(BATCH, count - offset)
                await jobs.enqueue_many([failing(offset + index) for index in range(size)])
        elif path == "retry":
            await jobs.retry_dead_letters()
        else:
            raise SystemExit(f"unknown path {path!r}")


if __name__ == "__main__":
    mode, target, path, count = sys.argv[1:5]
    run = over_http if mode == "http" else embedded
    asyncio.run(run(target, path, int(count)))
