"""The HTTP connection under the client: base URL, headers, JSON bodies and OJS errors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import httpx

from redrive.client.errors import (
    InvalidRequestError,
    RedriveError,
    UnreachableError,
    from_response,
)

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 30.0
MEDIA_TYPE = "application/openjobspec+json"


def _encode(body: object) -> bytes:
    """JSON the server accepts: no NaN or Infinity, only JSON types."""
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise InvalidRequestError(
            "invalid_payload", f"the request cannot be sent as JSON: {error}"
        ) from error


def object_of(value: object) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def document_of(payload: dict[str, Any], key: str) -> dict[str, Any]:
    """The object wrapped under `key` (`{"job": {...}}`), or the payload when it is flat."""
    inner = payload.get(key)
    return inner if isinstance(inner, dict) else payload


class Connection:
    """One connection pool to one server; `Client` adds the OJS operations on top."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        tenant: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        actor: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        sent: dict[str, str] = {"Accept": f"{MEDIA_TYPE}, application/json"}
        if tenant is not None:
            sent["X-OJS-Tenant"] = tenant
        if actor is not None:
            sent["X-OJS-Actor"] = actor
        if api_key is not None:
            sent["Authorization"] = f"Bearer {api_key}"
        sent.update(headers or {})
        self._http = httpx.AsyncClient(
            base_url=self.url, timeout=timeout, transport=transport, headers=sent
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        body: object = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        content = None if body is None else _encode(body)
        headers = {"Content-Type": MEDIA_TYPE} if content is not None else {}
        try:
            response = await self._http.request(
                method, path, content=content, params=params, headers=headers,
                timeout=timeout if timeout is not None else self.timeout,
            )  # fmt: skip
        except httpx.TransportError as error:
            raise UnreachableError(self.url, f"{type(error).__name__}: {error}") from error
        if response.status_code == 204:
            return {}
        try:
            payload: object = response.json()
        except ValueError:
            payload = None
        if response.status_code >= 400:
            raise from_response(response.status_code, payload, response.text[:300])
        if not isinstance(payload, dict):
            raise RedriveError(
                "invalid_response",
                f"{method} {path} answered {response.status_code} without a JSON object",
                status=response.status_code,
            )
        return payload

    # -- worker protocol ------------------------------------------------------------------
