"""Fixtures for the browser tests: one headless Chromium per session, a real `redrive serve` per
test (on SQLite or PostgreSQL), and helpers that seed and read dead letters over the OJS API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

from tests.conformance.server import RedriveServer

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
ACTION_TIMEOUT_MS = 15_000


@pytest.fixture
def browser(server: RedriveServer) -> Iterator[Browser]:
    """Per test, and only after the server (and its database) is up: Playwright's sync API
    keeps an event loop running, and the PostgreSQL template fixture needs asyncio.run."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[RedriveServer]:
    with RedriveServer(database_url, tmp_path / "server") as running:
        yield running


@pytest.fixture
def page(server: RedriveServer, browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, base_url=server.base_url)
    opened = context.new_page()
    opened.set_default_timeout(ACTION_TIMEOUT_MS)
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(str(error)))
    opened.on(
        "console",
        lambda message: problems.append(message.text) if message.type == "error" else None,
    )
    yield opened
    context.close()
    assert problems == [], f"the page reported JavaScript errors: {problems}"


def screenshot(page: Page, name: str, backend: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}-{backend}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


class Api:
    """The OJS API of the server under test, for seeding and for checking what changed."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=10.0)

    def kill(self, queue: str, job_type: str, error_type: str, args: list[Any]) -> str:
        """Enqueue a one-attempt job, fail it with a backtrace, return its (dead) id."""
        retry = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
        body = {"type": job_type, "args": args, "options": {"queue": queue, "retry": retry}}
        created = self.http.post("/ojs/v1/jobs", json=body)
        assert created.status_code == 201, created.text
        job_id = str(created.json()["job"]["id"])
        fetched = self.http.post("/ojs/v1/workers/fetch", json={"queues": [queue]})
        assert [job["id"] for job in fetched.json()["jobs"]] == [job_id]
        error = {
            "code": "handler_error", "type": error_type, "message": f"{error_type} in {job_type}",
            "details": {"backtrace": [f"File app/{queue}.py, line 12, in handle", "raise"]},
        }  # fmt: skip
        failed = self.http.post("/ojs/v1/workers/nack", json={"job_id": job_id, "error": error})
        assert failed.json()["state"] == "discarded", failed.text
        return job_id

    def dead_letter_ids(self, status: str = "dead") -> set[str]:
        response = self.http.get("/ojs/v1/dead-letter", params={"status": status, "limit": 1000})
        assert response.status_code == 200, response.text
        return {job["id"] for job in response.json()["jobs"]}

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.http.get(f"/ojs/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()["job"]
        return job

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def api(server: RedriveServer) -> Iterator[Api]:
    client = Api(server.base_url, server.headers)
    yield client
    client.close()
