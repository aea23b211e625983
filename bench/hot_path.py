"""The hot-path benchmark: enqueue, process (ack and dead-letter), HTTP, bulk retry, server RSS."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.postgres import database_copy, fresh_database
from bench.report import Figure, repeats
from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import batch_items, each_parsed, fetch_request, nack_request
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.incident import parse_incident_query
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.root_cause import parse_root_cause
from redrive.ports import Store
from redrive.service.dead_letters import BulkRequest
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from redrive.worker import Worker
from redrive.worker.embedded_source import EmbeddedJobSource
from redrive.worker.http_source import HttpJobSource
from redrive.worker.source import JobSource

# The benchmark acts as an administrator of the default tenant, as a plain request does.
CALLER = Caller.for_tenant(DEFAULT_TENANT, "bench", Role.ADMIN)

QUEUE = "bench"
STORES = ("postgres", "sqlite")
# Targets from the issue, in jobs/s (at least), for N = 20,000.
TARGETS = {
    ("postgres", "bulk enqueue"): 25_000.0,
    ("postgres", "process, ack"): 4_000.0,
    ("postgres", "process, dead-letter"): 2_000.0,
    ("sqlite", "process, ack"): 3_000.0,
    ("sqlite", "process, dead-letter"): 3_000.0,
    ("postgres", "retry all dead letters"): 50_000.0,
}
HTTP_SHARE = 0.5  # the HTTP paths: at least half of the embedded figure
SERVER_RSS_MB = 150.0
Log = Callable[[str], None]


@dataclass
class Settings:
    jobs: int = 20_000
    repeats: int = 3
    retry_rows: int = 100_000
    concurrency: int = 50
    enqueue_batch: int = 1_000
    stores: tuple[str, ...] = STORES
    http: bool = True


@dataclass
class Outcome:
    figures: list[Figure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def job_body(index: int, failing: bool) -> dict[str, Any]:
    if failing:
        options = {"queue": QUEUE, "retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}}
        return {"type": "bench.fail", "args": [index], "options": options}
    return {"type": "bench.noop", "args": [index], "options": {"queue": QUEUE}}


# databases: a fresh, migrated one per measurement


@asynccontextmanager
async def fresh(kind: str) -> AsyncIterator[str]:
    store: Store
    if kind == "postgres":
        with fresh_database("redrive_bench_hot") as url:
            store = PostgresStore(url, max_size=1)
            await store.migrate()
            await store.close()
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="redrive-bench-") as directory:
        url = f"sqlite:///{directory}/redrive.db"
        store = SqliteStore(f"{directory}/redrive.db")
        await store.migrate()
        await store.close()
        yield url


@contextmanager
def copied(url: str) -> Iterator[str]:
    """A file copy of a database nobody is connected to."""
    if url.startswith("postgresql"):
        with database_copy(url) as copy:
            yield copy
        return
    source = Path(url.removeprefix("sqlite:///"))
    with tempfile.TemporaryDirectory(prefix="redrive-bench-copy-") as directory:
        target = Path(directory) / "redrive.db"
        shutil.copyfile(source, target)
        yield f"sqlite:///{target}"


async def open_store(url: str) -> Store:
    if url.startswith("postgresql"):
        store = PostgresStore(url, max_size=10)
        return store
    return SqliteStore(url.removeprefix("sqlite:///"))


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[Service]:
    store = await open_store(url)
    try:
        yield Service(Runtime(store))
    finally:
        await store.close()


# the measured paths


async def enqueue(service: Service, count: int, failing: bool, batch: int) -> float:
    """Seconds to enqueue `count` jobs in batches of `batch` (one transaction each)."""
    bodies = [job_body(index, failing) for index in range(count)]
    started = time.perf_counter()
    for offset in range(0, count, batch):
        await service.jobs.enqueue_batch(
            CALLER, job_requests({"jobs": bodies[offset : offset + batch]})
        )
    return time.perf_counter() - started


async def settled(service: Service, state: str) -> int:
    async with service.runtime.store.transaction(SYSTEM) as transaction:
        return (await transaction.count_jobs(None, QUEUE)).get((QUEUE, state), 0)


async def wait_for(service: Service, state: str, count: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while await settled(service, state) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {await settled(service, state)} of {count} jobs {state}")
        await asyncio.sleep(0.02)


def bench_worker(concurrency: int) -> Worker:
    # One warning per failed job is what a worker should log, but 20,000 of them on the terminal
    # measure the terminal: the benchmark keeps only errors.
    logging.getLogger("redrive.worker").setLevel(logging.ERROR)
    worker = Worker(queues=[QUEUE], concurrency=concurrency, shutdown_timeout=10)

    @worker.handler("bench.noop")
    async def noop(job: Any) -> None:
        return None

    @worker.handler("bench.fail")
    async def fail(job: Any) -> None:
        raise RuntimeError("always fails")

    return worker


async def process(service: Service, source: JobSource, count: int, failing: bool, c: int) -> float:
    """Seconds for a worker on `source` to take `count` waiting jobs to their end state."""
    worker = bench_worker(c)
    started = time.perf_counter()
    running = asyncio.create_task(worker.run(source))
    try:
        await wait_for(service, "discarded" if failing else "completed", count)
        return time.perf_counter() - started
    finally:
        worker.stop()
        await running


async def dead_letters_count(service: Service) -> int:
    return (await service.dead_letters.stats(CALLER)).total


# the server, for the HTTP paths


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@asynccontextmanager
async def server(url: str) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    environment = {
        **os.environ,
        "REDRIVE_DATABASE_URL": url,
        "REDRIVE_PORT": str(port),
        "REDRIVE_LOG_LEVEL": "warning",
    }
    process_ = subprocess.Popen(
        [sys.executable, "-m", "redrive", "serve"],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_healthy(base, process_)
        yield base, process_
    finally:
        process_.send_signal(signal.SIGTERM)
        try:
            process_.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process_.kill()
            process_.wait()


async def _wait_healthy(base: str, process_: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if process_.poll() is not None:
                error = process_.stderr.read().decode() if process_.stderr else ""
                raise RuntimeError(f"redrive serve exited: {error[-2000:]}")
            try:
                if (await client.get(base + "/ojs/v1/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("redrive serve did not become healthy within 30 s")


# one store, every path


@dataclass
class Runs:
    values: dict[str, list[float]] = field(default_factory=dict)
    rss_mb: list[float] = field(default_factory=list)

    def add(self, name: str, jobs_per_second: float) -> None:
        self.values.setdefault(name, []).append(jobs_per_second)


async def embedded_paths(kind: str, settings: Settings, runs: Runs, log: Log) -> None:
    n = settings.jobs
    async with fresh(kind) as url, opened(url) as service:
        seconds = await enqueue(service, n, False, settings.enqueue_batch)
        runs.add("bulk enqueue", n / seconds)
        seconds = await process(service, EmbeddedJobSource(service), n, False, settings.concurrency)
        runs.add("process, ack", n / seconds)
    async with fresh(kind) as url, opened(url) as service:
        await enqueue(service, n, True, settings.enqueue_batch)
        seconds = await process(service, EmbeddedJobSource(service), n, True, settings.concurrency)
        if await dead_letters_count(service) != n:
            raise RuntimeError(
                f"expected {n} dead letters, found {await dead_letters_count(service)}"
            )
        runs.add("process, dead-letter", n / seconds)
    embedded = ("bulk enqueue", "process, ack", "process, dead-letter")
    log(f"{kind} embedded: " + ", ".join(f"{k} {runs.values[k][-1]:,.0f}/s" for k in embedded))


async def http_paths(kind: str, settings: Settings, runs: Runs, log: Log) -> None:
    n = settings.jobs
    for failing, name in ((False, "HTTP process, ack"), (True, "HTTP process, dead-letter")):
        async with fresh(kind) as url:
            async with opened(url) as service:
                await enqueue(service, n, failing, settings.enqueue_batch)
            async with server(url) as (base, process_), opened(url) as service:
                source = HttpJobSource.connect(base)
                seconds = await process(service, source, n, failing, settings.concurrency)
                runs.add(name, n / seconds)
                runs.rss_mb.append(peak_rss_mb(process_.pid))
    log(f"{kind} HTTP: ack {runs.values['HTTP process, ack'][-1]:,.0f}/s, dead-letter "
        f"{runs.values['HTTP process, dead-letter'][-1]:,.0f}/s, server peak RSS "
        f"{max(runs.rss_mb):.0f} MB")  # fmt: skip


async def seed_dead_letters(service: Service, count: int, batch: int) -> None:
    """`count` dead letters the way production makes them: enqueue, fetch, nack, in batches."""
    for offset in range(0, count, batch):
        size = min(batch, count - offset)
        await service.jobs.enqueue_batch(
            CALLER,
            job_requests({"jobs": [job_body(offset + index, True) for index in range(size)]}),
        )
        jobs = await service.workers.fetch(
            CALLER, fetch_request({"queues": [QUEUE], "count": size})
        )
        nacks = [
            {"job_id": job.id, "lease_token": job.lease_token, "error": {"type": "Boom"}}
            for job in jobs
        ]
        await service.workers.nack_many(
            CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
        )


async def explain_incidents(service: Service) -> None:
    """A root cause with a fix for each incident of the queue: the redrive policy's condition
    for a bulk retry (recorded on the template, outside the clock)."""
    written = parse_root_cause({"category": "infrastructure", "root_cause": "the bench",
                                "fix_reference": "bench"})  # fmt: skip
    query = parse_incident_query({"queue": QUEUE, "limit": "500"})
    for incident in await service.incidents.search(CALLER, query):
        await service.incidents.record_root_cause(CALLER, incident.id, written)


async def retry_all(kind: str, settings: Settings, runs: Runs, log: Log) -> None:
    rows = settings.retry_rows
    async with fresh(kind) as template:
        async with opened(template) as service:
            await seed_dead_letters(service, rows, settings.enqueue_batch)
            await explain_incidents(service)
            found = await dead_letters_count(service)
            if found != rows:
                raise RuntimeError(f"seeded {found} dead letters, expected {rows}")
        for _ in range(settings.repeats):
            with copied(template) as url:
                async with opened(url) as service:
                    filters = parse_filter({"queue": QUEUE}, service.now())
                    started = time.perf_counter()
                    result = await service.dead_letters.bulk_retry(
                        CALLER, BulkRequest(filters, confirm=True)
                    )
                    seconds = time.perf_counter() - started
                    available = await settled(service, "available")
                if result.succeeded != rows or available != rows:
                    raise RuntimeError(f"retried {result.succeeded}, {available} available")
                runs.add("retry all dead letters", rows / seconds)
    log(f"{kind} retry all {rows:,}: {runs.values['retry all dead letters'][-1]:,.0f}/s")


def figures_for(kind: str, runs: Runs, settings: Settings) -> list[Figure]:
    figures: list[Figure] = []
    for name, values in runs.values.items():
        summary = repeats(values)
        target = TARGETS.get((kind, name))
        note = f"median of {len(values)}; min {summary['min']:,.0f}, max {summary['max']:,.0f}"
        if name.startswith("HTTP "):
            embedded = runs.values.get(name.removeprefix("HTTP "))
            if embedded:
                target = HTTP_SHARE * repeats(embedded)["median"]
                note += "; target = 50 % of embedded"
        size = settings.retry_rows if name.startswith("retry") else settings.jobs
        figures.append(
            Figure(
                f"{kind}: {name} (N={size:,})",
                summary["median"],
                "jobs/s",
                target,
                note,
                {**summary, "at_least": True},
                at_least=True,
            )
        )
    if runs.rss_mb:
        figures.append(
            Figure(
                f"{kind}: server peak RSS under the HTTP load",
                max(runs.rss_mb),
                "MB",
                SERVER_RSS_MB,
                "VmHWM of the redrive serve process",
                {"values": runs.rss_mb},
            )
        )
    return figures


async def run(settings: Settings, log: Log) -> Outcome:
    outcome = Outcome(details={"settings": settings.__dict__ | {"stores": list(settings.stores)}})
    for kind in settings.stores:
        runs = Runs()
        for attempt in range(settings.repeats):
            log(f"{kind}: repeat {attempt + 1} of {settings.repeats}")
            await embedded_paths(kind, settings, runs, log)
            if settings.http:
                await http_paths(kind, settings, runs, log)
        if settings.retry_rows:
            await retry_all(kind, settings, runs, log)
        outcome.figures.extend(figures_for(kind, runs, settings))
        outcome.details[kind] = {"values": runs.values, "server_rss_mb": runs.rss_mb}
    return outcome
