"""The dead-letter benchmark on PostgreSQL: list, stats, incidents, bulk retry, prune, enqueue
under prune."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import httpx
import psycopg

from bench.postgres import database_copy, fresh_database
from bench.report import Figure, percentile, repeats, summary
from bench.seed import CATALOGUE, DAY_MS, ERRORS, RETRY_QUEUE, SeedPlan, SeedResult, seed
from redrive.api.app import create_app
from redrive.dashboard import install_dashboard
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.cursor import encode_cursor
from redrive.domain.dead_letter_filter import DeadLetterFilter, parse_filter
from redrive.domain.durations import format_timestamp
from redrive.domain.envelope import read_envelope
from redrive.domain.errors import RootCauseRequired
from redrive.domain.incident import parse_incident_query
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.legal_hold import parse_hold_request
from redrive.domain.retention import parse_policy_changes
from redrive.domain.root_cause import parse_root_cause
from redrive.domain.trend import Window
from redrive.ports import Page
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.postgres.store import PostgresStore

# The benchmark acts as an administrator of the default tenant, as a plain request does.
CALLER = Caller.for_tenant(DEFAULT_TENANT, "bench", Role.ADMIN)

FULL_ROWS = 1_000_000
QUICK_ROWS = 50_000
PAGE_LIMIT = 50
# Targets from the issue, for 1,000,000 dead letters.
LIST_P95_MS = 20.0
INCIDENT_LIST_P95_MS = 20.0
INCIDENT_TREND_P95_MS = 20.0  # like the list it sits beside
STATS_P95_MS = 50.0
BULK_RETRY_ROWS = 100_000
BULK_RETRY_S = 2.0
PRUNE_S = 60.0
ENQUEUE_P99_MS = 50.0
TYPE_PREFIXES = ("payment.", "email.", "inventory.", "image.", "report.", "search.", "billing.")
Log = Callable[[str], None]


@dataclass
class Settings:
    rows: int = FULL_ROWS
    list_samples: int = 200
    stats_samples: int = 50
    warmup: int = 20
    retry_repeats: int = 3
    prune_repeats: int = 3
    idle_enqueues: int = 500
    pool_size: int = 10
    seed: int = 20_240_601
    keep: bool = False


@dataclass
class Outcome:
    figures: list[Figure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@asynccontextmanager
async def opened(url: str, pool_size: int) -> AsyncIterator[Service]:
    store = PostgresStore(url, max_size=pool_size)
    try:
        yield Service(Runtime(store))
    finally:
        await store.close()


async def _scalar(url: str, sql: str, parameters: tuple[Any, ...] = ()) -> Any:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        cursor = await connection.execute(sql, parameters)
        row = await cursor.fetchone()
        return row[0] if row else None


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call()
    return (time.perf_counter() - started) * 1000, result


# list page


@dataclass(frozen=True)
class ListCase:
    kind: str
    raw: dict[str, str]
    cursor_at: int | None = None
    cursor_id: str | None = None

    def page(self) -> Page:
        return Page(limit=PAGE_LIMIT, cursor_at=self.cursor_at, cursor_id=self.cursor_id)


async def _deep_cursor(url: str, queue: str | None, depth: float) -> tuple[int, str]:
    """The keyset cursor a client holds after paging `depth` of the way into the set."""
    where = "status = 'dead'" + (" AND queue = %s" if queue else "")
    parameters: tuple[Any, ...] = (queue,) if queue else ()
    total = await _scalar(url, f"SELECT COUNT(*) FROM dead_letters WHERE {where}", parameters)
    offset = max(int(total * depth) - 1, 0)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        cursor = await connection.execute(
            f"SELECT discarded_at, id FROM dead_letters WHERE {where} "
            "ORDER BY discarded_at DESC, id DESC OFFSET %s LIMIT 1",
            (*parameters, offset),
        )
        row = await cursor.fetchone()
    if row is None:
        raise RuntimeError("no row for a deep cursor")
    return int(row[0]), str(row[1])


async def list_cases(url: str, plan: SeedPlan, count: int, rng: random.Random) -> list[ListCase]:
    """The filter mix, in round-robin order of kind so that no kind gets a warmer cache."""
    queues = list(CATALOGUE)
    error_types = list(ERRORS)
    per_kind = -(-count // 6)
    cursors = 8
    deep_queue = [
        (queue, await _deep_cursor(url, queue, rng.uniform(0.5, 0.95)))
        for queue in rng.sample(queues, cursors)
    ]
    deep_all = [await _deep_cursor(url, None, rng.uniform(0.5, 0.95)) for _ in range(cursors)]
    kinds: list[list[ListCase]] = [[] for _ in range(6)]
    for _ in range(per_kind):
        kinds[0].append(ListCase("queue", {"queue": rng.choice(queues)}))
        kinds[1].append(
            ListCase(
                "queue+error_type",
                {"queue": rng.choice(queues), "error_type": rng.choice(error_types)},
            )
        )
        kinds[2].append(ListCase("type prefix", {"type": rng.choice(TYPE_PREFIXES) + "*"}))
        since = rng.randint(plan.oldest, plan.newest - 7 * DAY_MS)
        window = {"since": format_timestamp(since), "until": format_timestamp(since + 7 * DAY_MS)}
        kinds[3].append(ListCase("since/until 7-day window", window))
        queue, (moment, episode) = rng.choice(deep_queue)
        kinds[4].append(ListCase("queue, deep cursor", {"queue": queue}, moment, episode))
        moment, episode = rng.choice(deep_all)
        kinds[5].append(ListCase("no filter, deep cursor", {}, moment, episode))
    ordered = [case for group in zip(*kinds, strict=True) for case in group]
    return ordered[:count]


async def measure_list(
    service: Service, cases: list[ListCase], warmup: int
) -> tuple[list[float], dict[str, list[float]]]:
    samples: list[float] = []
    by_kind: dict[str, list[float]] = {}
    for index, case in enumerate([*cases[:warmup], *cases]):
        filters = parse_filter(case.raw, service.now())
        page = case.page()
        started = time.perf_counter()
        items, total = await service.dead_letters.search(CALLER, filters, page)
        elapsed = (time.perf_counter() - started) * 1000
        if len(items) > min(total, PAGE_LIMIT) and case.cursor_at is None:
            raise RuntimeError(f"list case {case}: {len(items)} items but a total of {total}")
        if index >= warmup:
            samples.append(elapsed)
            by_kind.setdefault(case.kind, []).append(elapsed)
    return samples, by_kind


async def measure_dashboard(
    service: Service, cases: list[ListCase], warmup: int
) -> tuple[list[float], dict[str, list[float]]]:
    """The same filter mix as whole dashboard pages (GET /ui/dead-letters, rendered HTML with
    its counts and filter choices) through the ASGI transport: what an operator waits for."""
    app = create_app(service)
    install_dashboard(app, service)
    samples: list[float] = []
    by_kind: dict[str, list[float]] = {}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench.test") as http:
        for index, case in enumerate([*cases[:warmup], *cases]):
            params = dict(case.raw)
            if case.cursor_at is not None and case.cursor_id is not None:
                params["cursor"] = encode_cursor(case.cursor_at, case.cursor_id)
            started = time.perf_counter()
            response = await http.get("/ui/dead-letters", params=params)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200 or "<table" not in response.text:
                raise RuntimeError(f"dashboard case {case}: {response.status_code}")
            if index >= warmup:
                samples.append(elapsed)
                by_kind.setdefault(case.kind, []).append(elapsed)
    return samples, by_kind


INCIDENT_QUERIES: tuple[dict[str, str], ...] = (
    {},
    {"sort": "count"},
    {"state": "open,regressed"},
    {"queue": "payments", "sort": "count"},
    {"type": "email.*"},
    {"error_type": "TimeoutError"},
)


async def measure_incidents(
    service: Service, count: int, warmup: int, rng: random.Random
) -> tuple[list[float], list[float]]:
    """Incident list pages (the query mix in turn) and incident pages (one incident with its
    newest dead letters): neither may scan the dead letters."""
    every = parse_incident_query({"limit": "500"})
    ids = [incident.id for incident in await service.incidents.search(CALLER, every)]
    if not ids:
        raise RuntimeError("the seed made no incidents")
    listing: list[float] = []
    pages: list[float] = []
    for index in range(warmup + count):
        query = parse_incident_query(INCIDENT_QUERIES[index % len(INCIDENT_QUERIES)])
        elapsed, found = await _timed(partial(service.incidents.search, CALLER, query))
        if not found:
            raise RuntimeError(f"incident query {query} found nothing")
        chosen = rng.choice(ids)
        page, (incident, recent) = await _timed(partial(service.incidents.get, CALLER, chosen))
        if incident.dead_count and not recent:
            raise RuntimeError(f"incident {chosen} counts dead letters but lists none")
        if index >= warmup:
            listing.append(elapsed)
            pages.append(page)
    return listing, pages


@dataclass(frozen=True)
class FixedClock:
    """The moment trends are read at: an hour after the seed's newest dead letter, so the last
    24 hours hold a day of arrivals (the seed leaves a day before its own now empty)."""

    now: int

    def now_ms(self) -> int:
        return self.now


async def measure_trends(
    service: Service, count: int, warmup: int
) -> tuple[dict[str, list[float]], int]:
    """The trend of each incident list page (the query mix in turn), 24h and 7d in turn: one
    grouped query for the page's incidents. Returns the samples per window and the most
    arrivals one page counted."""
    samples: dict[str, list[float]] = {window.value: [] for window in Window}
    pages = [
        await service.incidents.search(CALLER, parse_incident_query(raw))
        for raw in INCIDENT_QUERIES
    ]
    most = 0
    for index in range(warmup + count):
        window = list(Window)[index % len(Window)]
        page = pages[(index // len(Window)) % len(pages)]
        elapsed, trends = await _timed(partial(service.incidents.trends, CALLER, page, window))
        counted = sum(trend.total for trend in trends.values())
        if window == Window.WEEK and not counted:
            raise RuntimeError("a week of trends counted no arrival")
        most = max(most, counted)
        if index >= warmup:
            samples[window.value].append(elapsed)
    return samples, most


async def measure_stats(service: Service, count: int, warmup: int) -> list[float]:
    samples = []
    for index in range(warmup + count):
        elapsed, stats = await _timed(lambda: service.dead_letters.stats(CALLER))
        if not stats.total:
            raise RuntimeError("stats saw no dead letters")
        if index >= warmup:
            samples.append(elapsed)
    return samples


# bulk retry


async def explain_queue(service: Service, filters: DeadLetterFilter) -> dict[str, float]:
    """The redrive policy's check refusing the retry queue's set, then a root cause with a fix
    recorded for each incident of that queue, and the check again, passing: its two times."""
    started = time.perf_counter()
    try:
        await service.incidents.require_root_causes(CALLER, filters)
    except RootCauseRequired:
        refused = time.perf_counter() - started
    else:
        raise RuntimeError("the seed's incidents have root causes already")
    query = parse_incident_query({"queue": RETRY_QUEUE, "limit": "500"})
    written = parse_root_cause({"category": "infrastructure", "root_cause": "the bench",
                                "fix_reference": "bench"})  # fmt: skip
    for incident in await service.incidents.search(CALLER, query):
        await service.incidents.record_root_cause(CALLER, incident.id, written)
    started = time.perf_counter()
    await service.incidents.require_root_causes(CALLER, filters)
    return {"check_refused_seconds": refused, "check_seconds": time.perf_counter() - started}


# The server's WAL written and checkpoints begun so far (server-wide counters: the figures are
# meant for a quiet server). The retry is bound by its WAL: each retried job is on a heap page of
# its own, its dead letter on one it shares with one or two others, pages the copy's checkpoint
# left clean, so their first change writes them whole (~1.5 full pages a row, 14 kB of WAL):
# 100,000 wrote ~1.4 GB, past max_wal_size's trigger (two checkpoints began during the retry),
# where 30,000 (~0.4 GB) began none.
SERVER_WRITES = (
    "SELECT wal_bytes, wal_fpi, (SELECT checkpoints_timed + checkpoints_req "
    "FROM pg_stat_bgwriter) FROM pg_stat_wal"
)


async def _server_writes(url: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        cursor = await connection.execute(SERVER_WRITES)
        row = await cursor.fetchone()
    if row is None:
        raise RuntimeError("pg_stat_wal returned no row")
    return dict(zip(("wal_bytes", "full_page_images", "checkpoints"), map(int, row), strict=True))


async def bulk_retry_once(url: str, settings: Settings, expected: int) -> dict[str, Any]:
    async with opened(url, settings.pool_size) as service:
        filters = parse_filter({"queue": RETRY_QUEUE}, service.now())
        checks = await explain_queue(service, filters)
        before = await _server_writes(url)
        started = time.perf_counter()
        result = await service.dead_letters.bulk_retry(CALLER, BulkRequest(filters, confirm=True))
        seconds = time.perf_counter() - started
        after = await _server_writes(url)
    available = await _scalar(
        url, "SELECT COUNT(*) FROM jobs WHERE queue = %s AND state = 'available'", (RETRY_QUEUE,)
    )
    still_dead = await _scalar(url, "SELECT COUNT(*) FROM dead_letters WHERE status = 'dead'")
    counted = await _scalar(url, "SELECT COALESCE(SUM(dead_count), 0) FROM incidents")
    if result.succeeded != expected or result.failed or available != expected:
        raise RuntimeError(
            f"bulk retry moved {result.succeeded} (failed {result.failed}, "
            f"{available} available), expected {expected}"
        )
    if counted != still_dead:
        raise RuntimeError(f"incidents count {counted} dead, the table holds {still_dead}")
    return {"seconds": seconds, "succeeded": result.succeeded, "matched": result.matched,
            **{key: after[key] - before[key] for key in after}, **checks}  # fmt: skip


# prune, alone and with enqueues running beside it


LEGAL_HOLDS = 10


async def _set_policy(service: Service) -> None:
    """Prune everything by age (the floor off), with legal holds present that hold nothing, so
    every candidate row pays the holds' NOT EXISTS probe."""
    changes = parse_policy_changes({"max_age": "P1D", "max_count": 1_000_000_000, "min_age": "P0D"})
    await service.retention.set_policy(CALLER, None, changes)
    for number in range(LEGAL_HOLDS):
        request = parse_hold_request(
            {"filter": {"error_type": f"NoSuchError{number}"}, "reason": "bench"}
        )
        await service.legal_holds.place(CALLER, request)


async def _verify_pruned(url: str, rows: int, removed: int) -> None:
    """Nothing dead is left, and each pruned dead letter left its tombstone."""
    left = await _scalar(url, "SELECT COUNT(*) FROM dead_letters WHERE status = 'dead'")
    tallied = await _scalar(url, "SELECT COALESCE(SUM(count), 0) FROM dead_letter_tallies")
    counted = await _scalar(url, "SELECT COALESCE(SUM(dead_count), 0) FROM incidents")
    if left or tallied or counted or removed != rows:
        raise RuntimeError(
            f"prune removed {removed} of {rows}: {left} rows, {tallied} tallied, {counted} "
            "counted dead in incidents"
        )


async def prune_once(url: str, settings: Settings) -> dict[str, Any]:
    async with opened(url, settings.pool_size) as service:
        await _set_policy(service)
        started = time.perf_counter()
        report = await service.retention.prune(SYSTEM)
        seconds = time.perf_counter() - started
    await _verify_pruned(url, settings.rows, report.removed)
    return {"seconds": seconds, "removed": report.removed}


async def _enqueue(service: Service, number: int) -> float:
    body = {
        "type": "bench.enqueue",
        "args": [{"n": number}],
        "options": {"queue": "bench-enqueue"},
    }
    elapsed, _ = await _timed(lambda: service.jobs.enqueue(CALLER, read_envelope(body)))
    return elapsed


async def prune_with_enqueues(url: str, settings: Settings) -> dict[str, Any]:
    """Prune on one service while a second one (its own pool, like another replica) enqueues
    back to back until the prune ends."""
    async with (
        opened(url, settings.pool_size) as pruner,
        opened(url, settings.pool_size) as producer,
    ):
        await _set_policy(pruner)
        idle = [await _enqueue(producer, n) for n in range(settings.idle_enqueues)]
        started = time.perf_counter()
        prune = asyncio.create_task(pruner.retention.prune(SYSTEM))
        busy: list[float] = []
        while not prune.done():
            busy.append(await _enqueue(producer, len(idle) + len(busy)))
        report = await prune
        seconds = time.perf_counter() - started
    await _verify_pruned(url, settings.rows, report.removed)
    return {"seconds": seconds, "removed": report.removed, "idle": idle, "busy": busy}


# the whole run


def _ms(name: str, samples: list[float], stat: str, target: float | None = None) -> Figure:
    facts = summary(samples)
    return Figure(
        name,
        float(facts[stat]),
        "ms",
        target,
        note=f"{facts['n']} samples; min {facts['min']:.2f}, max {facts['max']:.2f}",
        detail=facts,
    )


def _scaled(target: float, rows: int, full: int) -> tuple[float, str]:
    if rows == full:
        return target, ""
    return target * rows / full, f"target scaled from {target:g} s at {full:,} rows"


def _repeated(name: str, runs: list[dict[str, Any]], target: float, note: str) -> Figure:
    seconds = [run["seconds"] for run in runs]
    facts = repeats(seconds)
    spread = (
        f"median of {len(runs)} runs (min {facts['min']:.2f}, max {facts['max']:.2f})"
        if len(runs) > 1
        else "1 run"
    )
    note = "; ".join(part for part in (spread, note) if part)
    return Figure(name, float(facts["median"]), "s", target, note, detail={**facts, "runs": runs})


async def _on_copies(
    url: str, times: int, label: str, log: Log, measure: Callable[[str], Awaitable[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Run `measure` on `times` fresh file copies of the seeded database."""
    runs = []
    for number in range(times):
        started = time.perf_counter()
        with database_copy(url) as copy:
            copied = time.perf_counter() - started
            log(f"{label} (run {number + 1}/{times}; database copied in {copied:.1f} s)")
            runs.append({**await measure(copy), "copy_seconds": copied})
        log(f"  {runs[-1]['seconds']:.2f} s")
    return runs


async def _seed_phase(url: str, plan: SeedPlan, outcome: Outcome, log: Log) -> None:
    store = PostgresStore(url, max_size=2)
    await store.migrate()
    await store.close()
    log(f"seeding {plan.rows:,} dead letters")
    seeded: SeedResult = await seed(url, plan)
    outcome.details["seed"] = asdict(seeded)
    log("seeded: " + ", ".join(f"{key} {value:.1f} s" for key, value in seeded.seconds.items()))
    outcome.figures.append(
        Figure(
            f"seed {plan.rows:,} rows (COPY, indexes, tallies, VACUUM ANALYZE)",
            seeded.seconds["total"],
            "s",
            note=(
                f"COPY {seeded.seconds['copy']:.1f} s, indexes {seeded.seconds['indexes']:.1f} s; "
                f"tables {sum(seeded.table_bytes.values()) / 2**30:.1f} GiB"
            ),
        )
    )


async def _read_phase(
    url: str, plan: SeedPlan, settings: Settings, outcome: Outcome, log: Log
) -> None:
    cases = await list_cases(url, plan, settings.list_samples, random.Random(settings.seed))
    async with opened(url, settings.pool_size) as service:
        log(f"list page: {len(cases)} samples after {settings.warmup} warm-up")
        samples, by_kind = await measure_list(service, cases, settings.warmup)
        log(f"stats: {settings.stats_samples} samples")
        stats = await measure_stats(service, settings.stats_samples, settings.warmup // 4)
        log(f"dashboard list page: {len(cases)} samples after {settings.warmup} warm-up")
        pages, pages_by_kind = await measure_dashboard(service, cases, settings.warmup)
        log(f"incidents: {settings.list_samples} list and incident pages")
        incident_lists, incident_pages = await measure_incidents(
            service, settings.list_samples, settings.warmup, random.Random(settings.seed)
        )
        log(f"incident trends: {settings.list_samples} pages of incidents")
        clock = FixedClock(plan.newest + 3_600_000)
        trend_service = Service(Runtime(service.runtime.store, clock=clock))
        trends, most_arrivals = await measure_trends(
            trend_service, settings.list_samples, settings.warmup
        )
    figures = outcome.figures
    figures.append(_ms("list page p50", samples, "p50"))
    figures.append(_ms("list page p95", samples, "p95", LIST_P95_MS))
    figures.append(_ms("list page p99", samples, "p99"))
    for kind, kind_samples in by_kind.items():
        figure = _ms(f"  list p95: {kind}", kind_samples, "p95")
        figure.note = f"p50 {percentile(kind_samples, 0.5):.2f} ms; " + figure.note
        figures.append(figure)
    figures.append(_ms("incident list p50", incident_lists, "p50"))
    figures.append(_ms("incident list p95", incident_lists, "p95", INCIDENT_LIST_P95_MS))
    figures.append(_ms("incident page p95 (with its 20 newest dead letters)", incident_pages,
                       "p95"))  # fmt: skip
    every_trend = [sample for window in trends.values() for sample in window]
    figures.append(_ms("incident trend p95 (a page of incidents, 24h and 7d)", every_trend,
                       "p95", INCIDENT_TREND_P95_MS))  # fmt: skip
    for window, window_samples in trends.items():
        figure = _ms(f"  incident trend p95: {window}", window_samples, "p95")
        figure.note = f"p50 {percentile(window_samples, 0.5):.2f} ms; " + figure.note
        figures.append(figure)
    figures[-1].note += f"; up to {most_arrivals:,} arrivals counted for a page"
    figures.append(_ms("stats p50", stats, "p50"))
    figures.append(_ms("stats p95", stats, "p95", STATS_P95_MS))
    figures.append(_ms("dashboard list page p50", pages, "p50"))
    figures.append(_ms("dashboard list page p95", pages, "p95"))
    slowest = max(pages_by_kind, key=lambda kind: percentile(pages_by_kind[kind], 0.95))
    figures.append(_ms(f"  dashboard p95: {slowest} (slowest)", pages_by_kind[slowest], "p95"))
    outcome.details["dashboard_samples_ms"] = pages_by_kind
    outcome.details["list_cases"] = [asdict(case) for case in cases]
    outcome.details["list_samples_ms"] = by_kind
    outcome.details["stats_samples_ms"] = stats
    outcome.details["incident_samples_ms"] = {
        "list": incident_lists, "page": incident_pages, "trend": trends,
    }  # fmt: skip


async def _write_phase(
    url: str, plan: SeedPlan, settings: Settings, outcome: Outcome, log: Log
) -> None:
    figures = outcome.figures
    runs = await _on_copies(
        url,
        settings.retry_repeats,
        f"bulk retry of {plan.retry_rows:,}",
        log,
        lambda copy: bulk_retry_once(copy, settings, plan.retry_rows),
    )
    target, note = _scaled(BULK_RETRY_S, plan.retry_rows, BULK_RETRY_ROWS)
    figures.append(_repeated(f"bulk retry of {plan.retry_rows:,}", runs, target, note))
    rate = plan.retry_rows / figures[-1].value
    figures.append(Figure("  bulk retry rate", rate, "rows/s", note="from the median"))
    written = [run["wal_bytes"] / 2**20 for run in runs]
    figures.append(
        Figure(
            "  WAL written during the bulk retry",
            float(repeats(written)["median"]),
            "MiB",
            note="median; checkpoints begun during each run: "
            + " / ".join(str(run["checkpoints"]) for run in runs)
            + " (server-wide counters)",
        )
    )
    for key, label in (("check_refused_seconds", "refusing"), ("check_seconds", "passing")):
        samples = [run[key] * 1000 for run in runs]
        figures.append(_ms(f"  root-cause check of the set, {label}", samples, "max"))

    runs = await _on_copies(
        url, settings.prune_repeats, f"prune of {plan.rows:,}", log,
        lambda copy: prune_once(copy, settings),
    )  # fmt: skip
    target, note = _scaled(PRUNE_S, plan.rows, FULL_ROWS)
    figures.append(_repeated(f"prune of {plan.rows:,}", runs, target, note))
    rate = plan.rows / figures[-1].value
    figures.append(Figure("  prune rate", rate, "rows/s", note="from the median"))

    [loaded] = await _on_copies(
        url, 1, f"prune of {plan.rows:,} with enqueues beside it", log,
        lambda copy: prune_with_enqueues(copy, settings),
    )  # fmt: skip
    busy, idle = loaded.pop("busy"), loaded.pop("idle")
    figures.append(_ms("enqueue p50 while pruning", busy, "p50"))
    figures.append(_ms("enqueue p95 while pruning", busy, "p95"))
    figures.append(_ms("enqueue p99 while pruning", busy, "p99", ENQUEUE_P99_MS))
    figures.append(
        Figure(
            "  enqueues during the prune",
            len(busy),
            "count",
            note="1 client back to back; second pool, same event loop as the prune",
        )
    )
    figures.append(_ms("  enqueue p99 before the prune (idle)", idle, "p99"))
    figures.append(
        Figure(
            "  prune with enqueues beside it",
            loaded["seconds"],
            "s",
            note=f"1 run; removed {loaded['removed']:,}",
        )
    )
    outcome.details["prune_with_enqueues"] = {
        **loaded,
        "busy": summary(busy),
        "idle": summary(idle),
        "busy_samples_ms": busy,
        "idle_samples_ms": idle,
    }


async def run(settings: Settings, log: Log) -> Outcome:
    """Seed once, measure the reads on the seeded database, then every write on fresh copies."""
    outcome = Outcome(details={"settings": asdict(settings)})
    plan = SeedPlan(rows=settings.rows, seed=settings.seed)
    with fresh_database("redrive_bench", keep=settings.keep) as url:
        if settings.keep:
            log(f"the seeded database stays after the run: {url}")
        await _seed_phase(url, plan, outcome, log)
        await _read_phase(url, plan, settings, outcome, log)
        await _write_phase(url, plan, settings, outcome, log)
    return outcome
