"""The generated SyncClient against a real `redrive serve` over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import httpx
import pytest

import redrive
from redrive.client import (
    ConflictError,
    DeadLetterFilter,
    NotFoundError,
    RetryPolicy,
    SyncClient,
    UnreachableError,
)
from tests.conformance.server import RedriveServer, running_server
from tests.support.postgres import fresh_database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RedriveServer]:
    if request.param == "sqlite":
        with running_server(f"sqlite:///{tmp_path}/sync.db", tmp_path) as started:
            yield started
        return
    with fresh_database("redrive_sync") as url, running_server(url, tmp_path) as started:
        yield started


def test_sync_round_trip_through_the_dead_letter_queue(server: RedriveServer) -> None:
    with redrive.SyncClient(server.base_url, tenant="acme") as client:
        policy = RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")
        ids = [client.enqueue("email.send", [n], queue="mail", retry=policy).id for n in range(3)]
        claimed = client.fetch(["mail"], count=3, worker_id="w1")
        assert sorted(job.id for job in claimed) == sorted(ids)
        beat = client.heartbeat(worker_id="w1", job_ids=[job.id for job in claimed])
        assert sorted(beat.extended) == sorted(ids)
        for job in claimed:
            error = {"code": "handler_error", "message": "boom", "type": "SmtpError"}
            outcome = client.nack(job.id, error=error, worker_id="w1", lease_token=job.lease_token)
            assert outcome.dead_letter

        assert sorted(dead.id for dead in client.iter_dead_letters(page_size=2)) == sorted(ids)
        assert client.dead_letter_stats().total == 3
        assert client.retry_dead_letters(DeadLetterFilter(queue="mail"), dry_run=True).matched == 3
        revived = client.retry_dead_letter(ids[0], queue="mail-fixed")
        assert revived.queue == "mail-fixed" and revived.state == "available"
        assert client.purge_dead_letters(DeadLetterFilter(queue="mail")).succeeded == 2
        [again] = client.fetch(["mail-fixed"])
        assert client.ack(again.id, result="ok").state == "completed"
        with pytest.raises(ConflictError):
            client.cancel(again.id)
        with pytest.raises(NotFoundError):
            client.get_dead_letter(ids[1])

    with redrive.SyncClient(server.base_url, tenant="other") as other_tenant:
        assert other_tenant.dead_letters(DeadLetterFilter(status="retried")).total == 0


def test_iterating_can_stop_early_and_the_client_stays_usable(server: RedriveServer) -> None:
    with SyncClient(server.base_url) as client:
        policy = RetryPolicy(max_attempts=1, on_exhaustion="dead_letter")
        for number in range(4):
            job = client.enqueue("report.build", [number], retry=policy)
            [claimed] = client.fetch(["default"])
            client.nack(claimed.id, error={"code": "handler_error", "message": "no"})
            assert claimed.id == job.id
        iterator = client.iter_dead_letters(page_size=1)
        first = next(iterator)
        assert isinstance(iterator, Generator)
        iterator.close()
        assert client.get_dead_letter(first.id).id == first.id


def test_sync_client_reports_an_unreachable_server() -> None:
    with SyncClient("http://127.0.0.1:9", timeout=5) as client, pytest.raises(UnreachableError):
        client.health()


def test_serve_names_no_server_software_and_dates_its_answers(server: RedriveServer) -> None:
    """No `server: uvicorn` header (naming the software helps only an attacker); HTTP/1.1's
    Date (RFC 9110 6.6.1) and the protocol's headers stay."""
    response = httpx.get(f"{server.base_url}/ojs/v1/health")
    assert response.status_code == 200
    assert "server" not in response.headers
    assert response.headers["date"]
    assert response.headers["ojs-version"] == "1.0"
    assert response.headers["x-request-id"]
