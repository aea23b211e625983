"""Signing in to a server with auth on, in a real browser: a viewer's key opens the dashboard,
its name and role show in the header, its dead letter's sensitive args are masked and no action
button is offered; signing out sends the browser back to the sign-in form for good."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Api, screenshot
from tests.conformance.server import RedriveServer, running_server, server_environment

pytestmark = pytest.mark.xdist_group("browser")


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[RedriveServer]:
    """This module's server needs API keys (its API client carries an admin key for every
    tenant, made with the CLI as the first key is)."""
    with running_server(database_url, tmp_path / "server", auth=True) as running:
        yield running


def viewer_key(server: RedriveServer) -> str:
    """A viewer key of the admin key's tenant, made with the CLI on the database."""
    made = subprocess.run(
        [sys.executable, "-m", "redrive", "keys", "create", "--database", server.database_url,
         "--tenant", "conformance", "--role", "viewer", "--name", "night-watch", "--json"],
        env=server_environment(server.database_url, server.work_directory),
        capture_output=True, check=True,
    )  # fmt: skip
    key: str = json.loads(made.stdout)["key"]
    return key


def test_a_viewer_signs_in_sees_masked_args_and_no_retry_then_signs_out(
    page: Page, api: Api, server: RedriveServer, backend: str
) -> None:
    api.http.headers["X-OJS-Tenant"] = "conformance"  # the admin key spans every tenant
    job_id = api.kill("mail", "mail.send", "SmtpError", [{"to": "u@x", "password": "s3cret-Pw9"}])
    key = viewer_key(server)

    page.goto("/ui/dead-letters")
    expect(page).to_have_url(re.compile(r"/ui/login\?next=%2Fui%2Fdead-letters$"))
    page.get_by_label("API key").fill(key)
    screenshot(page, "sign-in", backend)
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(re.compile(r"/ui/dead-letters$"))
    expect(page.get_by_test_id("signed-in-name")).to_have_text("night-watch")
    expect(page.get_by_test_id("signed-in-role")).to_have_text("viewer")
    expect(page.get_by_test_id("signed-in-tenant")).to_have_text("tenant conformance")
    expect(page.locator(f'tr[data-job-id="{job_id}"]')).to_be_visible()
    expect(page.get_by_role("button", name="Retry selected…")).to_have_count(0)

    page.locator(f'tr[data-job-id="{job_id}"] a').first.click()
    expect(page.get_by_test_id("args")).to_contain_text("[masked:password]")
    expect(page.get_by_test_id("args")).not_to_contain_text("s3cret-Pw9")
    expect(page.get_by_role("button", name="Retry now")).to_have_count(0)
    expect(page.get_by_role("link", name="Delete…")).to_have_count(0)
    screenshot(page, "signed-in-viewer", backend)

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/ui/login$"))
    expect(page.locator(".flash")).to_contain_text("Signed out.")
    page.goto("/ui")
    expect(page).to_have_url(re.compile(r"/ui/login$"))
    expect(page.get_by_test_id("signed-in")).to_have_count(0)
    assert api.dead_letter_ids("dead") == {job_id}  # the viewer changed nothing
