"""The real CLI in a subprocess against a real server: `redrive dlq policy|prune|archive`, and
enqueue → dead letter → retry, with the exit codes scripts rely on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from redrive.client import SyncClient
from tests.conformance.server import RedriveServer, running_server
from tests.support.postgres import fresh_database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RedriveServer]:
    if request.param == "sqlite":
        with running_server(f"sqlite:///{tmp_path}/cli.db", tmp_path) as started:
            yield started
        return
    with fresh_database("redrive_cli") as url, running_server(url, tmp_path) as started:
        yield started


def redrive(server: RedriveServer, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "REDRIVE_URL": server.base_url, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "redrive", *arguments],
        capture_output=True, text=True, env=environment, timeout=60, check=False,
    )  # fmt: skip


def test_policy_show_set_unset_round_trip(server: RedriveServer) -> None:
    shown = redrive(server, "dlq", "policy", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["global"]["max_age"] == "P180D"

    changed = redrive(
        server, "dlq", "policy", "set", "--queue", "billing", "--max-age", "P365D",
        "--max-count", "50000", "--pruning-policy", "archive", "--json",
    )  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    with httpx.Client(base_url=server.base_url) as client:
        policy = client.get("/ojs/v1/dead-letter/retention/billing").json()["policy"]
    assert policy == {
        "queue": "billing", "scope": "queue", "max_age": "P365D", "max_count": 50000,
        "pruning_policy": "archive", "min_age": "P90D",
    }  # fmt: skip

    table = redrive(server, "dlq", "policy", "show")
    assert table.returncode == 0 and "billing" in table.stdout and "P365D" in table.stdout

    removed = redrive(server, "dlq", "policy", "unset", "--queue", "billing")
    assert removed.returncode == 0, removed.stderr
    after = json.loads(redrive(server, "dlq", "policy", "show", "--json").stdout)
    assert after["queues"] == []


def test_bad_policy_and_missing_override_exit_with_distinct_codes(server: RedriveServer) -> None:
    invalid = redrive(server, "dlq", "policy", "set", "--max-age", "soon")
    assert invalid.returncode == 2
    assert "max_age" in invalid.stderr
    missing = redrive(server, "dlq", "policy", "unset", "--queue", "nothing-here")
    assert missing.returncode == 4
    assert "not found" in missing.stderr


def test_unreachable_server_says_what_to_do(tmp_path: Path) -> None:
    environment = {**os.environ, "REDRIVE_URL": "http://127.0.0.1:9"}
    result = subprocess.run(
        [sys.executable, "-m", "redrive", "dlq", "policy", "show"],
        capture_output=True, text=True, env=environment, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 3
    assert "REDRIVE_URL" in result.stderr


def test_prune_and_archive_listing(server: RedriveServer) -> None:
    pruned = redrive(server, "dlq", "prune", "--yes", "--json")
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["deleted"] == 0
    listed = redrive(server, "dlq", "archive", "ls", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == {"archives": []}


def test_from_enqueue_to_the_dead_letter_queue_and_back_out(server: RedriveServer) -> None:
    enqueued = redrive(
        server, "enqueue", "email.send", '["a@b.c"]', "--queue", "mail", "--max-attempts", "1",
        "--on-exhaustion", "dead_letter",
    )  # fmt: skip
    assert enqueued.returncode == 0, enqueued.stderr
    job_id = enqueued.stdout.strip()
    with SyncClient(server.base_url) as worker:
        [job] = worker.fetch(["mail"], worker_id="w1")
        error = {"code": "handler_error", "message": "smtp refused", "type": "SmtpError"}
        assert worker.nack(job.id, error=error, worker_id="w1").dead_letter

    listed = redrive(server, "dlq", "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [item["id"] for item in json.loads(listed.stdout)] == [job_id]
    shown = redrive(server, "dlq", "show", job_id)
    assert shown.returncode == 0 and "SmtpError" in shown.stdout and "smtp refused" in shown.stdout
    declined = redrive(server, "dlq", "retry", "--queue", "mail")
    assert declined.returncode == 130 and "Retry 1 dead letter(s)" in declined.stderr
    refused = redrive(server, "dlq", "retry", "--queue", "mail", "--yes", "--json")
    assert refused.returncode != 0 and "root_cause_required" in refused.stderr
    incident = json.loads(redrive(server, "dlq", "show", job_id, "--json").stdout)["incident_id"]
    written = redrive(
        server, "incidents", "rca", incident, "--category", "infrastructure",
        "--root-cause", "the relay refused mail", "--fix", "PR #42",
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    template = redrive(server, "incidents", "rca", incident, "--markdown")
    assert template.returncode == 0, template.stderr
    assert template.stdout.startswith("## DLE Incident: email.send\n")
    assert "- **Root Cause**: the relay refused mail\n- **Fix Applied**: PR #42" in template.stdout
    retried = redrive(server, "dlq", "retry", "--queue", "mail", "--yes", "--json")
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["retried"] == 1
    state = json.loads(redrive(server, "jobs", "show", job_id, "--json").stdout)["state"]
    assert state == "available"

    assert redrive(server, "jobs", "cancel", job_id).returncode == 0
    again = redrive(server, "jobs", "cancel", job_id)
    assert again.returncode == 5 and "conflict" in again.stderr
    assert redrive(server, "dlq", "show", job_id).returncode == 4
