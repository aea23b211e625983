"""The client against a minimal OJS server that is not redrive (only standard fields, no lease
tokens, bare error bodies), served over httpx's ASGI transport by a tiny Starlette app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from redrive.client import Client, ConflictError, RedriveError, ServerError

pytestmark = pytest.mark.anyio
JOB = {"id": "j1", "type": "email.send", "queue": "mail", "args": [1], "state": "active",
       "attempt": 1}  # fmt: skip


class MinimalServer:
    """Records what the client sent and answers with the plain OJS shapes."""

    def __init__(self) -> None:
        self.bodies: dict[str, Any] = {}

    async def fetch(self, request: Request) -> Response:
        self.bodies["fetch"] = await request.json()
        return JSONResponse({"jobs": [JOB]})

    async def ack(self, request: Request) -> Response:
        self.bodies["ack"] = await request.json()
        return JSONResponse({"acknowledged": True, "job_id": "j1", "state": "completed"})

    async def nack(self, request: Request) -> Response:
        self.bodies["nack"] = await request.json()
        body = {"error": {"code": "conflict", "message": "lease lost", "retryable": False}}
        return JSONResponse(body, status_code=409)

    async def heartbeat(self, request: Request) -> Response:
        self.bodies["heartbeat"] = await request.json()
        return JSONResponse({"state": "quiet"})

    async def broken(self, request: Request) -> Response:
        return PlainTextResponse("Bad Gateway", status_code=502)

    async def not_json(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    def app(self) -> Starlette:
        routes = [
            Route("/ojs/v1/workers/fetch", self.fetch, methods=["POST"]),
            Route("/ojs/v1/workers/ack", self.ack, methods=["POST"]),
            Route("/ojs/v1/workers/nack", self.nack, methods=["POST"]),
            Route("/ojs/v1/workers/heartbeat", self.heartbeat, methods=["POST"]),
            Route("/ojs/v1/health", self.broken),
            Route("/ojs/manifest", self.not_json),
        ]
        return Starlette(routes=routes)


@pytest.fixture
def server() -> MinimalServer:
    return MinimalServer()


@pytest.fixture
async def client(server: MinimalServer) -> AsyncIterator[Client]:
    transport = httpx.ASGITransport(app=server.app())
    async with Client("http://ojs.test", transport=transport) as opened:
        yield opened


async def test_worker_protocol_sends_only_standard_fields(
    client: Client, server: MinimalServer
) -> None:
    [job] = await client.fetch(["mail"], worker_id="w1")
    assert (job.id, job.attempt, job.lease_token, job.max_attempts) == ("j1", 1, None, None)
    assert server.bodies["fetch"] == {"queues": ["mail"], "count": 1, "worker_id": "w1"}
    done = await client.ack("j1", result={"ok": True}, worker_id="w1")
    assert done.state == "completed" and done.job is None
    assert server.bodies["ack"] == {"job_id": "j1", "result": {"ok": True}, "worker_id": "w1"}
    beat = await client.heartbeat(worker_id="w1", job_ids=["j1"])
    assert (beat.state, beat.directive, beat.extended) == ("quiet", "quiet", [])
    assert server.bodies["heartbeat"] == {"active_jobs": ["j1"], "worker_id": "w1"}
    with pytest.raises(ConflictError) as lost:
        await client.nack("j1", error={"code": "handler_error", "message": "x"})
    assert lost.value.message == "lease lost" and lost.value.status == 409
    assert server.bodies["nack"] == {
        "job_id": "j1", "error": {"code": "handler_error", "message": "x"},
    }  # fmt: skip


async def test_answers_that_are_not_ojs_still_give_typed_errors(client: Client) -> None:
    with pytest.raises(ServerError) as broken:
        await client.health()
    assert (broken.value.status, broken.value.code) == (502, "backend_error")
    assert "Bad Gateway" in broken.value.message and broken.value.retryable
    with pytest.raises(RedriveError) as not_json:
        await client.manifest()
    assert not_json.value.code == "invalid_response"
