"""`redrive serve` with REDRIVE_UPCASTERS_FILE, and `redrive dlq retry --dry-run` printing the
upcast as a diff before the retry itself requeues the upcast job."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conformance.server import RedriveServer, running_server

UPCASTERS = """
[[upcasters]]
type = "charge.card"
from = 1
to = 2
renames = { "meta.customer" = "meta.customer_id" }
defaults = { "args.0.currency" = "USD" }
"""


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedriveServer]:
    upcasters = tmp_path / "upcasters.toml"
    upcasters.write_text(UPCASTERS)
    monkeypatch.setenv("REDRIVE_UPCASTERS_FILE", str(upcasters))
    with running_server(f"sqlite:///{tmp_path}/cli.db", tmp_path) as started:
        yield started


def redrive(server: RedriveServer, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "REDRIVE_URL": server.base_url, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "redrive", *arguments],
        capture_output=True, text=True, env=environment, timeout=60, check=False,
    )  # fmt: skip


def dead_job(client: httpx.Client) -> str:
    retry = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    job = {
        "type": "charge.card", "args": [{"amount": 5}], "meta": {"customer": "c1"},
        "version": 1, "options": {"queue": "pay", "retry": retry},
    }  # fmt: skip
    job_id = str(client.post("/ojs/v1/jobs", json=job).json()["job"]["id"])
    assert client.post("/ojs/v1/workers/fetch", json={"queues": ["pay"]}).json()["jobs"]
    failed = client.post(
        "/ojs/v1/workers/nack", json={"job_id": job_id, "error": {"message": "no"}}
    )
    assert failed.json()["state"] == "discarded", failed.text
    return job_id


def test_dry_runs_print_the_upcast_as_a_diff_and_the_retry_applies_it(
    server: RedriveServer,
) -> None:
    with httpx.Client(base_url=server.base_url) as client:
        job_id = dead_job(client)
        expected = [
            f"{job_id} (charge.card): version 1 -> 2 by upcasters[0] (charge.card v1)",
            '+ args.0.currency: "USD"',
            '- meta.customer: "c1"',
            '+ meta.customer_id: "c1"',
            "+ meta.ojs.upcast_from_version: 1",
            "- version: 1",
            "+ version: 2",
        ]
        single = redrive(server, "dlq", "retry", job_id, "--dry-run")
        assert single.returncode == 0, single.stderr
        assert single.stdout.splitlines()[1:5] == expected[:4], single.stdout
        assert all(line in single.stdout.splitlines() for line in expected)
        bulk = redrive(server, "dlq", "retry", "--type", "charge.card", "--dry-run")
        assert bulk.returncode == 0, bulk.stderr
        assert all(line in bulk.stdout.splitlines() for line in expected), bulk.stdout
        assert client.get(f"/ojs/v1/jobs/{job_id}").json()["job"]["state"] == "discarded"

        retried = redrive(server, "dlq", "retry", job_id)
        assert retried.returncode == 0, retried.stderr
        job = client.get(f"/ojs/v1/jobs/{job_id}").json()["job"]
        assert (job["state"], job["version"]) == ("available", 2)
        assert job["args"] == [{"amount": 5, "currency": "USD"}]
        assert job["meta"]["customer_id"] == "c1"
