"""One alert evaluation on PostgreSQL with N dead letters (`python -m bench alerts`).

Two seeded databases, each COPY-seeded by bench/seed.py: `spread` holds N dead letters over 200
days (the dead-letters benchmark's data, about 5,000 a day: a quiet system with a long history);
`recent` holds N over the last two days (about N/2 in the previous day and a few thousand in
the last fifteen minutes, so every queue is a spike candidate and has many recent aggregate
keys). Every dead letter carries an aggregate key (one of 300,000 orders). Each reports the first
evaluation (cold, firing what holds) and the median of the following ones (refreshing), timed
around Sweeper.evaluate_alerts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from bench.postgres import fresh_database
from bench.report import Figure
from bench.seed import DAY_MS, SeedPlan, seed
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.postgres.store import PostgresStore

Log = Callable[[str], None]
REPEATS = 5


@dataclass
class RecentPlan(SeedPlan):
    """Dead letters over the two days before `now`, the newest at `now`."""

    @property
    def oldest(self) -> int:
        return self.now - 2 * DAY_MS

    @property
    def newest(self) -> int:
        return self.now


class FixedClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


async def _measure(url: str, plan: SeedPlan, name: str, log: Log) -> list[Figure]:
    store = PostgresStore(url, max_size=2)
    await store.migrate()
    log(f"{name}: seeding {plan.rows:,} dead letters")
    await seed(url, plan)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        # Every dead letter carries an aggregate key, one of 300,000 orders (the seeder sets none).
        await connection.execute(
            "UPDATE dead_letters SET aggregate_key = 'order-' || (abs(hashtext(id)) % 300000)"
        )
        await connection.execute("VACUUM ANALYZE dead_letters")
    clock = FixedClock(plan.newest + 60_000)
    service = Service(Runtime(store, clock=clock))
    timings: list[float] = []
    fired = 0
    try:
        for _ in range(1 + REPEATS):
            started = time.perf_counter()
            evaluation = await service.sweeper.evaluate_alerts()
            timings.append((time.perf_counter() - started) * 1000)
            assert evaluation is not None
            fired += len(evaluation.fired)
            clock.now += 1_000
    finally:
        await store.close()
    log(f"{name}: first {timings[0]:.1f} ms, then {statistics.median(timings[1:]):.1f} ms")
    note = f"{plan.rows:,} rows; {fired} alerts fired"
    return [
        Figure(f"{name}: first evaluation (cold, fires)", timings[0], "ms", note=note),
        Figure(
            f"{name}: evaluation, median of {REPEATS}",
            statistics.median(timings[1:]),
            "ms",
            note=f"max {max(timings[1:]):.1f} ms",
        ),
    ]


async def run(rows: int, log: Log) -> list[Figure]:
    figures: list[Figure] = []
    for name, plan in (
        ("spread over 200 days", SeedPlan(rows=rows)),
        ("all within 2 days", RecentPlan(rows=rows)),
    ):
        with fresh_database("redrive_bench_alerts") as url:
            figures += await _measure(url, plan, name, log)
    return figures
