"""oban-py's producer side: `python oban_producer.py PATH COUNT` (enqueue-one: COUNT no-op jobs,
one call each; enqueue-batch: COUNT failing jobs, 1,000 per call; retry: every discarded job)."""

from __future__ import annotations

import asyncio
import os
import sys

from oban import Oban
from oban_tasks import Fail, Noop

BATCH = 1_000


async def main(path: str, count: int) -> None:
    pool = await Oban.create_pool(os.environ["OBAN_DSN"])
    try:
        async with Oban(pool=pool) as oban:
            if path == "enqueue-one":
                for index in range(count):
                    await oban.enqueue(Noop.new({"index": index}))
            elif path == "enqueue-batch":
                for offset in range(0, count, BATCH):
                    size = min(BATCH, count - offset)
                    await oban.enqueue_many(
                        [Fail.new({"index": offset + index}) for index in range(size)]
                    )
            elif path == "retry":
                async with pool.connection() as connection:
                    cursor = await connection.execute(
                        "SELECT id FROM oban_jobs WHERE state = 'discarded'"
                    )
                    ids = [row[0] for row in await cursor.fetchall()]
                await oban.retry_many_jobs(ids)
            else:
                raise SystemExit(f"unknown path {path!r}")
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
