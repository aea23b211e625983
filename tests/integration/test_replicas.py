"""Two `redrive serve` replicas on one PostgreSQL database: claims and periodic work happen once."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conformance.server import RedriveServer, find_free_port
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.postgres

JOB_COUNT = 3_000
BATCH_SIZE = 500
WORKERS_PER_SERVER = 4
QUEUE = "replicas"
WORK_DEADLINE_SECONDS = 180.0
EMPTY_FETCHES_TO_STOP = 2
EMPTY_FETCH_PAUSE_SECONDS = 0.05
REQUEST_TIMEOUT_SECONDS = 30.0
REAP_WAIT_SECONDS = 10.0
REAP_POLL_SECONDS = 0.1


@contextmanager
def two_servers(database_url: str, directory: Path) -> Iterator[tuple[RedriveServer, ...]]:
    """Start two servers on one database at the same moment, so their migrations race."""
    with ExitStack() as stack:
        servers = (
            RedriveServer(database_url, directory / "server_a"),
            RedriveServer(database_url, directory / "server_b"),
        )
        while servers[1].port == servers[0].port:
            servers[1].port = find_free_port()
        for server in servers:
            stack.callback(server.stop)
        with ThreadPoolExecutor(max_workers=len(servers)) as pool:
            for started in [pool.submit(server.start) for server in servers]:
                started.result()
        yield servers


def server_logs(servers: tuple[RedriveServer, ...]) -> str:
    return "\n".join(
        f"--- server {name} ({server.base_url}) log ---\n{server.log_tail()}"
        for name, server in zip("ab", servers, strict=True)
    )


def assert_no_tracebacks(servers: tuple[RedriveServer, ...]) -> None:
    for server in servers:
        assert "Traceback" not in server.log_tail(limit=1_000_000), server_logs(servers)


def enqueue_all(servers: tuple[RedriveServer, ...]) -> list[str]:
    """Enqueue JOB_COUNT jobs in batches, alternating between the servers; returns their ids."""
    ids: list[str] = []
    clients = [httpx.Client(base_url=s.base_url, timeout=REQUEST_TIMEOUT_SECONDS) for s in servers]
    try:
        for number, start in enumerate(range(0, JOB_COUNT, BATCH_SIZE)):
            jobs = [
                {"type": "replica.check", "args": [index], "options": {"queue": QUEUE}}
                for index in range(start, min(start + BATCH_SIZE, JOB_COUNT))
            ]
            response = clients[number % len(clients)].post(
                "/ojs/v1/jobs/batch", json={"jobs": jobs}
            )
            assert response.status_code == 201, response.text
            body = response.json()
            assert body["count"] == len(jobs)
            ids.extend(job["id"] for job in body["jobs"])
    finally:
        for client in clients:
            client.close()
    return ids


@dataclass
class Claim:
    job_id: str
    attempt: int
    worker: str
    ack_status: int
    ack_body: str


@dataclass
class Ledger:
    """Every claim any worker made, shared by the worker threads."""

    claims: list[Claim] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, claims: list[Claim]) -> None:
        with self.lock:
            self.claims.extend(claims)


def work(server: RedriveServer, worker: str, seed: int, ledger: Ledger) -> str:
    """Fetch and ack until the server answers empty twice in a row; returns how the loop ended."""
    rng = random.Random(seed)
    deadline = time.monotonic() + WORK_DEADLINE_SECONDS
    empty_in_a_row = 0
    with httpx.Client(base_url=server.base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        for _ in range(JOB_COUNT + 100):
            if time.monotonic() > deadline:
                return f"{worker}: deadline passed"
            request = {"queues": [QUEUE], "count": rng.randint(1, 20), "worker_id": worker}
            fetched = client.post("/ojs/v1/workers/fetch", json=request)
            assert fetched.status_code == 200, fetched.text
            jobs: list[dict[str, Any]] = fetched.json()["jobs"]
            if not jobs:
                empty_in_a_row += 1
                if empty_in_a_row >= EMPTY_FETCHES_TO_STOP:
                    return f"{worker}: drained"
                time.sleep(EMPTY_FETCH_PAUSE_SECONDS)
                continue
            empty_in_a_row = 0
            claims = []
            for job in jobs:
                acked = client.post(
                    "/ojs/v1/workers/ack",
                    json={"job_id": job["id"], "lease_token": job["lease_token"]},
                )
                claims.append(
                    Claim(job["id"], job["attempt"], worker, acked.status_code, acked.text[:300])
                )
            ledger.add(claims)
    return f"{worker}: iteration limit reached"


def run_workers(servers: tuple[RedriveServer, ...]) -> tuple[Ledger, list[str]]:
    ledger = Ledger()
    assignments = [
        (server, f"worker-{name}{index}")
        for name, server in zip("ab", servers, strict=True)
        for index in range(WORKERS_PER_SERVER)
    ]
    with ThreadPoolExecutor(max_workers=len(assignments)) as pool:
        futures = [
            pool.submit(work, server, worker, seed, ledger)
            for seed, (server, worker) in enumerate(assignments)
        ]
        endings = [future.result() for future in futures]
    return ledger, endings


@pytest.mark.timeout(300)
def test_two_servers_claim_every_job_exactly_once(tmp_path: Path) -> None:
    with fresh_database("redrive_replicas") as url, two_servers(url, tmp_path) as servers:
        enqueued = enqueue_all(servers)
        assert len(set(enqueued)) == JOB_COUNT

        ledger, endings = run_workers(servers)

        assert all(ending.endswith("drained") for ending in endings), endings
        claimed = [claim.job_id for claim in ledger.claims]
        duplicates = {job_id: n for job_id, n in Counter(claimed).items() if n > 1}
        assert not duplicates, (
            f"{len(duplicates)} jobs claimed more than once, e.g. "
            f"{[c for c in ledger.claims if c.job_id in list(duplicates)[:5]]}\n"
            f"{server_logs(servers)}"
        )
        assert len(claimed) == JOB_COUNT, server_logs(servers)
        assert set(claimed) == set(enqueued)
        assert {claim.attempt for claim in ledger.claims} == {1}
        failed_acks = [claim for claim in ledger.claims if claim.ack_status != 200]
        assert not failed_acks, f"{failed_acks[:5]}\n{server_logs(servers)}"
        by_server = {
            name: sum(c.worker.startswith(f"worker-{name}") for c in ledger.claims) for name in "ab"
        }
        assert all(count > 0 for count in by_server.values()), by_server

        for server in servers:
            with httpx.Client(base_url=server.base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
                stats = client.get("/ojs/v1/admin/stats")
            assert stats.status_code == 200, stats.text
            jobs = stats.json()["jobs"]
            assert jobs["completed"] == JOB_COUNT, jobs
            assert jobs["active"] == 0, jobs
            assert jobs["available"] == 0, jobs
        assert_no_tracebacks(servers)


def wait_until_available(clients: list[httpx.Client], job_id: str) -> dict[str, Any]:
    """Poll the job (alternating between the replicas) until the reaper made it available."""
    deadline = time.monotonic() + REAP_WAIT_SECONDS
    polls = 0
    while True:
        response = clients[polls % len(clients)].get(f"/ojs/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()["job"]
        if job["state"] == "available" or time.monotonic() > deadline:
            return job
        polls += 1
        time.sleep(REAP_POLL_SECONDS)


@pytest.mark.timeout(300)
def test_two_servers_reap_a_lost_lease_once(tmp_path: Path) -> None:
    with (
        fresh_database("redrive_replicas") as url,
        two_servers(url, tmp_path) as servers,
        httpx.Client(base_url=servers[0].base_url, timeout=REQUEST_TIMEOUT_SECONDS) as server_a,
        httpx.Client(base_url=servers[1].base_url, timeout=REQUEST_TIMEOUT_SECONDS) as server_b,
    ):
        created = server_a.post(
            "/ojs/v1/jobs",
            json={
                "type": "replica.lost",
                "args": [],
                "options": {
                    "queue": QUEUE,
                    "visibility_timeout_ms": 1000,
                    "retry": {"max_attempts": 5},
                },
            },
        )
        assert created.status_code == 201, created.text
        job_id = created.json()["job"]["id"]

        lost = server_a.post(
            "/ojs/v1/workers/fetch", json={"queues": [QUEUE], "count": 1, "worker_id": "lost"}
        )
        assert lost.status_code == 200, lost.text
        [first] = lost.json()["jobs"]
        assert (first["id"], first["attempt"]) == (job_id, 1)

        started = time.monotonic()
        reaped = wait_until_available([server_a, server_b], job_id)
        waited = time.monotonic() - started
        assert reaped["state"] == "available", f"{reaped}\n{server_logs(servers)}"
        assert waited >= 0.9, waited
        # Both replicas keep sweeping; give them several more rounds to (wrongly) reap it again.
        time.sleep(1.0)
        settled = server_b.get(f"/ojs/v1/jobs/{job_id}").json()["job"]
        assert settled["state"] == "available", settled
        assert [error["type"] for error in settled["errors"]] == ["visibility_timeout"], (
            f"{settled['errors']}\n{server_logs(servers)}"
        )
        assert settled["attempt"] == 1, settled

        again = server_b.post(
            "/ojs/v1/workers/fetch", json={"queues": [QUEUE], "count": 1, "worker_id": "second"}
        )
        assert again.status_code == 200, again.text
        [second] = again.json()["jobs"]
        assert (second["id"], second["attempt"]) == (job_id, 2)
        assert second["lease_token"] != first["lease_token"]

        stale = server_a.post(
            "/ojs/v1/workers/ack", json={"job_id": job_id, "lease_token": first["lease_token"]}
        )
        assert stale.status_code == 409, stale.text
        acked = server_b.post(
            "/ojs/v1/workers/ack", json={"job_id": job_id, "lease_token": second["lease_token"]}
        )
        assert acked.status_code == 200, acked.text
        done = server_a.get(f"/ojs/v1/jobs/{job_id}").json()["job"]
        assert (done["state"], done["attempt"], len(done["errors"])) == ("completed", 2, 1), done
        assert_no_tracebacks(servers)
