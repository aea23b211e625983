"""HTTP plumbing: the OJS content type, reading JSON bodies, request ids, the tenant header."""

from __future__ import annotations

import json
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from redrive.domain.envelope import validate_tenant
from redrive.domain.errors import InvalidPayload

OJS_MEDIA_TYPE = "application/openjobspec+json"
ACCEPTED_MEDIA_TYPES = ("application/openjobspec+json", "application/json")
TENANT_HEADER = "x-ojs-tenant"


class OjsResponse(Response):
    media_type = OJS_MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def ojs(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return OjsResponse(content, status_code=status_code, headers=headers)


async def read_json(request: Request, required: bool = True) -> Any:
    """The parsed body. Empty → None when optional; malformed or wrong type → 400."""
    raw = await request.body()
    if not raw.strip():
        if required:
            raise InvalidPayload("the request body is empty; send a JSON object")
        return None
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type and media_type not in ACCEPTED_MEDIA_TYPES:
        raise InvalidPayload(
            f"unsupported content type {media_type!r}; send {OJS_MEDIA_TYPE}",
            {"content_type": media_type},
        )
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidPayload(f"the request body is not valid JSON: {error}") from error


def tenant_of(request: Request) -> str | None:
    value = request.headers.get(TENANT_HEADER)
    return validate_tenant(value) if value else None


def new_request_id() -> str:
    return f"req_{uuid.uuid4()}"
