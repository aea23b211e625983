"""The measured tools as their users run them: set-up, the process spawned per path, and the
query that tells how many jobs are done."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from bench.peers.environments import Environment, Peer

from redrive.settings import Settings

PROGRAMS = Path(__file__).resolve().parent / "programs"

# The five paths in the order one round runs them on one database, each leaving the next its
# input: N no-op jobs enqueued one per call are then processed; N failing jobs enqueued 1,000 per
# call then fail into the dead/failed state, from which every one is retried.
ENQUEUE_ONE = "enqueue one job per call"
PROCESS = "process no-op jobs"
ENQUEUE_BATCH = "enqueue 1,000 per call"
FAIL = "always-failing jobs to the dead/failed state"
RETRY = "retry every failed job"
RUN_ORDER = (ENQUEUE_ONE, PROCESS, ENQUEUE_BATCH, FAIL, RETRY)
SHOWN_ORDER = (ENQUEUE_ONE, ENQUEUE_BATCH, PROCESS, FAIL, RETRY)
PRODUCER_ARGUMENT = {ENQUEUE_ONE: "enqueue-one", ENQUEUE_BATCH: "enqueue-batch", RETRY: "retry"}
WORKER_PATHS = (PROCESS, FAIL)

# typer 0.29 (2026-11) breaks pgqueuer 1.6.0's `pgq run` (its --log-level default reaches the
# logger as a str: AttributeError 'str' object has no attribute 'name'); 0.28 is what it shipped
# against.
PGQUEUER = Peer("pgqueuer", ("pgqueuer[asyncpg]==1.6.0", "typer<0.29"), (3, 10))
OBAN = Peer("oban-py", ("oban==0.7.0",), (3, 12))


# Where a round of a SQLite column keeps its file (a fresh temporary directory per round), as the
# recorded commands show it.
SQLITE_PLACEHOLDER = "sqlite:///<temporary directory>/redrive.db"


@dataclass(frozen=True)
class Place:
    """Where one round of one tool runs: its database, and its server when it has one."""

    database_url: str
    server_url: str = ""


Commands = Callable[[Environment, Place], list[list[str]]]
Command = Callable[[Environment, Place, str, int], list[str]]


@dataclass(frozen=True)
class Tool:
    """`setup` runs before the clock (schema install); `server` is a long-running process started
    before the clock (redrive's HTTP server); `worker` is spawned for the process and fail paths,
    `producer` for the others; `done[path]` counts the jobs that path has finished (`%(jobs)s`
    is N)."""

    name: str
    peer: Peer | None
    environment_variables: Callable[[Place, int], dict[str, str]]
    setup: Commands
    worker: Callable[[Environment, Place], list[str]]
    producer: Command
    done: dict[str, str]
    server: Callable[[Environment, Place], list[str]] | None = None
    notes: list[str] = field(default_factory=list)
    # Servers started, each with a worker of its own on the worker paths (producers use the
    # first server).
    replicas: int = 1
    # Checked once a path is done, with every process stopped: each query must count exactly N
    # (a job claimed twice, lost or dead-lettered twice shows here).
    exactly: dict[str, str] = field(default_factory=dict)
    # The database a round runs on: a private PostgreSQL database, or a fresh SQLite file (the
    # done and exact counts are then read from that file).
    store: Literal["postgres", "sqlite"] = "postgres"

    @property
    def key(self) -> str:
        """The name as `--tools` takes it: pgqueuer, oban-py, redrive-http, redrive-embedded,
        redrive-embedded-sqlite, redrive-http-x2."""
        return self.name.lower().replace(" ", "-")


def _python(environment: Environment) -> str:
    return environment.command("python")


PGQUEUER_TOOL = Tool(
    name="pgqueuer",
    peer=PGQUEUER,
    environment_variables=lambda place, jobs: {"PGDSN": place.database_url},
    setup=lambda environment, place: [[environment.command("pgq"), "install"]],
    worker=lambda environment, place: [environment.command("pgq"), "run", "pgqueuer_tasks:main"],
    producer=lambda environment, place, path, jobs: [
        _python(environment),
        str(PROGRAMS / "pgqueuer_producer.py"),
        path,
        str(jobs),
    ],
    done={
        ENQUEUE_ONE: "SELECT count(*) FROM pgqueuer WHERE status = 'queued'",
        # a finished job leaves the queue table (its log row is aggregated away later)
        PROCESS: "SELECT %(jobs)s - count(*) FROM pgqueuer WHERE entrypoint = 'noop'",
        ENQUEUE_BATCH: "SELECT count(*) FROM pgqueuer WHERE status = 'queued'",
        FAIL: "SELECT count(*) FROM pgqueuer WHERE status = 'failed'",
        RETRY: "SELECT count(*) FROM pgqueuer WHERE status = 'queued'",
    },
    notes=[
        "worker: `pgq run` with its defaults (batch size 10, no concurrency limit), asyncpg",
        "failing entrypoint registered with on_failure='hold' (status 'failed', for `pgq "
        "requeue`); retry = list_failed_jobs + requeue_jobs",
    ],
)

OBAN_TOOL = Tool(
    name="oban-py",
    peer=OBAN,
    environment_variables=lambda place, jobs: {"OBAN_DSN": place.database_url},
    setup=lambda environment, place: [[environment.command("oban"), "install"]],
    # Queues need a limit on the command line; 10 is the one the documentation shows.
    worker=lambda environment, place: [
        environment.command("oban"),
        "start",
        "--queues",
        "default:10",
    ],
    producer=lambda environment, place, path, jobs: [
        _python(environment),
        str(PROGRAMS / "oban_producer.py"),
        path,
        str(jobs),
    ],
    done={
        ENQUEUE_ONE: "SELECT count(*) FROM oban_jobs WHERE state = 'available'",
        PROCESS: "SELECT count(*) FROM oban_jobs WHERE state = 'completed'",
        ENQUEUE_BATCH: "SELECT count(*) FROM oban_jobs WHERE state = 'available'",
        FAIL: "SELECT count(*) FROM oban_jobs WHERE state = 'discarded'",
        RETRY: "SELECT count(*) FROM oban_jobs WHERE state = 'available'",
    },
    notes=[
        "worker: `oban start --queues default:10` (the documented example's limit), defaults "
        "otherwise",
        "failing worker with max_attempts=1 (discarded); retry = retry_many_jobs of every "
        "discarded id",
    ],
)

REDRIVE_DONE = {
    ENQUEUE_ONE: "SELECT count(*) FROM jobs WHERE state = 'available'",
    # (SQLite reads its partial jobs_tenant only for a WHERE that repeats the index's own:
    # `state = 'completed'` alone scanned the table, ~20,000 rows every 20 ms.)
    PROCESS: "SELECT count(*) FROM jobs WHERE state NOT IN ('available', 'active') "
    "AND state = 'completed'",
    ENQUEUE_BATCH: "SELECT count(*) FROM jobs WHERE state = 'available'",
    FAIL: "SELECT count(*) FROM dead_letters WHERE status = 'dead'",
    RETRY: "SELECT count(*) FROM jobs WHERE state = 'available'",
}
# Every no-op job completed on its first claim (a second claim would raise `attempt`), and every
# failing job has exactly one dead-letter episode.
REDRIVE_EXACTLY = {
    PROCESS: "SELECT count(*) FROM jobs WHERE type = 'bench.noop' AND state = 'completed' "
    "AND attempt = 1",
    FAIL: "SELECT count(*) FROM dead_letters",
}


def redrive_room(jobs: int) -> dict[str, str]:
    """The redrive rate the HTTP producer's retry asks for (all N at the next sweep, a critical
    rate) allowed by the server: its default maximum is 1,000 a minute."""
    return {"REDRIVE_REDRIVE_MAX_RATE": str(max(1_000, jobs * 300))}


def dead_letter_room(jobs: int) -> dict[str, str]:
    """The one setting changed from redrive's defaults, and only when N is above it: the default
    cap of 10,000 dead letters is enforced every 5 minutes, so a round that outlasts that would
    lose the failed jobs the retry path is to retry (a user retrying 20,000 raises it too)."""
    default = Settings.default_of("dead_letter_max_count")
    return {} if jobs <= default else {"REDRIVE_DEAD_LETTER_MAX_COUNT": str(jobs)}


def _redrive(environment: Environment, *arguments: str) -> list[str]:
    return [environment.command("redrive"), *arguments]


REDRIVE_HTTP = Tool(
    name="redrive HTTP",
    peer=None,
    environment_variables=lambda place, jobs: {
        "REDRIVE_DATABASE_URL": place.database_url,
        **dead_letter_room(jobs),
        **redrive_room(jobs),
    },
    setup=lambda environment, place: [],
    server=lambda environment, place: _redrive(environment, "serve"),
    worker=lambda environment, place: _redrive(
        environment, "worker", "redrive_tasks:worker", "--url", place.server_url
    ),
    producer=lambda environment, place, path, jobs: [
        _python(environment),
        str(PROGRAMS / "redrive_producer.py"),
        "http",
        place.server_url,
        path,
        str(jobs),
    ],
    done=REDRIVE_DONE,
    exactly=REDRIVE_EXACTLY,
    notes=[
        "`redrive serve` on the database (started before the clock, defaults); the worker is "
        "`redrive worker` over HTTP, the producer the Python client",
        "failing jobs enqueued with max_attempts 1 and on_exhaustion dead_letter",
        "REDRIVE_DEAD_LETTER_MAX_COUNT raised to N when N > 10,000 (the default cap prunes the "
        "dead letters beyond 10,000 every 5 minutes, before the retry path could retry them)",
        "retry: the incident gets a root cause (the redrive policy), then a redrive task at a "
        "critical rate that moves all N at the next sweep, REDRIVE_REDRIVE_MAX_RATE raised to "
        "allow it (the default pacing, 100 a minute, would take N/100 minutes)",
    ],
)

# Issue 13's "scale past one machine": two `redrive serve` replicas on one database, each with
# its own `redrive worker`. On two cores it cannot scale; it shows that sharing one PostgreSQL
# neither collapses nor claims a job twice (checked by REDRIVE_EXACTLY after each path).
REDRIVE_REPLICAS = replace(
    REDRIVE_HTTP,
    name="redrive HTTP x2",
    replicas=2,
    notes=[
        "two `redrive serve` replicas on one database, each with its own `redrive worker`; the "
        "producers send to the first replica",
        *REDRIVE_HTTP.notes[1:],
    ],
)

REDRIVE_EMBEDDED = Tool(
    name="redrive embedded",
    peer=None,
    environment_variables=lambda place, jobs: dead_letter_room(jobs),
    setup=lambda environment, place: [
        _redrive(environment, "migrate", "--database-url", place.database_url)
    ],
    worker=lambda environment, place: _redrive(
        environment,
        "worker",
        "redrive_tasks:worker",
        "--embedded",
        "--database-url",
        place.database_url,
    ),
    producer=lambda environment, place, path, jobs: [
        _python(environment),
        str(PROGRAMS / "redrive_producer.py"),
        "embedded",
        place.database_url,
        path,
        str(jobs),
    ],
    done=REDRIVE_DONE,
    exactly=REDRIVE_EXACTLY,
    notes=[
        "`redrive worker --embedded --database-url` (defaults); the producer is "
        "`redrive.Embedded`, the in-process API, on the database",
        "REDRIVE_DEAD_LETTER_MAX_COUNT raised to N when N > 10,000, as for HTTP",
    ],
)

# Issue 13's "SQLite, embedded, process and dead-letter: >= 1.5x the PostgreSQL embedded figure":
# the same worker and producer on a SQLite file (the documented `sqlite:///PATH`).
REDRIVE_EMBEDDED_SQLITE = replace(
    REDRIVE_EMBEDDED,
    name="redrive embedded SQLite",
    store="sqlite",
    notes=[
        "`redrive worker --embedded --database-url sqlite:///PATH` (defaults: WAL, synchronous "
        "FULL); the producer is `redrive.Embedded` on the same file; a fresh file in a "
        "temporary directory per round, counted read-only from the benchmark process",
        *REDRIVE_EMBEDDED.notes[1:],
    ],
)

TOOLS = (
    PGQUEUER_TOOL, OBAN_TOOL, REDRIVE_HTTP, REDRIVE_EMBEDDED, REDRIVE_EMBEDDED_SQLITE,
    REDRIVE_REPLICAS,
)  # fmt: skip
PEER_NAMES = tuple(tool.name for tool in TOOLS if tool.peer is not None)
REDRIVE_NAMES = tuple(tool.name for tool in TOOLS if tool.peer is None)


def command_for(
    tool: Tool, environment: Environment, place: Place, path: str, jobs: int
) -> list[str]:
    """The process spawned on the clock for `path`: the worker, or the producer script."""
    if path in WORKER_PATHS:
        return tool.worker(environment, place)
    return tool.producer(environment, place, PRODUCER_ARGUMENT[path], jobs)


def described(tool: Tool, environment: Environment, database_url: str, jobs: int) -> dict[str, Any]:
    """The exact commands a round runs for `tool`, on a placeholder database (`database_url` for
    PostgreSQL, a file in a temporary directory for SQLite) and port."""
    database = database_url if tool.store == "postgres" else SQLITE_PLACEHOLDER
    place = Place(database, "http://127.0.0.1:<port>")
    return {
        "store": tool.store,
        "environment_variables": tool.environment_variables(place, jobs),
        "setup": [" ".join(command) for command in tool.setup(environment, place)],
        "server": " ".join(tool.server(environment, place)) if tool.server else None,
        "replicas": tool.replicas,
        "paths": {
            path: " ".join(command_for(tool, environment, place, path, jobs)) for path in RUN_ORDER
        },
        "notes": tool.notes,
    }
