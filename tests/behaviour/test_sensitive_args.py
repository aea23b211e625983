"""Sensitive keys of args and meta: stored as sent (a redrive needs them), masked for viewers in
every read use-case, and so in the API a viewer's key reaches."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from redrive.api.app import create_app
from redrive.domain.caller import SYSTEM, Caller, Role
from redrive.domain.dead_letter import RetryOverride
from redrive.domain.dead_letter_filter import DeadLetterFilter
from redrive.domain.job import DEFAULT_TENANT
from redrive.domain.keys import KeyRequest
from redrive.ports import JobFilter, Page
from redrive.service.crons import CronRegistration
from redrive.service.facade import Service
from tests.behaviour.ojs_http import fetch_one, forbid_server_errors, kill_job

pytestmark = pytest.mark.anyio

ARGS: list[Any] = [
    {"to": "ana@example.com", "smtp": {"Password": "hunter2-Zebra9", "host": "mail"}},
    "plain-arg",
]
MASKED_ARGS: list[Any] = [
    {"to": "ana@example.com", "smtp": {"Password": "[masked:password]", "host": "mail"}},
    "plain-arg",
]
VIEWER = Caller.for_tenant(DEFAULT_TENANT, "someone", Role.VIEWER)
OPERATOR = Caller.for_tenant(DEFAULT_TENANT, "operator", Role.OPERATOR)
SECRETS = ("hunter2-Zebra9", "tok-4f9a2c")


def assert_masked(job_args: list[Any], meta: dict[str, Any]) -> None:
    assert job_args == MASKED_ARGS
    assert meta["api_token"] == "[masked:secret]"
    assert meta["trace_id"] == "t-1"


async def dead_job(client: httpx.AsyncClient) -> str:
    response = await client.post(
        "/ojs/v1/jobs",
        json={"type": "mail.send", "args": ARGS,
              "meta": {"api_token": "tok-4f9a2c", "trace_id": "t-1"},
              "options": {"queue": "mail", "retry": {"max_attempts": 1,
                                                      "on_exhaustion": "dead_letter"}}},
    )  # fmt: skip
    assert response.status_code == 201, response.text
    job_id = str(response.json()["job"]["id"])
    await fetch_one(client, "mail")
    nacked = await client.post(
        "/ojs/v1/workers/nack", json={"job_id": job_id, "error": {"message": "smtp down"}}
    )
    assert nacked.json()["state"] == "discarded"
    return job_id


async def test_every_read_use_case_masks_sensitive_keys_for_a_viewer_only(
    client: httpx.AsyncClient, service: Service
) -> None:
    job_id = await dead_job(client)
    await kill_job(client, "mail", "other.job")

    job = await service.jobs.get(VIEWER, job_id)
    assert_masked(job.args, job.meta)
    listed, _ = await service.jobs.list(VIEWER, JobFilter(queue="mail"), 10, 0)
    assert [item.args for item in listed if item.id == job_id] == [MASKED_ARGS]
    found, _ = await service.dead_letters.search(VIEWER, DeadLetterFilter(), Page(limit=10))
    dead, history = await service.dead_letters.get(VIEWER, job_id)
    episodes = await service.dead_letters.episodes(VIEWER, job_id)
    preview = await service.dead_letters.preview(VIEWER, DeadLetterFilter())
    for episode in [dead, *history, *episodes, *found, *preview.sample]:
        if episode.job_id == job_id:
            assert_masked(episode.job.args, episode.job.meta)
    assert {episode.job_id for episode in found} >= {job_id}

    for reader in (OPERATOR, SYSTEM):
        unmasked = await service.jobs.get(reader, job_id)
        assert (unmasked.args, unmasked.meta["api_token"]) == (ARGS, "tok-4f9a2c")
        dead, _ = await service.dead_letters.get(reader, job_id)
        assert dead.job.args == ARGS

    # What is stored is untouched: a retry (by an operator) runs with the real args.
    await service.dead_letters.retry(OPERATOR, job_id, RetryOverride())
    assert (await fetch_one(client, "mail"))["args"] == ARGS


async def test_a_viewers_cron_templates_are_masked(service: Service) -> None:
    template = {"type": "report.send", "args": [{"api_key": "k-123", "day": 1}]}
    registration = CronRegistration(
        name="nightly", expression="0 3 * * *", timezone="UTC", overlap_policy="skip",
        enabled=True, job_template=template, description=None,
    )  # fmt: skip
    await service.crons.register(OPERATOR, registration)
    for cron in [await service.crons.get(VIEWER, "nightly"), *await service.crons.list(VIEWER)]:
        assert cron.job_template["args"] == [{"api_key": "[masked:api_key]", "day": 1}]
    assert (await service.crons.get(OPERATOR, "nightly")).job_template["args"] == template["args"]


@pytest.fixture
async def keyed(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service, max_body_bytes=64_000, auth_required=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://keys.test") as http:
        forbid_server_errors(http)
        yield http


async def bearer(service: Service, role: Role) -> dict[str, str]:
    created = await service.keys.create(SYSTEM, KeyRequest(DEFAULT_TENANT, role.value, role))
    return {"authorization": f"Bearer {created.secret}"}


async def test_a_viewer_key_reads_masked_args_over_http_and_an_admin_key_the_real_ones(
    keyed: httpx.AsyncClient, service: Service
) -> None:
    admin = await bearer(service, Role.ADMIN)
    viewer = await bearer(service, Role.VIEWER)
    keyed.headers.update(admin)
    job_id = await dead_job(keyed)
    paths = [f"/ojs/v1/jobs/{job_id}", f"/ojs/v1/dead-letter/{job_id}", "/ojs/v1/dead-letter"]
    for path in paths:
        seen = await keyed.get(path, headers=viewer)
        assert seen.status_code == 200, seen.text
        assert not [secret for secret in SECRETS if secret in seen.text], path
        assert "[masked:password]" in seen.text
        full = await keyed.get(path, headers=admin)
        assert all(secret in full.text for secret in SECRETS), path
    detail = (await keyed.get(f"/ojs/v1/dead-letter/{job_id}", headers=viewer)).json()["job"]
    assert_masked(detail["args"], detail["meta"])
    assert json.loads(json.dumps(detail["redactions"])) == {}
