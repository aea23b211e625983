"""pgqueuer's producer side: `python pgqueuer_producer.py PATH COUNT` (enqueue-one: COUNT no-op
jobs, one call each; enqueue-batch: COUNT failing jobs, 1,000 per call; retry: requeue every
failed job)."""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

BATCH = 1_000


async def main(path: str, count: int) -> None:
    connection = await asyncpg.connect(os.environ["PGDSN"])
    queries = Queries(AsyncpgDriver(connection))
    try:
        if path == "enqueue-one":
            for index in range(count):
                await queries.enqueue("noop", str(index).encode())
        elif path == "enqueue-batch":
            for offset in range(0, count, BATCH):
                size = min(BATCH, count - offset)
                payloads: list[bytes | None] = [
                    str(offset + index).encode() for index in range(size)
                ]
                await queries.enqueue(["fail"] * size, payloads, [0] * size)
        elif path == "retry":
            failed = await queries.list_failed_jobs(limit=count)
            await queries.requeue_jobs([job.id for job in failed])
        else:
            raise SystemExit(f"unknown path {path!r}")
    finally:
        await connection.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
