"""An exact route (`POST /ojs/v1/jobs`) reads its request as Starlette would, from the ASGI
messages and scope themselves: a body in several messages whole, the first of a repeated
header, and a client gone before its body ended as an error that writes nothing."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from redrive.api.app import create_app
from redrive.service.facade import Service
from tests.behaviour.ojs_http import count_rows

pytestmark = pytest.mark.anyio

BODY = json.dumps({"type": "mail.send", "args": ["a" * 100, 2]}).encode()


async def call(
    service: Service, messages: list[dict[str, Any]], headers: list[tuple[bytes, bytes]]
) -> tuple[int, dict[str, Any]]:
    """POST /ojs/v1/jobs straight through the ASGI app: its status and JSON answer."""
    app = create_app(service)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/ojs/v1/jobs", "raw_path": b"/ojs/v1/jobs",
        "query_string": b"", "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8080),
    }  # fmt: skip
    pending = list(messages)
    answer: dict[str, Any] = {"status": 0, "body": b""}

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        else:
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], json.loads(answer["body"])


def pieces(body: bytes, size: int) -> list[dict[str, Any]]:
    chunks = [body[start : start + size] for start in range(0, len(body), size)]
    return [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]


async def test_a_body_in_several_messages_is_read_whole(service: Service) -> None:
    headers = [(b"content-type", b"application/json")]
    status, answer = await call(service, pieces(BODY, 17), headers)
    assert status == 201, answer
    assert answer["job"]["args"] == ["a" * 100, 2]


async def test_the_first_of_a_repeated_header_counts(service: Service) -> None:
    headers = [
        (b"x-ojs-tenant", b"acme"),
        (b"content-type", b"application/json"),
        (b"x-ojs-tenant", b"globex"),
        (b"content-type", b"text/plain"),
    ]
    status, answer = await call(service, pieces(BODY, 1_000), headers)
    assert status == 201, answer
    tenants = "SELECT count(*) FROM jobs WHERE tenant_id = 'acme'"
    assert await count_rows(service, tenants) == 1


async def test_a_content_type_other_than_json_is_refused(service: Service) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    status, answer = await call(service, pieces(BODY, 1_000), headers)
    assert status == 400, answer
    assert "text/plain" in answer["error"]["message"]


async def test_a_client_gone_before_its_body_ends_enqueues_nothing(service: Service) -> None:
    cut = pieces(BODY, 17)[:3]
    status, answer = await call(service, cut, [(b"content-type", b"application/json")])
    assert status == 500, answer
    assert await count_rows(service, "SELECT count(*) FROM jobs") == 0
