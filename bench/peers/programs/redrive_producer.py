"""redrive's producer side: `python redrive_producer.py (http URL | embedded DATABASE_URL) PATH
COUNT` (enqueue-one: COUNT no-op jobs, one call each; enqueue-batch: COUNT failing jobs, 1,000 per
call; retry: every dead letter). Over HTTP it is the Python client against `redrive serve`;
embedded it is `redrive.Embedded`, the in-process API, on the database."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import redrive
from redrive.client import DeadLetterFilter
from redrive.domain.errors import RootCauseRequired

BATCH = 1_000
FAILED = {"type": "bench.fail"}
# How often the retry path reads its task, as `redrive dlq redrive` does (cli/redrives.py): the
# clock stops when the jobs are available, so reading it every 50 ms only took CPU from the move.
FOLLOW_SECONDS = 2.0
ROOT_CAUSE = ("infrastructure", "the benchmark's handler always fails", "benchmark")


def critical_rate(count: int) -> int:
    """A redrive rate (per minute) that moves `count` dead letters within one sweep (200 ms)."""
    return max(1_000, count * 300)


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
            # As an operator would after a fix: explain the incident, then redrive it, here at
            # a critical rate that moves everything at the next tick (the server's maximum is
            # raised for the benchmark; the default pacing is 100 a minute).
            for incident in (await client.incidents(type="bench.fail")).items:
                await client.record_root_cause(incident.id, *ROOT_CAUSE)
            task = await client.start_redrive(
                DeadLetterFilter(type="bench.fail"),
                rate_per_minute=critical_rate(count),
                critical=True,
                reason="benchmark",
            )
            while task.state == "running":  # followed to its end, as `redrive dlq redrive` does
                await asyncio.sleep(FOLLOW_SECONDS)
                task = await client.get_redrive(task.id)
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
            try:
                await jobs.retry_dead_letters(FAILED)
            except RootCauseRequired as refused:  # as an operator would: explain, then retry
                for incident in refused.details["incidents"]:
                    await jobs.record_root_cause(incident["id"], *ROOT_CAUSE)
                await jobs.retry_dead_letters(FAILED)
        else:
            raise SystemExit(f"unknown path {path!r}")


if __name__ == "__main__":
    mode, target, path, count = sys.argv[1:5]
    run = over_http if mode == "http" else embedded
    asyncio.run(run(target, path, int(count)))
