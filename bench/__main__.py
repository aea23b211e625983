"""Run the benchmarks: `python -m bench [NAME] [options]` (`make bench` runs them all).

Benchmarks are measurements, never pass/fail tests: each prints a table (figure | value |
target | met?) and saves every figure with its settings, versions and machine facts to
bench/results/<name>-<UTC timestamp>.json. A missed target is printed plainly and the run still
exits 0; only a benchmark that could not run (no PostgreSQL, a failed check) exits non-zero.

Usage:
    python -m bench                              every registered benchmark, default sizes
    python -m bench hot-path                     the hot paths on both stores, N = 20,000
    python -m bench hot-path --jobs 5000 --repeats 1 --retry-rows 10000   a quick look
    python -m bench dead-letters                 the dead-letter benchmark, 1,000,000 rows
    python -m bench dead-letters --quick         the same on 50,000 rows, about 30 s
    python -m bench dead-letters --rows 200000   any size
    python -m bench peers                        redrive beside pgqueuer and oban-py, N = 20,000
    python -m bench peers --quick                the same with N = 2,000 and one round
    python -m bench alerts                       one alert evaluation at 1,000,000 dead letters

Benchmarks:
    hot-path      Each store (PostgreSQL, SQLite), each figure repeated (--repeats, default 3;
                  median, min and max printed), on fresh databases: bulk enqueue of N jobs
                  (batches of 1,000, one transaction each); the embedded worker (redrive.Worker
                  over EmbeddedJobSource, no-op async handler, concurrency 50) taking N waiting
                  jobs to completed ("process, ack") or, with max_attempts 1 and a handler that
                  raises, to the dead-letter queue ("process, dead-letter"); the same two with
                  the worker over HTTP (HttpJobSource against a `redrive serve` subprocess) and
                  that server's peak RSS (VmHWM); and a bulk retry, by filter, of all
                  --retry-rows dead letters made by the real fail path (each repeat on a file
                  copy). Targets: PostgreSQL bulk enqueue >= 25,000 jobs/s, ack >= 4,000,
                  dead-letter >= 2,000, retry all >= 50,000; SQLite both paths >= 3,000; HTTP
                  >= 50 % of embedded; server RSS <= 150 MB.
    dead-letters  PostgreSQL with N dead letters (COPY-seeded: 20 queues, 50 job types, 10 error
                  types, discarded over 200 days, one queue holding every tenth row). Reports the
                  seeding time; filtered list page p50/p95/p99 (target p95 <= 20 ms), per filter
                  kind; stats p50/p95 (<= 50 ms); bulk retry of the N/10 rows in one queue
                  (<= 2 s for 100,000); prune of all N by age, leaving
                  tombstones, with 10 legal holds present (<= 60 s for 1,000,000); enqueue
                  p50/p95/p99 on a second service while a prune runs (p99 <= 50 ms). Bulk retry
                  and prune each run on a fresh file copy of the seeded database. Targets of
                  size-bound figures are scaled linearly when N is not 1,000,000.

    peers         Each tool as its users run it, in its own process with its documented defaults:
                  pgqueuer 1.6 (`pgq run`) and oban-py 0.7 (`oban start`), each pip-installed
                  once into a virtualenv cached under bench/.peers/ (oban-py needs Python 3.12),
                  and redrive: over HTTP (`redrive serve` started before the clock, then
                  `redrive worker --url` and the Python client), embedded (`redrive worker
                  --embedded`, the service in-process for enqueue and retry), and embedded on
                  SQLite (the same on `--database-url sqlite:///PATH`, a fresh file in a
                  temporary directory per round, counted read-only from this process). Per
                  round, each tool gets a private PostgreSQL database (or SQLite file) and runs
                  five paths on it, the clock running from spawning the process until the
                  database (polled from this process every 20 ms, or 1 % of the time so far)
                  shows all N done: enqueue N no-op jobs one per call; process them; enqueue N
                  always-failing jobs 1,000 per call; run them into the dead/failed state;
                  retry every one. Rounds are
                  interleaved (each tool in turn, then again); redrive HTTP x2 is two servers on
                  the one database with a worker each, and every redrive column is checked
                  after each path for exactly N (no job claimed twice, none lost); the table
                  shows the medians and redrive's median per-round ratio to the best peer on
                  each path, against issue 13's targets (the SQLite column's ratio is to the
                  PostgreSQL embedded column, on the process and dead-letter paths, >= 1.5x).

Options (peers):
    --jobs N             jobs per path (default 20,000; shared with hot-path)
    --rounds N           interleaved rounds (default 3)
    --quick              2,000 jobs and one round
    --tools LIST         comma-separated: pgqueuer,oban-py,redrive-http,redrive-embedded,
                         redrive-embedded-sqlite (the embedded worker on a SQLite file),
                         redrive-http-x2 (two `redrive serve` replicas, a worker each)

Options (dead-letters):
    --rows N             dead letters to seed (default 1,000,000)
    --quick              50,000 rows (overrides --rows): the whole run in about 30 s
    --list-samples N     list-page samples after warm-up (default 200)
    --stats-samples N    stats samples after warm-up (default 50)
    --retry-repeats N    bulk-retry runs, each on a fresh copy (default 3)
    --prune-repeats N    prune runs, each on a fresh copy (default 3)
    --pool-size N        connections per service pool (default 10, as the server's default)
    --seed N             random seed of the data and the filter mix
    --keep               keep the seeded database (its URL is printed) for EXPLAIN ANALYZE;
                         drop it yourself afterwards
    --no-save            print only, write no JSON

Environment:
    REDRIVE_BENCH_POSTGRES_URL (else REDRIVE_TEST_POSTGRES_URL, else
    postgresql://postgres@127.0.0.1:5432/postgres): the server whose throw-away databases the
    benchmark creates and drops.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench import alerts as bench_alerts
from bench import dead_letters, hot_path
from bench.peers import rounds as peer_rounds
from bench.peers import summary as peer_summary
from bench.peers.tools import PEER_NAMES, REDRIVE_NAMES, SHOWN_ORDER, TOOLS, described
from bench.postgres import admin_url, reachable, server_address, server_facts
from bench.report import Figure, machine, print_table, save, versions
from redrive.process import tune_garbage_collector

BENCHMARKS = {
    "hot-path": "enqueue, process (ack, dead-letter), HTTP, retry all, RSS; both stores",
    "dead-letters": "dead letters on PostgreSQL: list, stats, bulk retry, prune",
    "peers": "redrive beside pgqueuer and oban-py, each run as its users run it",
    "alerts": "one alert evaluation on PostgreSQL with N dead letters (--rows)",
}
PEER_QUICK_JOBS = 2_000


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="redrive benchmarks (see the module docstring for details)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(f"  {name:14} {text}" for name, text in BENCHMARKS.items()),
    )
    parser.add_argument(
        "name", nargs="?", choices=[*BENCHMARKS, "all"], default="all", help="default: all"
    )
    parser.add_argument("--rows", type=int, default=dead_letters.FULL_ROWS, help="dead letters")
    parser.add_argument("--quick", action="store_true", help="50,000 rows (overrides --rows)")
    parser.add_argument("--list-samples", type=int, default=200, help="list-page samples")
    parser.add_argument("--stats-samples", type=int, default=50, help="stats samples")
    parser.add_argument("--retry-repeats", type=int, default=3, help="bulk-retry runs")
    parser.add_argument("--prune-repeats", type=int, default=3, help="prune runs")
    parser.add_argument("--pool-size", type=int, default=10, help="connections per service")
    parser.add_argument("--seed", type=int, default=20_240_601, help="random seed")
    parser.add_argument("--no-save", action="store_true", help="write no JSON")
    parser.add_argument("--keep", action="store_true", help="keep the seeded database")
    hot = parser.add_argument_group("hot-path")
    hot.add_argument("--jobs", type=int, default=20_000, help="N jobs per path (20,000)")
    hot.add_argument("--repeats", type=int, default=3, help="measurements per figure (3)")
    hot.add_argument("--retry-rows", type=int, default=100_000, help="dead letters to retry")
    hot.add_argument("--concurrency", type=int, default=50, help="worker concurrency (50)")
    hot.add_argument("--stores", default="postgres,sqlite", help="comma-separated: postgres,sqlite")
    hot.add_argument("--no-http", action="store_true", help="skip the HTTP paths")
    peers = parser.add_argument_group("peers")
    peers.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    peers.add_argument(
        "--tools",
        default=",".join(tool.key for tool in TOOLS),
        help="comma-separated: " + ",".join(tool.key for tool in TOOLS),
    )
    arguments = parser.parse_args(argv)
    tools = tuple(part.strip() for part in arguments.tools.split(",") if part.strip())
    if not tools or set(tools) - {tool.key for tool in TOOLS}:
        parser.error("--tools takes " + ",".join(tool.key for tool in TOOLS))
    arguments.tools = tools
    if arguments.rounds < 1:
        parser.error("--rounds must be at least 1")
    stores = tuple(part.strip() for part in arguments.stores.split(",") if part.strip())
    if not stores or set(stores) - set(hot_path.STORES):
        parser.error("--stores takes postgres and/or sqlite")
    arguments.stores = stores
    if min(arguments.jobs, arguments.repeats, arguments.concurrency) < 1:
        parser.error("--jobs, --repeats and --concurrency must be at least 1")
    if arguments.rows < 1_000:
        parser.error("--rows must be at least 1,000")
    if min(arguments.retry_repeats, arguments.prune_repeats, arguments.list_samples) < 1:
        parser.error("repeats and samples must be at least 1")
    return arguments


def timestamped(console: Console) -> Callable[[str], None]:
    """A progress line printer: each message after the time of day."""

    def log(message: str) -> None:
        console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {message}", highlight=False)

    return log


def dead_letter_settings(arguments: argparse.Namespace) -> dead_letters.Settings:
    quick = arguments.quick
    return dead_letters.Settings(
        rows=dead_letters.QUICK_ROWS if quick else arguments.rows,
        list_samples=arguments.list_samples,
        stats_samples=arguments.stats_samples,
        retry_repeats=arguments.retry_repeats,
        prune_repeats=arguments.prune_repeats,
        pool_size=arguments.pool_size,
        seed=arguments.seed,
        keep=arguments.keep,
    )


def run_dead_letters(arguments: argparse.Namespace, console: Console) -> None:
    settings = dead_letter_settings(arguments)
    started = datetime.now(UTC)
    clock = time.perf_counter()
    postgres = server_facts()
    found = versions(postgres)  # before the run: the code that is measured
    outcome = asyncio.run(dead_letters.run(settings, timestamped(console)))
    seconds = time.perf_counter() - clock
    print_table(
        f"dead letters on PostgreSQL {postgres['server_version']}, {settings.rows:,} rows "
        f"({seconds:.0f} s)",
        outcome.figures,
        console,
    )
    if arguments.no_save:
        return
    document = {
        "benchmark": "dead-letters",
        "started_at": started.isoformat(),
        "duration_s": seconds,
        "settings": {**outcome.details.pop("settings"), "postgres_server": server_address()},
        "targets_for_rows": dead_letters.FULL_ROWS,
        "versions": found,
        "machine": machine(),
        "figures": outcome.figures,
        "details": outcome.details,
    }
    path = save("dead-letters", document, started)
    console.print(f"saved {path}")


def run_hot_path(arguments: argparse.Namespace, console: Console) -> None:
    settings = hot_path.Settings(
        jobs=arguments.jobs,
        repeats=arguments.repeats,
        retry_rows=arguments.retry_rows,
        concurrency=arguments.concurrency,
        stores=arguments.stores,
        http=not arguments.no_http,
    )
    started = datetime.now(UTC)
    clock = time.perf_counter()
    postgres = server_facts()
    found = versions(postgres)
    outcome = asyncio.run(hot_path.run(settings, timestamped(console)))
    seconds = time.perf_counter() - clock
    print_table(
        f"hot paths, N = {settings.jobs:,} jobs, {settings.repeats} repeats "
        f"(PostgreSQL {postgres['server_version']}, {seconds:.0f} s)",
        outcome.figures,
        console,
    )
    if arguments.no_save:
        return
    document = {
        "benchmark": "hot-path",
        "started_at": started.isoformat(),
        "duration_s": seconds,
        "settings": {**outcome.details.pop("settings"), "postgres_server": server_address()},
        "versions": found,
        "machine": machine(),
        "figures": outcome.figures,
        "details": outcome.details,
    }
    path = save("hot-path", document, started)
    console.print(f"saved {path}")


def print_peers(title: str, rates: peer_summary.Rates, tools: list[str], console: Console) -> None:
    peers = [name for name in PEER_NAMES if name in tools]
    ours = [name for name in REDRIVE_NAMES if name in tools]
    table = Table(title=title, title_justify="left")
    table.add_column("path")
    for name in (*peers, *ours):
        table.add_column(name, justify="right")
    table.add_column("best peer")
    for row in peer_summary.rows(rates, peers, ours, SHOWN_ORDER):
        table.add_row(*row)
    console.print(table)


def run_peers(arguments: argparse.Namespace, console: Console) -> None:
    quick = arguments.quick
    settings = peer_rounds.Settings(
        jobs=PEER_QUICK_JOBS if quick else arguments.jobs, rounds=1 if quick else arguments.rounds
    )
    tools = [tool for tool in TOOLS if tool.key in arguments.tools]
    started = datetime.now(UTC)
    clock = time.perf_counter()
    postgres = server_facts()
    found = versions(postgres)
    with tempfile.TemporaryDirectory(prefix="redrive-bench-peers-") as directory:
        outcome = peer_rounds.run(tools, settings, Path(directory), timestamped(console))
    seconds = time.perf_counter() - clock
    names = [tool.name for tool in tools]
    peers = [name for name in PEER_NAMES if name in names]
    ours = [name for name in REDRIVE_NAMES if name in names]
    comparisons = [
        item
        for path in SHOWN_ORDER
        for item in peer_summary.compare(outcome.rates, peers, ours, path)
    ]
    print_peers(
        f"jobs/s as users run each tool, N = {settings.jobs:,}, median of {settings.rounds} "
        f"interleaved rounds (redrive / best peer in brackets, SQLite / PostgreSQL embedded "
        f"on process and dead-letter; PostgreSQL "
        f"{postgres['server_version']}, fsync {postgres['fsync']}, synchronous_commit "
        f"{postgres['synchronous_commit']}; {seconds:.0f} s)",
        outcome.rates,
        names,
        console,
    )
    ratios = peer_summary.ratio_figures(comparisons)
    print_table(
        "redrive / best peer (SQLite / PostgreSQL embedded), median of the per-round ratios",
        ratios,
        console,
    )
    for error in outcome.errors:
        console.print(f"[bold red]FAILED[/] {escape(error)}", highlight=False)
    if arguments.no_save:
        return
    figures: list[Figure] = [
        *peer_summary.rate_figures(outcome.rates, names, SHOWN_ORDER, settings.jobs),
        *ratios,
    ]
    template = f"postgresql://{server_address()}/<database>"
    document = {
        "benchmark": "peers",
        "started_at": started.isoformat(),
        "duration_s": seconds,
        "settings": {
            **settings.__dict__, "tools": names, "postgres_server": server_address(),
        },
        "versions": found,
        "machine": machine(),
        "commands": {
            tool.name: described(tool, outcome.environments[tool.name], template, settings.jobs)
            for tool in tools if tool.name in outcome.environments
        },
        "figures": figures,
        "errors": outcome.errors,
        "details": {**outcome.details, "rates": outcome.rates},
    }  # fmt: skip
    path = save("peers", document, started)
    console.print(f"saved {path}")


def run_alerts(arguments: argparse.Namespace, console: Console) -> None:
    rows = dead_letters.QUICK_ROWS if arguments.quick else arguments.rows
    started = datetime.now(UTC)
    postgres = server_facts()
    found = versions(postgres)
    figures = asyncio.run(bench_alerts.run(rows, timestamped(console)))
    print_table(
        f"alert evaluation on PostgreSQL {postgres['server_version']}, {rows:,} rows",
        figures,
        console,
    )
    if arguments.no_save:
        return
    document = {
        "benchmark": "alerts",
        "started_at": started.isoformat(),
        "settings": {"rows": rows, "postgres_server": server_address()},
        "versions": found,
        "machine": machine(),
        "figures": figures,
    }
    console.print(f"saved {save('alerts', document, started)}")


RUNNERS = {
    "hot-path": run_hot_path,
    "dead-letters": run_dead_letters,
    "peers": run_peers,
    "alerts": run_alerts,
}


def main(argv: list[str] | None = None) -> int:
    arguments = parse(sys.argv[1:] if argv is None else argv)
    console = Console()
    console.width = max(console.width, 132)
    problem = reachable()
    if problem is not None:
        console.print(f"[bold red]PostgreSQL at {admin_url()} is unreachable:[/] {problem}")
        return 2
    names = list(BENCHMARKS) if arguments.name == "all" else [arguments.name]
    # This process plays the server and the embedded worker, so it is tuned as `redrive serve`
    # and `redrive worker` tune themselves.
    tune_garbage_collector()
    for name in names:
        RUNNERS[name](arguments, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
