"""The redaction corpus: 60 fake secrets of 13 kinds, nacked over HTTP until their jobs are dead,
never reappear in database rows, API answers, dashboard pages, logs, events or archives."""

from __future__ import annotations

import gzip
import html
import json
import logging
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from redrive.api.app import create_app
from redrive.dashboard import install_dashboard
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime, ServiceOptions
from redrive.store.archive import FileArchive
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.behaviour.ojs_http import enqueue, fetch, forbid_server_errors, nack, retry_policy
from tests.support.clock import ManualClock

pytestmark = pytest.mark.anyio

CORPUS = json.loads((Path(__file__).parent / "redaction_corpus.json").read_text("utf-8"))
QUEUE = "corpus"
DAY = 86_400_000


def filled(template: Any, secret: str) -> Any:
    if isinstance(template, str):
        return template.replace("{secret}", secret)
    if isinstance(template, list):
        return [filled(item, secret) for item in template]
    if isinstance(template, dict):
        return {key: filled(value, secret) for key, value in template.items()}
    return template


def error_of(entry: dict[str, Any], attempt: int) -> dict[str, Any]:
    """The nack's error: the secret in its message, its backtrace or its details."""
    text = filled(entry["template"], entry["secret"])
    error: dict[str, Any] = {"code": "handler_error", "type": "UpstreamError"}
    if entry["place"] == "message":
        error.update(message=text, details={"attempt_seen": attempt})
    elif entry["place"] == "backtrace":
        error.update(message="handler raised", details={"backtrace": text.split("\n")})
    else:
        error.update(message="handler raised", details=text)
    return error


def needles() -> list[tuple[str, str]]:
    """(kind, text that must not appear): each secret, and its digits alone for card numbers
    and IBANs (written with spaces or dashes in the corpus)."""
    found = []
    for entry in CORPUS:
        found.append((entry["kind"], entry["secret"]))
        if entry["kind"] in ("card", "iban"):
            found.append((entry["kind"], entry["secret"].replace(" ", "").replace("-", "")))
    return found


def leaks(text: str) -> list[str]:
    unescaped = html.unescape(text)
    return [
        f"{kind}: {secret}" for kind, secret in needles() if secret in text or secret in unescaped
    ]


async def database_text(store: Store) -> str:
    """Every row of every table, as text, read straight from the database."""
    if isinstance(store, SqliteStore):
        database = store.connection

        def dump() -> str:
            tables = database.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            lines = []
            for (table,) in tables.fetchall():
                for row in database.execute(f'SELECT * FROM "{table}"').fetchall():
                    lines.append(" | ".join(str(value) for value in row))
            return "\n".join(lines)

        return str(await store.call(dump))
    assert isinstance(store, PostgresStore)
    lines = []
    # As the tables' owner: the pool's connections are bound by row-level security.
    owner = await psycopg.AsyncConnection.connect(store.url, row_factory=dict_row)
    async with owner as connection:
        cursor = await connection.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
        for table in [row["table_name"] for row in await cursor.fetchall()]:
            rows = await connection.execute(f'SELECT row_to_json(t)::text AS x FROM "{table}" t')
            lines += [row["x"] for row in await rows.fetchall()]
    return "\n".join(lines)


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    return tmp_path / "archive"


@pytest.fixture
def corpus_service(store: Store, clock: ManualClock, archive_dir: Path) -> Service:
    runtime = Runtime(
        store,
        clock=clock,
        options=ServiceOptions(test_hooks=True),
        rng=random.Random(12),
        archive=FileArchive(str(archive_dir)),
    )
    return Service(runtime)


@pytest.fixture
async def http(corpus_service: Service) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(corpus_service, max_body_bytes=1_000_000)
    install_dashboard(app, corpus_service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://corpus.test") as client:
        forbid_server_errors(client)
        yield client


async def nack_all(
    client: httpx.AsyncClient, jobs: list[str], attempt: int, answers: list[str]
) -> list[str]:
    """Half one by one, half in one batch, as workers do; returns the states they reached and
    keeps the answers."""
    by_id = dict(zip(jobs, CORPUS, strict=True))
    fetched = [job["id"] for job in await fetch(client, [QUEUE], count=len(jobs))]
    assert sorted(fetched) == sorted(jobs)
    states = []
    single, batched = jobs[: len(jobs) // 2], jobs[len(jobs) // 2 :]
    for job_id in single:
        error = error_of(by_id[job_id], attempt)
        response = await nack(
            client, job_id, error["code"], error["message"],
            type=error["type"], details=error["details"],
        )  # fmt: skip
        assert response.status_code == 200, response.text
        states.append(response.json()["state"])
        answers.append(response.text)
    nacks = [{"job_id": job_id, "error": error_of(by_id[job_id], attempt)} for job_id in batched]
    response = await client.post("/ojs/v1/workers/nack/batch", json={"nacks": nacks})
    assert response.status_code == 200, response.text
    states += [result["state"] for result in response.json()["results"]]
    answers.append(response.text)
    return states


async def test_no_secret_of_the_corpus_reappears_anywhere(
    http: httpx.AsyncClient,
    corpus_service: Service,
    store: Store,
    clock: ManualClock,
    archive_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert len(CORPUS) >= 50
    assert len({entry["kind"] for entry in CORPUS}) >= 10
    caplog.set_level(logging.DEBUG)
    jobs = [
        (await enqueue(http, "corpus.job", [index], queue=QUEUE,
                       retry=retry_policy(2, "dead_letter", jitter=False)))["id"]
        for index in range(len(CORPUS))
    ]  # fmt: skip
    answers: list[str] = []
    assert set(await nack_all(http, jobs, 1, answers)) == {"retryable"}
    clock.advance(3_600_000)
    await corpus_service.sweeper.sweep()
    assert set(await nack_all(http, jobs, 2, answers)) == {"discarded"}

    kinds_reported: set[str] = set()
    for job_id, entry in zip(jobs, CORPUS, strict=True):
        job = await http.get(f"/ojs/v1/jobs/{job_id}")
        detail = await http.get(f"/ojs/v1/dead-letter/{job_id}")
        assert detail.status_code == 200, detail.text
        counts = detail.json()["job"]["redactions"]
        assert counts.get(entry["kind"], 0) >= 2, (entry, counts)  # both attempts
        kinds_reported |= set(counts)
        page = await http.get(f"/ui/dead-letters/{job_id}")
        assert page.status_code == 200
        shown = page.text.split('data-testid="redactions">', 1)[1].split("</dd>", 1)[0]
        assert f"{counts[entry['kind']]} {entry['kind']}" in shown
        answers += [job.text, detail.text, page.text]
    assert kinds_reported >= {entry["kind"] for entry in CORPUS}
    listing = await http.get("/ojs/v1/dead-letter?limit=100")
    assert len(listing.json()["jobs"]) == len(CORPUS)
    events = await http.get("/ojs/v1/events?limit=1000")
    assert {"job.failed", "job.retrying", "dead_letter.added"} <= {
        event["type"] for event in events.json()["events"]
    }
    answers += [listing.text, events.text, (await http.get("/ui/dead-letters")).text]
    for answer in answers:
        assert leaks(answer) == []

    rows = await database_text(store)
    assert "[redacted:email]" in rows and "[redacted:private_key]" in rows
    assert leaks(rows) == []

    policy = {"max_age": "P1D", "pruning_policy": "archive"}
    assert (await http.put("/ojs/v1/dead-letter/retention", json=policy)).status_code == 200
    clock.advance(2 * DAY)
    report = (await http.post("/ojs/v1/dead-letter/prune", json={"confirm": True})).json()
    assert report["archived"] == len(CORPUS)
    archived = ""
    for name in report["archives"]:
        with gzip.open(archive_dir / name, "rt", encoding="utf-8") as lines:
            archived += lines.read()
    assert archived.count("[redacted:") >= 2 * len(CORPUS)
    assert leaks(archived) == []

    logged = "\n".join(
        record.getMessage() + (caplog.text if record.exc_info else "") for record in caplog.records
    )
    assert leaks(logged + caplog.text) == []
