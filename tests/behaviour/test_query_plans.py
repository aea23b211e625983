"""Plan guards: the hot statements reach the jobs table through the indexes meant for them.

A database is seeded through the service with a few thousand jobs in several queues and every
state, then each named statement (as the store loaded it) is explained with realistic parameters
(the ones the store would send). PostgreSQL is checked after ANALYZE: planned with the values,
prepared and run a few times (asyncpg prepares every statement), and, for the statements whose
path must not depend on the values, as a forced generic plan. SQLite is checked as the server
leaves it (no statistics) and after ANALYZE.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from redrive.api.routes_jobs import job_requests
from redrive.api.worker_requests import (
    ack_request,
    batch_items,
    each_parsed,
    fetch_request,
    nack_request,
)
from redrive.domain import lifecycle
from redrive.domain.caller import SYSTEM
from redrive.domain.dead_letter_filter import parse_filter
from redrive.domain.errors import OjsError
from redrive.domain.job import DEFAULT_TENANT, Job
from redrive.domain.trend import Window, buckets_for
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from redrive.store.codec import dump, job_record
from redrive.store.dead_letters import filter_parameters
from redrive.store.postgres.store import (
    ALL_TENANTS,
    INDEX_ORDER_QUERY,
    TENANT_SETTING,
    PostgresStore,
)
from redrive.store.sqlite.parts import compile_part, split_script
from redrive.store.sqlite.store import SqliteStore
from tests.support.callers import CALLER
from tests.support.clock import ManualClock
from tests.support.postgres import database_from_template

QUEUES = [f"plan-{n}" for n in range(6)]
CLAIM_QUEUE = "plan-2"
BATCH = 1_000
ACTIVE_IN_BATCH = 25


@dataclass(frozen=True)
class Seeded:
    """What a seeded database holds, and the parameters of the statements to explain."""

    location: str
    statements: dict[str, str]
    counts: dict[str, int]
    parameters: dict[str, dict[str, Any]]


def job_bodies(count: int, start: int, **options: Any) -> dict[str, Any]:
    return {
        "jobs": [
            {
                "type": f"plan.kind{index % 4}",
                "args": [index],
                "options": {"queue": QUEUES[index % len(QUEUES)], "priority": index % 3, **options},
            }
            for index in range(start, start + count)
        ]
    }


async def claim_everything(service: Service, expected: int) -> list[str]:
    claimed: list[str] = []
    while len(claimed) < expected:
        jobs = await service.workers.fetch(
            CALLER, fetch_request({"queues": QUEUES, "count": BATCH, "worker_id": "seeder"})
        )
        assert jobs, f"only {len(claimed)} of {expected} jobs could be claimed"
        claimed += [job.id for job in jobs]
    assert len(claimed) == expected
    return claimed


def states_of(outcomes: Sequence[Job | lifecycle.Completed | OjsError]) -> set[str]:
    return {
        outcome.code if isinstance(outcome, OjsError) else outcome.state for outcome in outcomes
    }


async def seed(store: SqliteStore | PostgresStore, location: str) -> Seeded:
    """About 5,000 jobs: mostly completed, some dead, retryable, active, scheduled (a few of them
    due) and available, spread over six queues and three priorities."""
    clock = ManualClock()
    options = ServiceOptions(test_hooks=True)
    service = Service(Runtime(store, clock=clock, options=options, rng=random.Random(17)))
    next_index = 0

    async def enqueue(count: int, **job_options: Any) -> None:
        nonlocal next_index
        while count > 0:
            size = min(count, BATCH)
            await service.jobs.enqueue_batch(
                CALLER, job_requests(job_bodies(size, next_index, **job_options))
            )
            next_index += size
            count -= size

    await enqueue(3_000)
    completed = await claim_everything(service, 3_000)
    for start in range(0, len(completed), BATCH):
        acks = [{"job_id": job_id} for job_id in completed[start : start + BATCH]]
        assert states_of(
            await service.workers.ack_many(
                CALLER, each_parsed(batch_items({"acks": acks}, "acks"), ack_request)
            )
        ) == {"completed"}

    await enqueue(600, retry={"max_attempts": 1, "on_exhaustion": "dead_letter"})
    dead = await claim_everything(service, 600)
    nacks = [{"job_id": job_id, "error": {"type": "Boom", "message": "x"}} for job_id in dead]
    assert states_of(
        await service.workers.nack_many(
            CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
        )
    ) == {"discarded"}

    await enqueue(
        300,
        retry={
            "max_attempts": 5,
            "initial_interval": "PT1H",
            "max_interval": "PT2H",
            "jitter": False,
        },
    )
    retrying = await claim_everything(service, 300)
    nacks = [{"job_id": job_id, "error": {"message": "later"}} for job_id in retrying]
    assert states_of(
        await service.workers.nack_many(
            CALLER, each_parsed(batch_items({"nacks": nacks}, "nacks"), nack_request)
        )
    ) == {"retryable"}

    await enqueue(200)
    active = await claim_everything(service, 200)
    await enqueue(400, scheduled_at="+PT2H")
    await enqueue(60, scheduled_at="+PT1S")
    await enqueue(600)
    clock.advance(5_000)
    now = clock.now_ms()

    async with store.transaction(SYSTEM) as transaction:
        locked = await transaction.lock_jobs(active[:ACTIVE_IN_BATCH], None)
        counts = await transaction.count_jobs(None, None)
    # What complete_jobs receives when a worker acks a batch of its jobs, and update_jobs when
    # a batch's writes are decided in Python (nacks: here the same jobs, acked).
    completions = [
        {"id": job.id, "worker_id": job.worker_id, "lease_token": job.lease_token,
         "result": {"ok": True}, "event_id": f"evt_{job.id}"}
        for job in locked.values()
    ]  # fmt: skip
    records = [
        {
            **job_record(lifecycle.acknowledge(job, now, {"ok": True})),
            "expected_state": job.state,
            "expected_lease_token": job.lease_token,
        }
        for job in locked.values()
    ]
    ids = [record["id"] for record in records]
    is_sqlite = isinstance(store, SqliteStore)
    id_list: Any = json.dumps(ids) if is_sqlite else ids
    # The claim's block heads as their parts (domain.events.BlockHeads): 8 distinct bytes a head.
    claim = {
        "queue": CLAIM_QUEUE, "limit": 10, "worker_id": "w1", "lease_token": "token",
        "visibility_timeout_ms": None, "now": now,
        "head_prefix": "evt_01900000-0000-7000-", "head_randoms": bytes(range(80)),
    }  # fmt: skip
    by_state: dict[str, int] = {}
    for (_, state), count in counts.items():
        by_state[state] = by_state.get(state, 0) + count
    return Seeded(
        location=location,
        # What the SQLite checks explain (PostgreSQL's come from PostgresStore itself).
        statements=dict(store.statements) if isinstance(store, SqliteStore) else {},
        counts=by_state,
        parameters={
            "claim_jobs": {**claim, "tenant_id": None},
            "claim_jobs_for_a_tenant": {**claim, "tenant_id": DEFAULT_TENANT},
            "update_jobs": {"rows": dump(records), "ids": id_list},
            "complete_jobs": {
                "rows": dump(completions),
                "ids": id_list,
                "tenant_id": None,
                "now": now,
                **{**lifecycle.completion(now), "error": None},
            },
            "complete_jobs_for_a_tenant": {
                "rows": dump(completions),
                "ids": id_list,
                "tenant_id": DEFAULT_TENANT,
                "now": now,
                **{**lifecycle.completion(now), "error": None},
            },
            "select_jobs_for_update": {"ids": id_list, "tenant_id": None},
            "select_jobs_for_update_for_a_tenant": {"ids": id_list, "tenant_id": DEFAULT_TENANT},
            "promote_due_jobs": {"now": now, "queues": None},
            "promote_due_jobs_for_a_fetch": {
                "now": now,
                "queues": json.dumps([CLAIM_QUEUE]) if is_sqlite else [CLAIM_QUEUE],
            },
        },
    )


EXPECTED_COUNTS = {
    "completed": 3_000,
    "discarded": 600,
    "retryable": 300,
    "active": 200,
    "scheduled": 460,
    "available": 600,
}


def statement_name(case: str) -> str:
    return case.removesuffix("_for_a_tenant").removesuffix("_for_a_fetch")


# --- PostgreSQL -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seeded_postgres(postgres_template: str) -> Iterator[Seeded]:
    with database_from_template(postgres_template) as url:

        async def run() -> Seeded:
            store = PostgresStore(url, max_size=2)
            try:
                return await seed(store, url)
            finally:
                await store.close()

        seeded = asyncio.run(run())
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("ANALYZE")
        yield seeded


def plan_nodes(node: object) -> Iterator[dict[str, Any]]:
    """Every plan node of an EXPLAIN (FORMAT JSON) document, depth first."""
    if isinstance(node, dict):
        if "Node Type" in node:
            yield node
        for value in node.values():
            yield from plan_nodes(value)
    elif isinstance(node, list):
        for item in node:
            yield from plan_nodes(item)


def jobs_scans(plan: object) -> list[str]:
    """The node types of the scans that read the jobs table (the UPDATE node itself aside)."""
    return [
        node["Node Type"]
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "jobs" and node["Node Type"] != "ModifyTable"
    ]


def index_names(plan: object) -> set[str]:
    return {node["Index Name"] for node in plan_nodes(plan) if "Index Name" in node}


def explain_postgres(url: str, name: str, parameters: dict[str, Any], mode: str) -> Any:
    """The JSON plan of a named statement, as loaded by PostgresStore and prepared (asyncpg
    prepares every statement it runs).

    A statement of INDEX_ORDER is planned with bitmap scans off, as the store's transactions
    run it.

    custom: planned with the values bound (plan_cache_mode force_custom_plan), as the store's
      transactions run the statements of CUSTOM_PLANS, and as any statement's first runs are.
    prepared: run a few times (rolled back), then explained: the plan the server keeps for a
      statement the application runs often (custom or generic, as the plan cache decides).
    generic: the generic plan, whatever the values (the worst a prepared statement can get).
    """
    (statement,) = PostgresStore(url).scripts[name]
    with psycopg.connect(url, autocommit=True) as connection:
        # As the server runs it: the application role, bound by row-level security, in the
        # statement's tenant (or across tenants, as the server's own work).
        connection.execute("SET ROLE redrive_app")
        tenant = parameters.get("tenant_id") or ALL_TENANTS
        connection.execute("SELECT set_config(%s, %s, false)", (TENANT_SETTING, tenant))
        if statement.index_order:  # (the store's SET LOCAL, for the session: autocommit here)
            connection.execute(INDEX_ORDER_QUERY.replace("SET LOCAL", "SET"))
        connection.execute(f"PREPARE probe AS {statement.sql}")
        values = psycopg.sql.SQL(", ").join(
            psycopg.sql.Literal(value) for value in statement.arguments(parameters)
        )
        execute = psycopg.sql.SQL("EXECUTE probe ({})").format(values)
        explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + execute
        if mode in ("custom", "generic"):
            connection.execute(f"SET plan_cache_mode = force_{mode}_plan")
            row = connection.execute(explain).fetchone()
        else:
            assert mode == "prepared"
            # Each run rolled back on its own: a claim's runs would repeat its event ids.
            for _ in range(8):
                with connection.transaction(force_rollback=True):
                    connection.execute(execute)
            row = connection.execute(explain).fetchone()
    assert row is not None
    return row[0]


POSTGRES_INDEX = {
    "claim_jobs": "jobs_claim",
    "claim_jobs_for_a_tenant": "jobs_claim",
    "update_jobs": "jobs_pkey",
    "complete_jobs": "jobs_pkey",
    "complete_jobs_for_a_tenant": "jobs_pkey",
    "select_jobs_for_update": "jobs_pkey",
    "select_jobs_for_update_for_a_tenant": "jobs_pkey",
    "promote_due_jobs": "jobs_due",
    "promote_due_jobs_for_a_fetch": "jobs_due",
}
# Statements whose access path must not depend on the values at all (update_jobs says so).
GENERIC_SAFE = ["claim_jobs", "select_jobs_for_update", "update_jobs", "complete_jobs"]


def assert_index_access(plan: Any, index: str) -> None:
    scans = jobs_scans(plan)
    shown = json.dumps(plan, indent=1)
    assert scans, shown
    assert "Seq Scan" not in scans, shown
    assert set(scans) <= {"Index Scan", "Index Only Scan", "Bitmap Heap Scan"}, shown
    assert index in index_names(plan), shown


@pytest.mark.postgres
def test_the_postgres_seed_is_what_the_guards_assume(seeded_postgres: Seeded) -> None:
    assert seeded_postgres.counts == EXPECTED_COUNTS


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["custom", "prepared"])
@pytest.mark.parametrize("case", sorted(POSTGRES_INDEX))
def test_postgres_statement_uses_its_index(seeded_postgres: Seeded, case: str, mode: str) -> None:
    parameters = seeded_postgres.parameters[case]
    plan = explain_postgres(seeded_postgres.location, statement_name(case), parameters, mode)
    assert_index_access(plan, POSTGRES_INDEX[case])


@pytest.mark.postgres
@pytest.mark.parametrize("case", GENERIC_SAFE)
def test_postgres_generic_plan_still_uses_the_index(seeded_postgres: Seeded, case: str) -> None:
    parameters = seeded_postgres.parameters[case]
    plan = explain_postgres(seeded_postgres.location, case, parameters, "generic")
    assert_index_access(plan, POSTGRES_INDEX[case])


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["custom", "prepared", "generic"])
def test_postgres_claim_reads_the_queue_in_index_order(seeded_postgres: Seeded, mode: str) -> None:
    """The claim takes its few jobs off the front of jobs_claim: no sort of the whole queue."""
    plan = explain_postgres(
        seeded_postgres.location, "claim_jobs", seeded_postgres.parameters["claim_jobs"], mode
    )
    shown = json.dumps(plan, indent=1)
    # (The claimed jobs' events are numbered in claim order: a sort of those few, not of jobs.)
    sorts = [node for node in plan_nodes(plan) if node["Node Type"] == "Sort"]
    assert not [sort for sort in sorts if jobs_scans(sort)], shown
    claim_scans = [n for n in plan_nodes(plan) if n.get("Index Name") == "jobs_claim"]
    assert [node["Node Type"] for node in claim_scans] == ["Index Scan"], shown


# A backlog the planner has no statistics for: 100,000 available jobs of ~1 KB each, enqueued
# in one burst since the table was created (autovacuum has not analysed it yet). Planned for a
# handful of rows, a claim read every one of them through a bitmap scan and sorted them all.
BACKLOG = 100_000


@pytest.fixture(scope="module")
def backlog_postgres(postgres_template: str) -> Iterator[str]:
    with database_from_template(postgres_template) as url:
        with psycopg.connect(url, autocommit=True) as connection:
            # (Autovacuum would analyse the table within a minute or so: kept off on this copy.)
            connection.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
            connection.execute(
                "INSERT INTO jobs (id, tenant_id, queue, type, state, max_attempts, envelope,"
                " visibility_timeout_ms, created_at)"
                " SELECT 'job' || lpad(n::text, 8, '0'), %s, %s, 'mail.send', 'available', 3,"
                " jsonb_build_object('args', jsonb_build_array(repeat(md5(n::text), 31))),"
                " 60000, 1 FROM generate_series(1, %s) AS n",
                (DEFAULT_TENANT, CLAIM_QUEUE, BACKLOG),
            )
        yield url


@pytest.mark.postgres
@pytest.mark.parametrize("tenant_id", [None, DEFAULT_TENANT])
def test_postgres_claim_walks_an_unanalysed_backlog_in_index_order(
    backlog_postgres: str, tenant_id: str | None
) -> None:
    """A claim on a backlog the planner has no statistics for takes its jobs off the front of
    jobs_claim (as the store runs it: bitmap scans off), not by sorting the whole backlog."""
    parameters = {
        "queue": CLAIM_QUEUE, "limit": 100, "worker_id": "w1", "lease_token": "token",
        "visibility_timeout_ms": None, "now": 10, "tenant_id": tenant_id,
        "head_prefix": "evt_01900000-0000-7000-", "head_randoms": bytes(range(256)) * 4,
    }  # fmt: skip
    with psycopg.connect(backlog_postgres, autocommit=True) as connection:
        row = connection.execute("SELECT reltuples FROM pg_class WHERE relname = 'jobs'").fetchone()
    assert row is not None and row[0] < 0  # never analysed: the case this guards
    plan = explain_postgres(backlog_postgres, "claim_jobs", parameters, "custom")
    shown = json.dumps(plan, indent=1)
    sorts = [node for node in plan_nodes(plan) if node["Node Type"] == "Sort"]
    assert not [sort for sort in sorts if jobs_scans(sort)], shown
    claim_scans = [n for n in plan_nodes(plan) if n.get("Index Name") == "jobs_claim"]
    assert [node["Node Type"] for node in claim_scans] == ["Index Scan"], shown


@pytest.mark.postgres
@pytest.mark.parametrize("state", ["scheduled", "retryable", "discarded"])
def test_postgres_job_count_of_a_queue_and_state_reads_the_tenant_index(
    seeded_postgres: Seeded, state: str
) -> None:
    """jobs_tenant holds every state but available (0045): a tenant's count of one queue's jobs
    in any other state still reads it, and an available one's reads jobs_claim."""
    parameters = {"tenant_id": DEFAULT_TENANT, "queue": QUEUES[0], "state": state, "type": None}
    plan = explain_postgres(seeded_postgres.location, "count_jobs", parameters, "custom")
    assert_index_access(plan, "jobs_tenant")
    available = {**parameters, "state": "available"}
    plan = explain_postgres(seeded_postgres.location, "count_jobs", available, "custom")
    assert_index_access(plan, "jobs_claim")


# --- SQLite -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seeded_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    path = str(tmp_path_factory.mktemp("plans") / "redrive.db")

    async def run() -> Seeded:
        store = SqliteStore(path)
        await store.migrate()
        try:
            return await seed(store, path)
        finally:
            await store.close()

    return asyncio.run(run())


@pytest.fixture(params=["as_served", "analyzed"])
def sqlite_database(
    request: pytest.FixtureRequest, seeded_sqlite: Seeded, tmp_path: Path
) -> Iterator[sqlite3.Connection]:
    """A connection to a copy of the seeded database, with statistics or without."""
    source = sqlite3.connect(seeded_sqlite.location)
    connection = sqlite3.connect(tmp_path / "copy.db")
    source.backup(connection)
    source.close()
    stat_tables = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'sqlite_stat1'"
    assert connection.execute(stat_tables).fetchone() == (0,)
    if request.param == "analyzed":
        connection.execute("ANALYZE")
    yield connection
    connection.close()


def explain_sqlite(
    connection: sqlite3.Connection, sql: str, parameters: dict[str, Any]
) -> list[str]:
    """The detail column of EXPLAIN QUERY PLAN, one line per step, of each statement of the
    script as the store runs it (one that reads `:rows->>field` runs once per element: its
    first one here). A temporary table the script makes is made, for the statements after it."""
    details = []
    for statement in split_script(sql):
        part = compile_part(statement)
        bound = part.bindings(parameters)[0]
        if part.sql.startswith("CREATE TEMP TABLE"):
            connection.execute(part.sql)
            continue
        explained = connection.execute("EXPLAIN QUERY PLAN " + part.sql, bound)
        details += [str(row[3]) for row in explained]
    return details


SQLITE_INDEX = {
    "claim_jobs": "jobs_claim",
    "claim_jobs_for_a_tenant": "jobs_claim",
    "update_jobs": "sqlite_autoindex_jobs_1",
    "complete_jobs": "sqlite_autoindex_jobs_1",
    "complete_jobs_for_a_tenant": "sqlite_autoindex_jobs_1",
    "select_jobs_for_update": "sqlite_autoindex_jobs_1",
    "select_jobs_for_update_for_a_tenant": "sqlite_autoindex_jobs_1",
    "promote_due_jobs": "jobs_due",
    "promote_due_jobs_for_a_fetch": "jobs_due",
}


def test_the_sqlite_seed_is_what_the_guards_assume(seeded_sqlite: Seeded) -> None:
    assert seeded_sqlite.counts == EXPECTED_COUNTS


@pytest.mark.parametrize("case", sorted(SQLITE_INDEX))
def test_sqlite_statement_uses_its_index(
    sqlite_database: sqlite3.Connection, seeded_sqlite: Seeded, case: str
) -> None:
    sql = seeded_sqlite.statements[statement_name(case)]
    details = explain_sqlite(sqlite_database, sql, seeded_sqlite.parameters[case])
    shown = "\n".join(details)
    on_jobs = [d for d in details if re.match(r"(SCAN|SEARCH) jobs\b", d)]
    assert on_jobs, shown
    # SCAN is a full pass over the table (or over a whole index); every access must be a SEARCH.
    assert all(d.startswith("SEARCH jobs ") for d in on_jobs), shown
    index = SQLITE_INDEX[case]
    assert any(re.search(rf"USING (COVERING )?INDEX {index} \(", d) for d in on_jobs), shown
    if statement_name(case) == "claim_jobs":
        # The pick (the statement keeping it in temp.claimed) takes the queue's front in index
        # order; the events after it number those few jobs in claim order (a sort of them, not
        # of the queue).
        (pick,) = [part for part in split_script(sql) if part.startswith("INSERT INTO temp.")]
        claim = explain_sqlite(sqlite_database, pick, seeded_sqlite.parameters[case])
        assert not any("TEMP B-TREE" in d for d in claim), shown


@pytest.mark.parametrize("case", ["complete_jobs", "complete_jobs_for_a_tenant"])
def test_sqlite_ack_finds_each_job_by_id_once(
    sqlite_database: sqlite3.Connection, seeded_sqlite: Seeded, case: str
) -> None:
    """The ack's temporary table keeps each acked job's sequence, looked up by id as the table
    is filled: its event rows, its read and its update then find the job by its rowid."""
    sql = seeded_sqlite.statements[statement_name(case)]
    details = explain_sqlite(sqlite_database, sql, seeded_sqlite.parameters[case])
    shown = "\n".join(details)
    on_jobs = [d for d in details if re.match(r"(SCAN|SEARCH) jobs\b", d)]
    by_id = [d for d in on_jobs if "sqlite_autoindex_jobs_1" in d]
    assert by_id == ["SEARCH jobs USING COVERING INDEX sqlite_autoindex_jobs_1 (id=?)"], shown
    assert len(on_jobs) > 3, shown
    rest = [d for d in on_jobs if d not in by_id]
    assert all(d == "SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)" for d in rest), shown


def test_sqlite_incident_trends_read_only_their_index(
    sqlite_database: sqlite3.Connection, seeded_sqlite: Seeded
) -> None:
    """A page of incidents' trends: a covering range search per incident, no table read."""
    sql = seeded_sqlite.statements["count_incident_arrivals"]
    ids = [row[0] for row in sqlite_database.execute("SELECT id FROM incidents")]
    assert ids
    buckets = buckets_for(Window.DAY, ManualClock().now_ms())
    for tenant in (DEFAULT_TENANT, None):
        parameters = {"ids": json.dumps(ids), "tenant_id": tenant, "start": buckets.start,
                      "end": buckets.end, "width": buckets.width}  # fmt: skip
        details = explain_sqlite(sqlite_database, sql, parameters)
        on_snapshots = [d for d in details if re.match(r"(SCAN|SEARCH) dead_letter_snapshots\b", d)]
        assert on_snapshots == [
            "SEARCH dead_letter_snapshots USING COVERING INDEX "
            "dead_letter_snapshots_incident_arrivals "
            "(incident_id=? AND discarded_at>? AND discarded_at<?)"
        ], "\n".join(details)


@pytest.mark.parametrize("tenant", [DEFAULT_TENANT, None])
@pytest.mark.parametrize("queue", [QUEUES[0], None])
def test_sqlite_job_counts_read_each_state_along_its_index(
    sqlite_database: sqlite3.Connection,
    seeded_sqlite: Seeded,
    tenant: str | None,
    queue: str | None,
) -> None:
    """jobs_tenant holds neither available nor active jobs (0047): the count by queue and state
    reads it whole as a covering index (its WHERE repeated), available jobs along jobs_claim and
    active ones along jobs_timeout, never the table itself."""
    sql = seeded_sqlite.statements["count_jobs_by_queue_and_state"]
    details = explain_sqlite(sqlite_database, sql, {"tenant_id": tenant, "queue": queue})
    on_jobs = [d for d in details if re.match(r"(SCAN|SEARCH) jobs\b", d)]
    assert on_jobs == [
        "SCAN jobs USING COVERING INDEX jobs_tenant",
        "SCAN jobs USING INDEX jobs_claim",
        "SCAN jobs USING INDEX jobs_timeout",
    ], "\n".join(details)


# A month of dead letters, one every 90 s, over 200 incidents (a tenth of them another tenant's,
# a third retried since): what a trend reads on a server that has run for a while.
TREND_ROWS = 30_000
TREND_SEED = """
INSERT INTO dead_letters (id, job_id, tenant_id, queue, type, reason, discarded_at, status,
                          incident_id)
SELECT 'dl' || n, 'job' || n, CASE WHEN n %% 10 = 0 THEN 'other' ELSE %(tenant)s END,
       'q' || (n %% 20), 't' || (n %% 50), 'max_attempts',
       CAST(%(now)s AS bigint) - n * CAST(90000 AS bigint),
       CASE WHEN n %% 3 = 0 THEN 'retried' ELSE 'dead' END,
       'inc_' || lpad(to_hex(n %% 200), 24, '0')
FROM generate_series(1, %(rows)s) AS n
"""
# Their snapshots, which carry the arrival indexes (migration 0028).
TREND_SNAPSHOTS = """
INSERT INTO dead_letter_snapshots (id, tenant_id, job, job_id, queue, discarded_at, incident_id)
SELECT id, tenant_id, CAST('{}' AS jsonb), job_id, queue, discarded_at, incident_id
FROM dead_letters
"""


@pytest.fixture(scope="module")
def trend_postgres(postgres_template: str) -> Iterator[str]:
    with database_from_template(postgres_template) as url:
        with psycopg.connect(url, autocommit=True) as connection:
            values = {"tenant": DEFAULT_TENANT, "now": ManualClock().now_ms(), "rows": TREND_ROWS}
            connection.execute(TREND_SEED, values)
            connection.execute(TREND_SNAPSHOTS)
            # as autovacuum leaves them
            connection.execute("VACUUM (ANALYZE) dead_letters, dead_letter_snapshots")
        yield url


@pytest.mark.postgres
@pytest.mark.parametrize("window", list(Window))
@pytest.mark.parametrize("mode", ["custom", "prepared", "generic"])
def test_postgres_incident_trends_read_only_their_index(
    trend_postgres: str, mode: str, window: Window
) -> None:
    """A page of 50 incidents' trends: an index-only range scan of
    dead_letter_snapshots_incident_arrivals, and the tombstones' status-and-time index (pruned dead
    letters still arrived), whatever the plan cache does."""
    ids = ["inc_" + format(number, "024x") for number in range(50)]
    buckets = buckets_for(window, ManualClock().now_ms())
    parameters = {"ids": ids, "tenant_id": DEFAULT_TENANT, "start": buckets.start,
                  "end": buckets.end, "width": buckets.width}  # fmt: skip
    plan = explain_postgres(trend_postgres, "count_incident_arrivals", parameters, mode)
    shown = json.dumps(plan, indent=1)
    scans = [
        node for node in plan_nodes(plan) if node.get("Relation Name") == "dead_letter_snapshots"
    ]
    assert [node["Node Type"] for node in scans] == ["Index Only Scan"], shown
    tombstones = [
        node for node in plan_nodes(plan) if node.get("Relation Name") == "dead_letter_tombstones"
    ]
    assert tombstones and all(node["Node Type"] != "Seq Scan" for node in tombstones), shown
    assert index_names(plan) == {
        "dead_letter_snapshots_incident_arrivals",
        "dead_letter_tombstones_by_time",
    }, shown


# A bulk retry's set as the peers benchmark leaves it: 20,000 dead letters of one type, each in an
# incident, freshly written (no statistics yet).
UNEXPLAINED_ROWS = 20_000
UNEXPLAINED_SEED = """
INSERT INTO dead_letters (id, job_id, tenant_id, queue, type, reason, discarded_at, status,
                          incident_id)
SELECT 'dl' || n, 'job' || n, %(tenant)s, 'default', 'bench.fail', 'max_attempts',
       CAST(%(now)s AS bigint) - n, 'dead', 'inc_1'
FROM generate_series(1, %(rows)s) AS n
"""


@pytest.fixture(scope="module")
def unexplained_postgres(postgres_template: str) -> Iterator[str]:
    with database_from_template(postgres_template) as url:
        with psycopg.connect(url, autocommit=True) as connection:
            values = {"tenant": DEFAULT_TENANT, "now": ManualClock().now_ms(),
                      "rows": UNEXPLAINED_ROWS}  # fmt: skip
            connection.execute(UNEXPLAINED_SEED, values)
        yield url


@pytest.mark.postgres
def test_postgres_redrive_check_finds_dead_letters_in_no_incident_by_their_index(
    unexplained_postgres: str,
) -> None:
    """The redrive policy's check by filter (run twice by a bulk retry) stops at an incident's
    first match (an index scan, no bitmap of every match) and looks for matches in no incident
    through dead_letters_by_incident (`incident_id IS NULL`), without statistics and with them."""
    filters = parse_filter({"type": "bench.fail"}, ManualClock().now_ms()).scoped(DEFAULT_TENANT)
    parameters = {"limit": 11, **filter_parameters(filters)}
    for analyzed in (False, True):
        if analyzed:
            with psycopg.connect(unexplained_postgres, autocommit=True) as connection:
                connection.execute("ANALYZE dead_letters")
        plan = explain_postgres(
            unexplained_postgres, "select_unexplained_incidents", parameters, "custom"
        )
        shown = json.dumps(plan, indent=1)
        probes = [
            node for node in plan_nodes(plan)
            if "incident_id IS NULL" in node.get("Index Cond", "")
            or "incident_id IS NULL" in node.get("Filter", "")
        ]  # fmt: skip
        assert [node.get("Index Name") for node in probes] == ["dead_letters_by_incident"], shown
        assert "incident_id IS NULL" in probes[0]["Index Cond"], shown
        scans = [
            node["Node Type"] for node in plan_nodes(plan)
            if node.get("Relation Name") == "dead_letters"
        ]  # fmt: skip
        assert scans == ["Index Scan", "Index Scan"], shown


# A burst as the periodic reads meet it before anything analyses the tables (autovacuum's analyse
# runs minutes later, or never where it is off): 100,000 events, 100,000 webhook delivery records
# and 40,000 dead letters' snapshots (each holding a job of about 1.2 kB, as the peer benchmark's
# do: the planner guesses a table's rows from its pages), all recent, never analysed.
BURST_ROWS = 100_000
BURST_SEED = """
ALTER TABLE events SET (autovacuum_enabled = false);
ALTER TABLE dead_letter_snapshots SET (autovacuum_enabled = false);
ALTER TABLE webhook_deliveries SET (autovacuum_enabled = false);
INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, job_id, event_id, event_type,
                                attempt, status, response_status, duration_ms, time)
SELECT 'wd' || n, %(tenant)s, 'sub', 'job' || n, 'evt_' || n, 'job.completed', 1, 'delivered',
       200, 5, %(now)s
FROM generate_series(1, %(rows)s) AS n;
INSERT INTO events (id, tenant_id, type, time, data)
SELECT 'evt_' || n, %(tenant)s, 'job.enqueued', %(now)s, '{}'
FROM generate_series(1, %(rows)s) AS n;
INSERT INTO dead_letter_snapshots (id, tenant_id, job, job_id, queue, discarded_at, aggregate_key)
SELECT 'dl' || n, %(tenant)s, jsonb_build_object('args', repeat('x', 1200)), 'job' || n,
       'default', %(now)s, 'key' || mod(n, 50)
FROM generate_series(1, %(rows)s * 2 / 5) AS n;
"""
# PostgreSQL compiles a plan estimated above jit_above_cost (100,000 by default): 20 ms of JIT
# on each run of a statement that reads a few index pages.
JIT_ABOVE_COST = 100_000


@pytest.fixture(scope="module")
def burst_postgres(postgres_template: str) -> Iterator[str]:
    with database_from_template(postgres_template) as url:
        with psycopg.connect(url, autocommit=True) as connection:
            values = {"tenant": DEFAULT_TENANT, "now": ManualClock().now_ms(), "rows": BURST_ROWS}
            for statement in BURST_SEED.strip().split(";\n"):
                connection.execute(statement, values)
        yield url


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["custom", "prepared", "generic"])
def test_postgres_event_trim_reads_only_what_it_deletes_without_statistics(
    burst_postgres: str, mode: str
) -> None:
    """The sweep's event trim, with nothing old enough to go, reads a range of events_pkey, not
    the whole table."""
    before = ManualClock().now_ms() - 3_600_000
    plan = explain_postgres(burst_postgres, "delete_events_before", {"before": before}, mode)
    shown = json.dumps(plan, indent=1)
    scans = [
        node["Node Type"] for node in plan_nodes(plan)
        if node.get("Relation Name") == "events" and node["Node Type"] != "ModifyTable"
    ]  # fmt: skip
    assert scans, shown
    assert "Seq Scan" not in scans, shown
    assert index_names(plan) == {"events_pkey"}, shown


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["custom", "prepared", "generic"])
def test_postgres_aggregate_alert_check_is_not_compiled_without_statistics(
    burst_postgres: str, mode: str
) -> None:
    """The alert check's aggregate counts, with no recent arrival, read the arrivals index for
    a few rows and are estimated so (not a third of the table, which priced the plan above
    jit_above_cost and compiled it on every check)."""
    since = ManualClock().now_ms() + 60_000
    parameters = {"since": since, "at_least": 10}
    plan = explain_postgres(burst_postgres, "select_aggregate_counts", parameters, mode)
    shown = json.dumps(plan, indent=1)
    assert plan[0]["Plan"]["Total Cost"] < JIT_ABOVE_COST, shown
    assert "dead_letter_snapshots_arrivals" in index_names(plan), shown


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["custom", "prepared", "generic"])
def test_postgres_webhook_log_trim_walks_its_time_index_without_statistics(
    burst_postgres: str, mode: str
) -> None:
    """The sweep's delivery-record trim, with nothing old enough to go, takes its batch off the
    old end of webhook_deliveries_time and stops, not reading the table for :limit matches."""
    parameters = {"before": ManualClock().now_ms() - 3_600_000, "limit": 200}
    plan = explain_postgres(burst_postgres, "delete_webhook_deliveries_before", parameters, mode)
    shown = json.dumps(plan, indent=1)
    scans = [
        node["Node Type"] for node in plan_nodes(plan)
        if node.get("Relation Name") == "webhook_deliveries" and node["Node Type"] != "ModifyTable"
    ]  # fmt: skip
    assert "Seq Scan" not in scans, shown
    assert "webhook_deliveries_time" in index_names(plan), shown
