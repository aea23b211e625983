"""Seeding dead letters fast: rows rendered from codec-made templates and streamed with COPY."""

from __future__ import annotations

import dataclasses
import random
import re
import time
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import asyncpg
import psycopg

from redrive.domain.dead_letter import new_dead_letter
from redrive.domain.durations import format_timestamp
from redrive.domain.envelope import EnqueueContext, validate_envelope
from redrive.domain.fingerprint import (
    DEFAULT_FINGERPRINTER,
    FINGERPRINT_VERSION,
    Fingerprint,
    incident_id,
)
from redrive.domain.identifiers import uuid7
from redrive.domain.incident import IncidentEntry, arrival
from redrive.domain.job import DEFAULT_TENANT, DISCARDED, Job
from redrive.domain.lifecycle import Failure, error_record
from redrive.domain.retry import RetryPolicy
from redrive.store.codec import dead_letter_record, dump, incident_entry_record, job_parameters
from redrive.store.postgres.statements import load_scripts
from redrive.store.postgres.store import HERE as POSTGRES_STATEMENTS

DAY_MS = 86_400_000
SPAN_DAYS = 200
# Every seeded dead letter is at least this old, so a max_age of P1D prunes all of them.
NEWEST_AGE_MS = DAY_MS + 3_600_000
RETRY_QUEUE = "payments"  # holds exactly every tenth row: the bulk-retry target

# 20 queues, 50 job types; each type lives in one queue.
CATALOGUE: dict[str, tuple[str, ...]] = {
    "payments": ("payment.charge", "payment.refund", "payment.capture", "payment.payout"),
    "emails": ("email.send", "email.digest", "email.bounce_check"),
    "sms": ("sms.send", "sms.verify"),
    "push": ("push.send", "push.fanout"),
    "webhooks": ("webhook.deliver", "webhook.sign"),
    "invoices": ("invoice.generate", "invoice.finalize", "invoice.send"),
    "orders": ("order.fulfil", "order.cancel", "order.sync"),
    "inventory": ("inventory.reserve", "inventory.release", "inventory.recount"),
    "shipping": ("shipping.label", "shipping.track"),
    "search": ("search.index", "search.reindex", "search.delete"),
    "reports": ("report.daily", "report.export_csv", "report.monthly"),
    "media": ("image.resize", "video.transcode", "image.thumbnail"),
    "imports": ("import.csv", "import.shopify"),
    "exports": ("export.warehouse", "export.gdpr"),
    "crm": ("crm.sync_contact", "crm.sync_deal"),
    "analytics": ("analytics.track", "analytics.rollup"),
    "auth": ("auth.password_reset", "auth.session_cleanup"),
    "billing": ("billing.usage_sync", "billing.dunning", "billing.plan_change"),
    "notifications": ("notification.route", "notification.digest"),
    "default": ("cache.warm", "audit.log"),
}
# error type -> (weight, message)
ERRORS: dict[str, tuple[int, str]] = {
    "TimeoutError": (22, "upstream did not answer within 30s"),
    "ConnectionError": (16, "connection reset by peer"),
    "ValidationError": (14, "args[0].amount must be a positive integer"),
    "RateLimitError": (12, "429 Too Many Requests from the provider"),
    "NotFoundError": (9, "customer record not found"),
    "UpstreamUnavailable": (8, "503 Service Unavailable"),
    "PaymentDeclined": (7, "card declined: insufficient funds"),
    "PermissionDenied": (5, "API key lacks the write scope"),
    "SerializationError": (4, "could not encode result as JSON"),
    "DeadlockDetected": (3, "deadlock detected while updating the ledger"),
}
# errors in the history -> weight; fewer than max_attempts means the last one was non-retryable
HISTORY_WEIGHTS = {1: 20, 2: 10, 3: 70}
MAX_ATTEMPTS = 3
WORKERS = tuple(f"worker-{n:02d}" for n in range(12))
CUSTOMERS = 250_000

# Fields a template leaves open. Quoted string fields keep their quotes; the rest are raw JSON.
_SLOT = re.compile(r'"@@(\w+)@@"|@@(\w+)@@')
STRING_FIELDS = frozenset({"JOB_ID", "WORKER", "TRACE", "AT"})
DEAD_LETTER_COLUMNS = (
    "id", "job_id", "tenant_id", "queue", "type", "error_type", "reason", "discarded_at",
    "status", "moved_at", "moved_by", "args", "replay_count", "fingerprint",
    "fingerprint_version", "incident_id", "aggregate_key",
)  # fmt: skip
# dead_letter_snapshots (migration 0025), with the columns its arrival indexes read (0028)
SNAPSHOT_COLUMNS = (
    "id", "tenant_id", "job", "job_id", "queue", "discarded_at", "incident_id", "aggregate_key",
)  # fmt: skip


class Template:
    """Text with `@@NAME@@` holes, rendered by joining literal parts and values."""

    def __init__(self, text: str, separator: str = "") -> None:
        cells = text.split(separator) if separator else [text]
        for bad in ("\\", "\t", "\n", "\r"):
            if any(bad in cell for cell in cells):
                raise ValueError(f"template text needs COPY escaping ({bad!r}): {text[:80]}")
        text = text.replace("@@NULL@@", "\\N")
        self.literals: list[str] = []
        self.names: list[str] = []
        position, carried = 0, ""
        for match in _SLOT.finditer(text):
            name = match.group(1) or match.group(2)
            literal = carried + text[position : match.start()]
            carried = ""
            if match.group(1) and name in STRING_FIELDS:
                literal += '"'
                carried = '"'
            self.literals.append(literal)
            self.names.append(name)
            position = match.end()
        self.literals.append(carried + text[position:])

    def render(self, values: dict[str, str]) -> str:
        parts = [self.literals[0]]
        for name, literal in zip(self.names, self.literals[1:], strict=True):
            parts.append(values[name])
            parts.append(literal)
        return "".join(parts)


def _copy_text(value: Any) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)


def _template_line(columns: dict[str, Any]) -> Template:
    """One COPY text line: tab-separated cells, NULL as \\N."""
    cells = ["@@NULL@@" if value is None else _copy_text(value) for value in columns.values()]
    return Template("\t".join(cells), separator="\t")


@dataclass
class TypeTemplates:
    """For one job type: the jobs row, the dead_letters row and its snapshot's row, with per-row
    holes."""

    job_type: str
    queue: str
    jobs_line: Template
    dead_letter_line: Template
    snapshot_line: Template
    jobs_columns: list[str]


def template_job(job_type: str, queue: str, now: int) -> Job:
    """A job as the server holds it after its last failed attempt, with holes for what varies."""
    body = {
        "type": job_type,
        "args": [{"customer_id": "cust_1", "amount": 1}],
        "meta": {"trace_id": "0"},
        "options": {
            "queue": queue,
            "retry": {"max_attempts": MAX_ATTEMPTS, "on_exhaustion": "dead_letter"},
        },
    }
    context = EnqueueContext(
        now_ms=now, generated_id=uuid7(now, 0), tenant=None, default_retry=RetryPolicy()
    )
    job = validate_envelope(body, context)
    holes: dict[str, Any] = {
        "id": "@@JOB_ID@@",
        "args": "@@ARGS@@",
        "meta": {"trace_id": "@@TRACE@@"},
        "state": DISCARDED,
        "sequence": "@@SEQUENCE@@",
        "attempt": "@@ATTEMPT@@",
        "created_at": "@@CREATED_AT@@",
        "enqueued_at": "@@ENQUEUED_AT@@",
        "started_at": "@@STARTED_AT@@",
        "completed_at": "@@DISCARDED_AT@@",
        "discarded_at": "@@DISCARDED_AT@@",
        "worker_id": "@@WORKER@@",
        "error": "@@ERROR@@",
        "errors": "@@ERRORS@@",
        "dead_lettered": True,
    }
    return dataclasses.replace(job, **holes)


def type_templates(job_type: str, queue: str, now: int) -> TypeTemplates:
    job = template_job(job_type, queue, now)
    jobs_row = job_parameters(job)
    # new_dead_letter reads the error type off job.error; the column is a hole as well, and so
    # are the fingerprint and the incident (one per job type and error type).
    probe = dataclasses.replace(job, error={"type": "@@ERROR_TYPE@@"})
    fingerprint = Fingerprint("@@FINGERPRINT@@", FINGERPRINT_VERSION, None, "")
    episode = dataclasses.replace(
        new_dead_letter("@@EPISODE_ID@@", probe, "@@REASON@@", now, fingerprint),
        job=job,
        incident_id="@@INCIDENT_ID@@",
    )
    record = dead_letter_record(episode)
    snapshot_job = dump(record.pop("job"))
    if not set(record) <= set(DEAD_LETTER_COLUMNS):
        raise RuntimeError(f"dead_letter_record changed its columns: {list(record)}")
    # The record leaves its null fields out (the move, the aggregate key): NULL columns here.
    dead_row = {name: record.get(name) for name in DEAD_LETTER_COLUMNS}
    snapshot_row = {"id": dead_row["id"], "tenant_id": dead_row["tenant_id"], "job": snapshot_job}
    snapshot_row.update({name: dead_row[name] for name in SNAPSHOT_COLUMNS[3:]})
    return TypeTemplates(
        job_type=job_type,
        queue=queue,
        jobs_line=_template_line(jobs_row),
        dead_letter_line=_template_line(dead_row),
        snapshot_line=_template_line(snapshot_row),
        jobs_columns=list(jobs_row),
    )


def error_templates(now: int) -> dict[tuple[str, bool], Template]:
    """One error record per (error type, retryable), made by lifecycle.error_record."""
    templates: dict[tuple[str, bool], Template] = {}
    for error_type, (_, message) in ERRORS.items():
        for retryable in (True, False):
            failure = Failure(
                code="handler_error", message=message, type=error_type, retryable=retryable
            )
            record = error_record(failure, 1, now)
            record.update(attempt="@@ATTEMPT@@", occurred_at="@@AT@@", timestamp="@@AT@@")
            templates[(error_type, retryable)] = Template(dump(record) or "")
    return templates


@dataclass
class SeedPlan:
    rows: int
    seed: int = 20_240_601
    now: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    @property
    def oldest(self) -> int:
        return self.now - SPAN_DAYS * DAY_MS

    @property
    def newest(self) -> int:
        return self.now - NEWEST_AGE_MS

    @property
    def retry_rows(self) -> int:
        """How many rows the retry queue holds: every tenth."""
        return len(range(0, self.rows, 10))


@dataclass
class SeedResult:
    rows: int
    seconds: dict[str, float]
    by_queue: dict[str, int]
    oldest_at: int
    newest_at: int
    table_bytes: dict[str, int]


class Generator:
    """Renders row i of both tables; rows come in discard order, as they would in service."""

    def __init__(self, plan: SeedPlan) -> None:
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.types = {
            job_type: type_templates(job_type, queue, plan.now)
            for queue, job_types in CATALOGUE.items()
            for job_type in job_types
        }
        self.errors = error_templates(plan.now)
        self.fingerprints = error_fingerprints(plan.now)
        self.incidents: dict[str, IncidentEntry] = {}
        # every queue but the retry queue shares 90% of rows, Zipf-like
        self.other_queues = [queue for queue in CATALOGUE if queue != RETRY_QUEUE]
        self.queue_weights = list(
            accumulate(1 / (rank + 1) ** 0.8 for rank in range(len(self.other_queues)))
        )
        self.error_names = list(ERRORS)
        self.error_weights = list(accumulate(weight for weight, _ in ERRORS.values()))
        self.history_sizes = list(HISTORY_WEIGHTS)
        self.history_weights = list(accumulate(HISTORY_WEIGHTS.values()))
        self.step = (plan.newest - plan.oldest) / max(plan.rows, 1)
        columns = next(iter(self.types.values())).jobs_columns
        self.jobs_copy = f"COPY jobs ({', '.join(columns)}) FROM STDIN"
        self.dead_letters_copy = f"COPY dead_letters ({', '.join(DEAD_LETTER_COLUMNS)}) FROM STDIN"
        self.snapshots_copy = (
            f"COPY dead_letter_snapshots ({', '.join(SNAPSHOT_COLUMNS)}) FROM STDIN"
        )

    def row(self, index: int) -> tuple[str, str, str, str]:
        """(queue, jobs line, dead_letters line, dead_letter_snapshots line)."""
        rng = self.rng
        if index % 10 == 0:
            queue = RETRY_QUEUE
        else:
            queue = rng.choices(self.other_queues, cum_weights=self.queue_weights)[0]
        templates = self.types[rng.choice(CATALOGUE[queue])]
        error_type = rng.choices(self.error_names, cum_weights=self.error_weights)[0]
        size = rng.choices(self.history_sizes, cum_weights=self.history_weights)[0]
        discarded_at = int(self.plan.oldest + index * self.step + rng.random() * self.step)
        created_at = discarded_at - (size - 1) * 60_000 - rng.randint(50, 5_000)
        history = []
        for attempt in range(1, size + 1):
            retryable = attempt == MAX_ATTEMPTS or attempt < size
            moment = format_timestamp(discarded_at - (size - attempt) * 60_000)
            record = self.errors[(error_type, retryable)]
            history.append(record.render({"ATTEMPT": str(attempt), "AT": moment}))
        fingerprint = self.fingerprints[error_type]
        incident = incident_id(DEFAULT_TENANT, templates.job_type, fingerprint.value)
        episode_id = uuid7(discarded_at, rng.getrandbits(74))
        self._count(incident, templates.job_type, queue, fingerprint, discarded_at, episode_id)
        values = {
            "JOB_ID": uuid7(created_at, rng.getrandbits(74)),
            "EPISODE_ID": episode_id,
            "FINGERPRINT": fingerprint.value,
            "INCIDENT_ID": incident,
            "SEQUENCE": str(index + 1),
            "ARGS": (
                f'[{{"customer_id":"cust_{rng.randrange(CUSTOMERS)}",'
                f'"amount":{rng.randint(1, 100_000)}}}]'
            ),
            "TRACE": f"{rng.getrandbits(64):016x}",
            "ATTEMPT": str(size),
            "CREATED_AT": str(created_at),
            "ENQUEUED_AT": str(discarded_at - rng.randint(20, 2_000)),
            "STARTED_AT": str(discarded_at - rng.randint(5, 15)),
            "DISCARDED_AT": str(discarded_at),
            "WORKER": rng.choice(WORKERS),
            "ERROR": history[-1],
            "ERRORS": "[" + ",".join(history) + "]",
            "ERROR_TYPE": error_type,
            "REASON": "max_attempts_exceeded" if size == MAX_ATTEMPTS else "non_retryable_error",
        }
        return (
            queue,
            templates.jobs_line.render(values),
            templates.dead_letter_line.render(values),
            templates.snapshot_line.render(values),
        )

    def _count(
        self, incident: str, job_type: str, queue: str, fingerprint: Fingerprint, at: int,
        episode_id: str,
    ) -> None:  # fmt: skip
        """What the rows so far add to their incidents (rows come oldest first)."""
        entry = self.incidents.get(incident)
        if entry is None:
            self.incidents[incident] = IncidentEntry(
                incident, DEFAULT_TENANT, job_type, fingerprint.value, fingerprint.version,
                fingerprint.error_type, fingerprint.message, 1, 1, at, at, (queue,), episode_id,
                arrival(episode_id),
            )  # fmt: skip
            return
        self.incidents[incident] = dataclasses.replace(
            entry,
            dead_count=entry.dead_count + 1,
            total_count=entry.total_count + 1,
            last_seen_at=at,
            sample_dead_letter_id=episode_id,
        )


def error_fingerprints(now: int) -> dict[str, Fingerprint]:
    """The fingerprint of each seeded error's last record (the same for every job type)."""
    context = EnqueueContext(
        now_ms=now, generated_id=uuid7(now, 0), tenant=None, default_retry=RetryPolicy()
    )
    job = validate_envelope({"type": "bench.probe", "args": []}, context)
    return {
        error_type: DEFAULT_FINGERPRINTER.fingerprint(
            dataclasses.replace(
                job, error=error_record(Failure("handler_error", message, error_type), 1, now)
            )
        )
        for error_type, (_, message) in ERRORS.items()
    }


SECONDARY_INDEXES = """
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = 'public' AND tablename IN ('jobs', 'dead_letters')
  AND indexname NOT IN ('jobs_pkey', 'dead_letters_pkey')
"""


async def seed(url: str, plan: SeedPlan, chunk: int = 5_000) -> SeedResult:
    """COPY `plan.rows` dead letters and their discarded jobs into a migrated database, then
    rebuild the indexes, fill the tallies and the incidents, and VACUUM ANALYZE."""
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    generator = Generator(plan)
    by_queue: dict[str, int] = dict.fromkeys(CATALOGUE, 0)
    async with (
        await psycopg.AsyncConnection.connect(url, autocommit=True) as jobs_connection,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as dead_connection,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as snapshot_connection,
    ):
        cursor = await dead_connection.execute(SECONDARY_INDEXES)
        indexes = list(await cursor.fetchall())
        for name, _ in indexes:
            await dead_connection.execute(f'DROP INDEX "{name}"')
        phase = time.perf_counter()
        async with (
            jobs_connection.cursor().copy(generator.jobs_copy) as jobs_copy,
            dead_connection.cursor().copy(generator.dead_letters_copy) as dead_copy,
            snapshot_connection.cursor().copy(generator.snapshots_copy) as snapshot_copy,
        ):
            for start in range(0, plan.rows, chunk):
                jobs_lines, dead_lines, snapshot_lines = [], [], []
                for index in range(start, min(start + chunk, plan.rows)):
                    queue, jobs_line, dead_line, snapshot_line = generator.row(index)
                    by_queue[queue] += 1
                    jobs_lines.append(jobs_line)
                    dead_lines.append(dead_line)
                    snapshot_lines.append(snapshot_line)
                await jobs_copy.write("\n".join(jobs_lines) + "\n")
                await dead_copy.write("\n".join(dead_lines) + "\n")
                await snapshot_copy.write("\n".join(snapshot_lines) + "\n")
        seconds["copy"] = time.perf_counter() - phase

        phase = time.perf_counter()
        await dead_connection.execute("SET maintenance_work_mem = '512MB'")
        for _, definition in indexes:
            await dead_connection.execute(definition)
        seconds["indexes"] = time.perf_counter() - phase

        phase = time.perf_counter()
        await dead_connection.execute(
            "INSERT INTO dead_letter_tallies (tenant_id, queue, type, error_type, count) "
            "SELECT tenant_id, queue, type, COALESCE(error_type, ''), COUNT(*) FROM dead_letters "
            "WHERE status = 'dead' GROUP BY tenant_id, queue, type, COALESCE(error_type, '')"
        )
        seconds["tallies"] = time.perf_counter() - phase

        phase = time.perf_counter()
        (upsert,) = load_scripts(POSTGRES_STATEMENTS / "statements.sql")["upsert_incidents"]
        entries = [incident_entry_record(entry) for entry in generator.incidents.values()]
        arguments = upsert.arguments({"incidents": dump(entries), "regress": False})
        incidents_connection = await asyncpg.connect(url)
        try:
            await incidents_connection.execute(upsert.sql, *arguments)
        finally:
            await incidents_connection.close()
        seconds["incidents"] = time.perf_counter() - phase

        phase = time.perf_counter()
        await dead_connection.execute(
            "VACUUM (ANALYZE) jobs, dead_letters, dead_letter_snapshots, dead_letter_tallies, "
            "incidents"
        )
        seconds["vacuum_analyze"] = time.perf_counter() - phase

        cursor = await dead_connection.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relname IN ('jobs', 'dead_letters') AND relkind = 'r'"
        )
        table_bytes = {str(name): int(size) for name, size in await cursor.fetchall()}
    seconds["total"] = time.perf_counter() - started
    return SeedResult(
        rows=plan.rows,
        seconds=seconds,
        by_queue=by_queue,
        oldest_at=plan.oldest,
        newest_at=plan.newest,
        table_bytes=table_bytes,
    )
