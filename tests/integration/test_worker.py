"""`redrive worker` end to end: a real worker process against a real server, on both stores,
over HTTP and embedded (straight to the database)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx
import pytest

from tests.conformance.server import RedriveServer, running_server
from tests.support.postgres import fresh_database

WORKERS = Path(__file__).parent / "workers"
TARGET = "example_tasks:worker"
DEADLINE_SECONDS = 60.0
POLL_SECONDS = 0.05
SETTLED = {"completed", "discarded", "cancelled"}

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/worker.db"
        return
    with fresh_database("redrive_worker") as url:
        yield url


@pytest.fixture
def server(database: str, tmp_path: Path) -> Iterator[RedriveServer]:
    with running_server(database, tmp_path / "server") as started:
        yield started


@pytest.fixture(params=["http", "embedded"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def http(server: RedriveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        yield client


class WorkerProcess:
    """`python -m redrive worker example_tasks:worker ...` with its output in a log file."""

    def __init__(
        self, server: RedriveServer, database: str, mode: str, directory: Path, *options: str
    ) -> None:
        self.command = [sys.executable, "-m", "redrive", "worker", TARGET, *options]
        if mode == "embedded":
            self.command += ["--embedded", "--database-url", database]
        self.environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(WORKERS), os.environ.get("PYTHONPATH", "")]),
            "REDRIVE_URL": server.base_url,
            "REDRIVE_LOG_FORMAT": "text",
            "REDRIVE_LOG_LEVEL": "info",
            "REDRIVE_ARCHIVE_DIR": str(directory / "archive"),
            "REDRIVE_TEST_HOOKS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        self.directory = directory
        self.log_path = directory / f"worker-{time.monotonic_ns()}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> WorkerProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command, cwd=self.directory, env=self.environment, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        return self

    def terminate(self) -> int:
        """SIGTERM, and the exit code once the worker has drained."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=DEADLINE_SECONDS)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self._log is not None:
            self._log.close()


def enqueue(http: httpx.Client, job_type: str, args: list[Any], **options: Any) -> str:
    response = http.post("/ojs/v1/jobs", json={"type": job_type, "args": args, "options": options})
    assert response.status_code == 201, response.text
    return str(response.json()["job"]["id"])


def job(http: httpx.Client, job_id: str) -> dict[str, Any]:
    response = http.get(f"/ojs/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()["job"]
    return document


def wait_until(
    http: httpx.Client, job_ids: list[str], condition: Callable[[dict[str, Any]], bool],
    worker: WorkerProcess,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Poll the jobs until each meets `condition` (deadline, not a fixed sleep)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        documents = {job_id: job(http, job_id) for job_id in job_ids}
        if all(condition(document) for document in documents.values()):
            return documents
        if time.monotonic() > deadline:
            states = {job_id: document["state"] for job_id, document in documents.items()}
            raise AssertionError(f"jobs did not get there in time: {states}\n{worker.log()}")
        time.sleep(POLL_SECONDS)


def fast_retry(max_attempts: int, **extra: Any) -> dict[str, Any]:
    return {"max_attempts": max_attempts, "initial_interval": "PT0.1S", "jitter": False, **extra}


def dead_letter(http: httpx.Client, job_id: str) -> dict[str, Any] | None:
    response = http.get(f"/ojs/v1/dead-letter/{job_id}")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()["job"]
    return document


def test_worker_outcomes(
    server: RedriveServer, database: str, mode: str, http: httpx.Client, tmp_path: Path
) -> None:
    backoff = {"max_attempts": 3, "initial_interval": "PT0.5S", "backoff_coefficient": 2.0,
               "jitter": False}  # fmt: skip
    to_dead_letter = fast_retry(5, on_exhaustion="dead_letter")
    ids = {
        "echo": enqueue(http, "echo", ["a@example.com", 3]),
        "flaky": enqueue(http, "flaky", [], retry=backoff),
        "exhausted": enqueue(http, "smtp.down", [], retry={**to_dead_letter, "max_attempts": 2}),
        "poison": enqueue(http, "poison", [], retry=fast_retry(5)),
        "declined": enqueue(http, "declined", [], retry=to_dead_letter),
        "unknown": enqueue(http, "nobody.handles.this", []),
        "long": enqueue(http, "sleep", [4], visibility_timeout_ms=2000),
    }  # fmt: skip
    delays: list[int] = []
    with WorkerProcess(server, database, mode, tmp_path / "worker") as worker:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while job(http, ids["flaky"])["state"] != "completed" and time.monotonic() < deadline:
            seen = job(http, ids["flaky"])
            if seen["state"] == "retryable" and seen["retry_delay_ms"] not in delays:
                delays.append(seen["retry_delay_ms"])
            time.sleep(POLL_SECONDS)
        jobs = wait_until(http, list(ids.values()), lambda found: found["state"] in SETTLED, worker)
        assert worker.terminate() == 0, worker.log()
    found = {name: jobs[job_id] for name, job_id in ids.items()}

    assert found["echo"]["state"] == "completed"
    assert found["echo"]["result"] == {"args": ["a@example.com", 3], "attempt": 1}

    flaky = found["flaky"]
    assert (flaky["state"], flaky["attempt"]) == ("completed", 3)
    assert flaky["result"] == "third time lucky"
    assert [(error["type"], error["attempt"]) for error in flaky["errors"]] == [
        ("ConnectionError", 1), ("ConnectionError", 2)
    ]  # fmt: skip
    assert delays == [500, 1000]

    exhausted = found["exhausted"]
    assert (exhausted["state"], exhausted["attempt"]) == ("discarded", 2)
    assert [error["type"] for error in exhausted["errors"]] == ["SmtpError", "SmtpError"]
    last = exhausted["errors"][-1]
    assert last["message"] == "connection refused by relay"
    assert last["details"]["error_class"] == "example_tasks.SmtpError"
    assert any("raise SmtpError" in line for line in last["details"]["backtrace"])
    entry = dead_letter(http, ids["exhausted"])
    assert entry is not None and entry["dead_letter_reason"] == "max_attempts_exceeded"

    poison = found["poison"]
    assert (poison["state"], poison["attempt"]) == ("discarded", 1)
    assert poison["error"]["type"] == "SendToDeadLetter"
    entry = dead_letter(http, ids["poison"])
    assert entry is not None and entry["dead_letter_reason"] == "handler_requested"

    declined = found["declined"]
    assert (declined["state"], declined["attempt"]) == ("discarded", 1)
    assert declined["error"]["message"] == "card declined"
    entry = dead_letter(http, ids["declined"])
    assert entry is not None and entry["dead_letter_reason"] == "non_retryable_error"

    unknown = found["unknown"]
    assert (unknown["state"], unknown["attempt"]) == ("discarded", 1)
    assert unknown["error"]["type"] == "HandlerNotFound"

    long = found["long"]
    assert (long["state"], long["attempt"], long["result"]) == ("completed", 1, "slept")
    assert long["errors"] == []


def test_sigterm_loses_nothing(
    server: RedriveServer, database: str, mode: str, http: httpx.Client, tmp_path: Path
) -> None:
    first, second, third = (enqueue(http, "sleep", [1.5]) for _ in range(3))
    options = ("--concurrency", "1", "--prefetch", "2", "--shutdown-timeout", "30")
    with WorkerProcess(server, database, mode, tmp_path / "a", *options) as worker:
        wait_until(http, [first, second, third], lambda found: found["state"] == "active", worker)
        assert worker.terminate() == 0, worker.log()
        jobs = wait_until(http, [first], lambda found: True, worker)
    assert (jobs[first]["state"], jobs[first]["result"]) == ("completed", "slept")
    for handed_back in (job(http, second), job(http, third)):
        # handed back unrun: the delivery does not count against max_attempts
        assert (handed_back["state"], handed_back["attempt"]) == ("available", 0)
        assert handed_back["error"]["type"] == "WorkerShutdown"

    stuck = enqueue(http, "sleep", [600])
    short_grace = ("--concurrency", "4", "--shutdown-timeout", "0.5")
    with WorkerProcess(server, database, mode, tmp_path / "b", *short_grace) as worker:
        wait_until(http, [second, third], lambda found: found["state"] == "completed", worker)
        wait_until(http, [stuck], lambda found: found["state"] == "active", worker)
        assert worker.terminate() == 0, worker.log()
    handed_back = job(http, stuck)
    assert (handed_back["state"], handed_back["attempt"]) == ("available", 0)
    assert "did not finish before the shutdown deadline" in worker.log()


def test_terminate_directive_stops_the_worker_after_its_job(
    server: RedriveServer, database: str, mode: str, http: httpx.Client, tmp_path: Path
) -> None:
    """The server's heartbeat answer `terminate` (a test hook here) makes the worker stop on its
    own: no more fetching, the running job finishes, exit 0."""
    # A beat comes every third of the lease (1 s here), so the directive arrives while the job
    # runs, and a beat late by up to 2 s on a loaded machine still holds the lease.
    running = enqueue(
        http, "sleep", [2.0], visibility_timeout_ms=3000, metadata={"test_directive": "terminate"}
    )
    with WorkerProcess(server, database, mode, tmp_path / "worker") as worker:
        assert worker.process is not None
        assert worker.process.wait(timeout=DEADLINE_SECONDS) == 0, worker.log()
        assert "directive terminate" in worker.log()
    assert job(http, running)["state"] == "completed"
    later = enqueue(http, "echo", [])
    assert job(http, later)["state"] == "available"
