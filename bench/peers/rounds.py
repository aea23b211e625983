"""Running the peer rounds: a private database (PostgreSQL, or a fresh SQLite file) per tool per
round, each path's process spawned on the clock, the database polled from here until it shows all
N jobs done."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import psycopg
from bench.hot_path import free_port
from bench.peers.environments import Environment, Unavailable, current, prepare
from bench.peers.summary import Rates
from bench.peers.tools import PROGRAMS, RUN_ORDER, WORKER_PATHS, Place, Tool, command_for
from bench.postgres import fresh_database
from rich.markup import escape

import redrive
from redrive.composition import sqlite_path

Log = Callable[[str], None]
# Variables that would point a tool somewhere else than its private database.
FOREIGN_PREFIXES = ("REDRIVE_", "PG", "OBAN_", "PGQUEUER_")
REDRIVE_SOURCE = Path(redrive.__file__).resolve().parent.parent
STOP_SECONDS = 60.0


@dataclass
class Settings:
    jobs: int = 20_000
    rounds: int = 3
    # Polling at least every 20 ms, and at most 1 % of the time so far: the clock is off by at
    # most that much, and counting a growing table does not eat the CPU the tools need.
    poll_seconds: float = 0.02
    poll_share: float = 0.01


@dataclass
class Outcome:
    rates: Rates = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    environments: dict[str, Environment] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


class StepFailed(Exception):
    """A path could not finish: the process failed, exited early or ran out of time."""


def environment_for(tool: Tool, place: Place, jobs: int) -> dict[str, str]:
    inherited = {
        key: value for key, value in os.environ.items() if not key.startswith(FOREIGN_PREFIXES)
    }
    # redrive's processes import the redrive this benchmark imported (a worktree's checkout
    # under PYTHONPATH, not the one the virtualenv's editable install names), so a run times
    # the code it was started from.
    paths = [str(PROGRAMS)] if tool.peer is not None else [str(PROGRAMS), str(REDRIVE_SOURCE)]
    return {
        **inherited,
        "PYTHONPATH": os.pathsep.join(paths),
        **tool.environment_variables(place, jobs),
    }


def tail(path: Path, characters: int = 1500) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-characters:]
    except OSError:
        return ""


def spawn(command: list[str], environment: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            command, env=environment, cwd=PROGRAMS, stdout=output, stderr=subprocess.STDOUT
        )


def stop(process: subprocess.Popen[bytes], grace: float = 0.0) -> None:
    """After `grace` seconds to exit by itself, SIGTERM (as a deployment stops a worker), then
    SIGKILL if it has not exited in time."""
    try:
        process.wait(timeout=grace)
        return
    except subprocess.TimeoutExpired:
        pass
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Counter(Protocol):
    """Counts finished jobs with a `done` or `exactly` query (`%(jobs)s` is N)."""

    def count(self, query: str, jobs: int) -> int: ...

    def close(self) -> None: ...


class PostgresCounter:
    """Counts with one autocommit connection to the tool's database."""

    def __init__(self, url: str) -> None:
        self.connection = psycopg.connect(url, autocommit=True)

    def count(self, query: str, jobs: int) -> int:
        row = self.connection.execute(query.encode(), {"jobs": jobs}).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.connection.close()


class SqliteCounter:
    """Counts with one read-only connection to the tool's SQLite file: in WAL mode it reads the
    last commit while the worker writes, and takes no lock the worker waits on. Each count reads
    its row to the end, so no read transaction stays open to hold back the worker's checkpoints."""

    def __init__(self, url: str) -> None:
        path = Path(sqlite_path(url)).resolve()
        self.connection = sqlite3.connect(
            f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None, timeout=30
        )

    def count(self, query: str, jobs: int) -> int:
        rows = self.connection.execute(query.replace("%(jobs)s", ":jobs"), {"jobs": jobs})
        found = rows.fetchall()
        return int(found[0][0]) if found else 0

    def close(self) -> None:
        self.connection.close()


def counter_for(tool: Tool, url: str) -> Counter:
    return SqliteCounter(url) if tool.store == "sqlite" else PostgresCounter(url)


@contextmanager
def fresh_sqlite(directory: Path, prefix: str) -> Iterator[str]:
    """The URL of a SQLite file in a new temporary directory under `directory`, removed (with the
    file's -wal, -shm and key files) afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix + "_", dir=directory) as place:
        yield f"sqlite:///{Path(place) / 'redrive.db'}"


@contextmanager
def private_database(tool: Tool, directory: Path) -> Iterator[str]:
    """A fresh database for one round of `tool`: PostgreSQL, or a SQLite file."""
    if tool.store == "sqlite":
        with fresh_sqlite(directory, database_prefix(tool)) as url:
            yield url
    else:
        with fresh_database(database_prefix(tool)) as url:
            yield url


def wait_done(
    processes: list[subprocess.Popen[bytes]], counter: Counter, query: str, jobs: int,
    settings: Settings, log: Path,
) -> None:  # fmt: skip
    """Until the database shows `jobs` done; a worker must not exit meanwhile, a producer only
    successfully and with everything written."""
    started = time.monotonic()
    deadline = started + 120 + jobs / 20
    while counter.count(query, jobs) < jobs:
        for process in processes:
            code = process.poll()
            if code is not None:
                done = counter.count(query, jobs)
                if code == 0 and done >= jobs:
                    return
                raise StepFailed(f"exited with code {code}, {done} of {jobs} done: {tail(log)}")
        if time.monotonic() > deadline:
            done = counter.count(query, jobs)
            raise StepFailed(f"only {done} of {jobs} done after the time limit: {tail(log)}")
        elapsed = time.monotonic() - started
        time.sleep(max(settings.poll_seconds, elapsed * settings.poll_share))


def measure(
    tool: Tool, environment: Environment, places: list[Place], path: str, counter: Counter,
    settings: Settings, log: Path,
) -> float:  # fmt: skip
    """Jobs/s from spawning the path's processes (a worker per server replica, or the producer)
    until the database shows all N done; then, with every process stopped, the tool's exact
    counts."""
    workers = path in WORKER_PATHS
    started = time.perf_counter()
    processes = [
        spawn(
            command_for(tool, environment, place, path, settings.jobs),
            environment_for(tool, place, settings.jobs),
            log,
        )
        for place in (places if workers else places[:1])
    ]
    try:
        wait_done(processes, counter, tool.done[path], settings.jobs, settings, log)
        seconds = time.perf_counter() - started
    finally:
        # a worker runs until stopped; a producer has written everything and should exit
        for process in processes:
            stop(process, 0.0 if workers else STOP_SECONDS)
    if not workers and processes[0].returncode != 0:
        raise StepFailed(f"exited with code {processes[0].returncode}: {tail(log)}")
    if path in tool.exactly:
        found = counter.count(tool.exactly[path], settings.jobs)
        if found != settings.jobs:
            raise StepFailed(
                f"{found} where exactly {settings.jobs} were expected: {tool.exactly[path]}"
            )
    return settings.jobs / seconds


def run_setup(tool: Tool, environment: Environment, place: Place, jobs: int, log: Path) -> None:
    for command in tool.setup(environment, place):
        with log.open("ab") as output:
            done = subprocess.run(
                command, env=environment_for(tool, place, jobs), cwd=PROGRAMS, stdout=output,
                stderr=subprocess.STDOUT, timeout=300, check=False,
            )  # fmt: skip
        if done.returncode != 0:
            raise StepFailed(f"set-up {command[0]} exited with {done.returncode}: {tail(log)}")


def wait_healthy(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    with httpx.Client() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise StepFailed(f"the server exited with {process.returncode}: {tail(log)}")
            try:
                if client.get(base + "/ojs/v1/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise StepFailed(f"the server was not healthy within 60 s: {tail(log)}")


@contextmanager
def served(
    tool: Tool, environment: Environment, place: Place, jobs: int, log: Path
) -> Iterator[list[Place]]:
    """A place per server replica, each with its server running (started before any clock); the
    place itself when the tool has no server."""
    if tool.server is None:
        yield [place]
        return
    with ExitStack() as stack:
        places = []
        for _ in range(tool.replicas):
            port = free_port()
            replica = Place(place.database_url, f"http://127.0.0.1:{port}")
            variables = {**environment_for(tool, replica, jobs), "REDRIVE_PORT": str(port)}
            process = spawn(tool.server(environment, replica), variables, log)
            stack.callback(stop, process)
            wait_healthy(replica.server_url, process, log)
            places.append(replica)
        yield places


def database_prefix(tool: Tool) -> str:
    return "redrive_bench_peers_" + "".join(c if c.isalnum() else "_" for c in tool.name.lower())


def tool_round(
    tool: Tool, environment: Environment, settings: Settings, directory: Path, log: Log
) -> tuple[dict[str, float], str | None]:
    """Every path of one tool on its own fresh database; the first failure ends the round (the
    later paths need its jobs) and is returned."""
    rates: dict[str, float] = {}
    process_log = directory / f"{database_prefix(tool)}.log"
    with private_database(tool, directory) as url:
        try:
            run_setup(tool, environment, Place(url), settings.jobs, process_log)
            with served(tool, environment, Place(url), settings.jobs, process_log) as places:
                counter = counter_for(tool, url)
                try:
                    for path in RUN_ORDER:
                        rates[path] = measure(
                            tool, environment, places, path, counter, settings, process_log
                        )
                        log(f"  {tool.name}: {path}: {rates[path]:,.0f} jobs/s")
                finally:
                    counter.close()
        except StepFailed as error:
            failed = next((path for path in RUN_ORDER if path not in rates), "set-up")
            return rates, f"{tool.name}, {failed}: {error}"
    return rates, None


def environments(tools: list[Tool], outcome: Outcome, log: Log) -> None:
    """Each tool's environment; a peer that cannot be installed is reported and left out."""
    found = outcome.environments
    unavailable: dict[str, str] = {}
    for tool in tools:
        if tool.peer is None:
            found[tool.name] = current()
            continue
        log(escape(f"preparing {' '.join(tool.peer.requirements)} (cached under bench/.peers/)"))
        try:
            found[tool.name] = prepare(tool.peer)
        except Unavailable as error:
            unavailable[tool.name] = str(error)
            log(f"[bold red]{tool.name} is unavailable:[/] {escape(str(error))}")
    outcome.details["unavailable"] = unavailable
    outcome.details["environments"] = {
        name: {"python": environment.python_version, "packages": environment.packages}
        for name, environment in found.items()
    }


def run(tools: list[Tool], settings: Settings, directory: Path, log: Log) -> Outcome:
    """Rounds interleaved: every tool once per round, in turn, then again."""
    outcome = Outcome()
    environments(tools, outcome, log)
    loads: list[dict[str, Any]] = []
    for number in range(1, settings.rounds + 1):
        loads.append({"round": number, "load_average_before": os.getloadavg()})
        log(f"round {number} of {settings.rounds} (load average {os.getloadavg()[0]:.2f})")
        for tool in tools:
            environment = outcome.environments.get(tool.name)
            if environment is None:
                continue
            rates, error = tool_round(tool, environment, settings, directory, log)
            for path in RUN_ORDER:
                outcome.rates.setdefault(tool.name, {}).setdefault(path, []).append(rates.get(path))
            if error is not None:
                outcome.errors.append(f"round {number}: {error}")
                log(f"[bold red]round {number}:[/] {escape(error)}")
        loads[-1]["load_average_after"] = os.getloadavg()
    outcome.details["load"] = loads
    return outcome
