"""A nack whose `error` object holds wrong types is refused before anything is written.

The job keeps its state, attempt, lease and error history, so the worker can still ack or nack
it properly; in a batch only the malformed entry is refused.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.behaviour.ojs_http import (
    ack,
    assert_error,
    enqueue,
    fetch,
    fetch_one,
    forbid_server_errors,
    get_job,
    nack,
    retry_policy,
)

pytestmark = pytest.mark.anyio

NACK = "/ojs/v1/workers/nack"
NACK_BATCH = "/ojs/v1/workers/nack/batch"


@pytest.fixture(autouse=True)
def no_server_errors(client: httpx.AsyncClient) -> None:
    forbid_server_errors(client)


async def leased_job(client: httpx.AsyncClient, queue: str) -> dict[str, Any]:
    """A job fetched once by worker w1 (attempt 1, active, three attempts allowed)."""
    job = await enqueue(client, queue=queue, retry=retry_policy(3))
    fetched = await fetch_one(client, queue, worker_id="w1")
    assert fetched["id"] == job["id"]
    assert fetched["attempt"] == 1
    return fetched


async def assert_untouched(client: httpx.AsyncClient, leased: dict[str, Any]) -> None:
    """The job is as the fetch left it: active, same attempt, same lease, no error recorded."""
    after = await get_job(client, leased["id"])
    assert after["state"] == "active"
    assert after["attempt"] == leased["attempt"]
    assert after["lease_token"] == leased["lease_token"]
    assert after["lease_expires_at"] == leased["lease_expires_at"]
    assert after["worker_id"] == "w1"
    assert after["errors"] == []
    assert "error" not in after


@pytest.mark.parametrize(
    ("error", "field"),
    [
        ({"type": ["E"], "message": "x"}, "error.type"),
        ({"type": 7, "message": "x"}, "error.type"),
        ({"code": ["handler_error"], "message": "x"}, "error.code"),
        ({"code": 0, "message": "x"}, "error.code"),
        ({"code": "handler_error", "message": ["x"]}, "error.message"),
        ({"code": "handler_error", "message": "x", "retryable": "false"}, "error.retryable"),
        ({"code": "handler_error", "message": "x", "details": ["d"]}, "error.details"),
        ({"message": "x", "details": {"error_class": 3}}, "error.details.error_class"),
        ({"message": "x", "backtrace": {"line": 1}}, "error.backtrace"),
        ({"message": "x", "stack": [1, 2, 3]}, "error.stack"),
    ],
    ids=[
        "type-list", "type-number", "code-list", "code-zero", "message-list", "retryable-text",
        "details-list", "error-class-number", "backtrace-object", "stack-numbers",
    ],
)  # fmt: skip
async def test_wrong_type_in_the_error_object_is_400_and_writes_nothing(
    client: httpx.AsyncClient, error: dict[str, Any], field: str
) -> None:
    leased = await leased_job(client, "strict-nack")
    response = await client.post(
        NACK, json={"job_id": leased["id"], "lease_token": leased["lease_token"], "error": error}
    )
    refused = assert_error(response, 400, "invalid_request")
    assert refused["type"] == "validation_error"
    assert refused["retryable"] is False
    assert refused["details"]["field"] == field
    assert field in refused["message"]
    await assert_untouched(client, leased)
    # The lease still holds: a proper nack from the same worker lands as attempt 1's failure.
    proper = await nack(client, leased["id"], message="proper", lease_token=leased["lease_token"])
    assert proper.status_code == 200, proper.text
    assert (proper.json()["state"], proper.json()["attempt"]) == ("retryable", 1)
    errors = (await get_job(client, leased["id"]))["errors"]
    assert [(entry["attempt"], entry["message"]) for entry in errors] == [(1, "proper")]


async def test_after_a_refused_nack_the_worker_can_still_ack(client: httpx.AsyncClient) -> None:
    leased = await leased_job(client, "strict-ack")
    bad = {"job_id": leased["id"], "error": {"type": ["E"], "message": "x"}}
    assert_error(await client.post(NACK, json=bad), 400, "invalid_request")
    await assert_untouched(client, leased)
    done = await ack(client, leased["id"], lease_token=leased["lease_token"], result={"ok": 1})
    assert done.status_code == 200, done.text
    after = await get_job(client, leased["id"])
    assert (after["state"], after["attempt"], after["result"]) == ("completed", 1, {"ok": 1})
    assert after["errors"] == []


async def test_unknown_keys_and_backtraces_in_the_error_object_are_accepted(
    client: httpx.AsyncClient,
) -> None:
    """OJS JobError sets no additionalProperties (open schema); backtraces as our worker sends."""
    leased = await leased_job(client, "open-error")
    error = {
        "code": "handler_error",
        "type": "SmtpError",
        "message": "smtp refused",
        "retryable": True,
        "backtrace": "Traceback (most recent call last):\n  ...",
        "stack": ["frame 1", "frame 2"],
        "vendor_field": {"anything": [1, 2]},
        "details": {"error_class": "mail.SmtpError", "backtrace": ["a", "b"], "host": "mx"},
    }
    response = await client.post(NACK, json={"job_id": leased["id"], "error": error})
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "retryable"
    stored = (await get_job(client, leased["id"]))["error"]
    assert (stored["code"], stored["type"], stored["message"]) == (
        "handler_error",
        "SmtpError",
        "smtp refused",
    )
    assert stored["details"] == error["details"]


async def test_a_malformed_entry_of_a_nack_batch_is_refused_on_its_own(
    client: httpx.AsyncClient,
) -> None:
    ids = [(await enqueue(client, queue="strict-batch", retry=retry_policy(3)))["id"]
           for _ in range(3)]  # fmt: skip
    fetched = await fetch(client, ["strict-batch"], count=3, worker_id="w1")
    assert [job["id"] for job in fetched] == ids
    first, middle, last = fetched
    nacks = [
        {"job_id": first["id"], "error": {"type": "Timeout", "message": "slow"}},
        {"job_id": middle["id"], "error": {"type": ["E"], "message": "x"}},
        {"job_id": last["id"], "error": {"message": "down", "retryable": False}},
    ]
    response = await client.post(NACK_BATCH, json={"nacks": nacks})
    assert response.status_code == 200, response.text
    document = response.json()
    assert (document["succeeded"], document["failed"]) == (2, 1)
    results = document["results"]
    assert [result["ok"] for result in results] == [True, False, True]
    assert (results[0]["job_id"], results[0]["state"]) == (first["id"], "retryable")
    assert (results[2]["job_id"], results[2]["state"]) == (last["id"], "discarded")
    refused = results[1]
    assert refused["status"] == 400
    assert refused["error"]["code"] == "invalid_request"
    assert refused["error"]["details"] == {"field": "error.type", "index": 1}
    await assert_untouched(client, middle)
    assert [entry["type"] for entry in (await get_job(client, first["id"]))["errors"]] == [
        "Timeout"
    ]
    assert (await get_job(client, last["id"]))["error"]["retryable"] is False
    # The refused entry's worker can still report it properly.
    again = await client.post(
        NACK_BATCH,
        json={"nacks": [{"job_id": middle["id"], "error": {"type": "E", "message": "x"}}]},
    )
    assert again.status_code == 200, again.text
    assert again.json()["results"][0]["state"] == "retryable"
    assert (await get_job(client, middle["id"]))["error"]["type"] == "E"
