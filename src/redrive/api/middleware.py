"""ASGI middleware on every request: request ids, OJS-Version, body size cap, last-resort 500s."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from redrive.api.errors import error_response, unexpected_response
from redrive.api.http import new_request_id
from redrive.domain.errors import OjsError, PayloadTooLarge, Unsupported

log = logging.getLogger("redrive.api")


class ProtocolHeaders:
    """Pure ASGI middleware: echo or assign X-Request-Id, add OJS-Version, cap body size,
    refuse an unsupported OJS-Version."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # One pass over the headers for the three this layer reads (the last of a repeated one
        # counts), not a dict of them all: ASGI servers give the names in lower case.
        given_id = given_version = given_length = b""
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                given_id = value
            elif name == b"ojs-version":
                given_version = value
            elif name == b"content-length":
                given_length = value
        request_id = given_id.decode("latin-1") or new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        extra = [(b"ojs-version", b"1.0"), (b"x-request-id", request_id.encode("latin-1"))]
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        version = (given_version or b"1.0").decode("latin-1").strip()
        try:
            declared = int(given_length or 0)
        except ValueError:
            declared = 0
        problem: OjsError | None = None
        if version and not version.startswith("1."):
            problem = Unsupported(
                f"OJS-Version {version!r} is not supported; this server speaks 1.0"
            )
        elif declared > self.max_body_bytes:
            problem = PayloadTooLarge(f"the body is larger than {self.max_body_bytes} bytes")
        if problem is not None:
            response = error_response(problem, request_id)
            await response(scope, receive, send_with_headers)
            return
        try:
            await self.app(scope, self._limited(receive), send_with_headers)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await unexpected_response(request_id)(scope, receive, send_with_headers)

    def _limited(self, receive: Receive) -> Receive:
        received = 0
        limit = self.max_body_bytes

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLarge(f"the body is larger than {limit} bytes")
            return message

        return limited_receive
