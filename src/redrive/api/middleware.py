"""ASGI middleware on every request: request ids, OJS-Version, body size cap, proxy headers,
last-resort 500s."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from redrive.api.errors import error_response, unexpected_response
from redrive.api.http import new_request_id
from redrive.domain.errors import OjsError, PayloadTooLarge, Unsupported

log = logging.getLogger("redrive.api")


class ProtocolHeaders:
    """Pure ASGI middleware: echo or assign X-Request-Id, add OJS-Version, cap body size,
    refuse an unsupported OJS-Version, and send a request that names X-Forwarded-For or
    X-Forwarded-Proto to `forwarded`: the app behind the server's proxy-header step (uvicorn's,
    `redrive serve`), which trusts them from the configured proxies only. That step ran around
    the app on every request, and walked its headers for those two: found here in the walk made
    anyway, most requests (none names them) skip it. (A request that went through the step
    already, `RedriveApp.proxied`, goes through it again unchanged: it reads the same headers
    and, from a client it no longer trusts, nothing.)"""

    def __init__(self, app: ASGIApp, max_body_bytes: int, forwarded: ASGIApp | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.forwarded = app if forwarded is None else forwarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given_id, given_version, given_length, encoding, proxied = _protocol_headers(
            scope["headers"]
        )
        request_id = given_id.decode("latin-1") if given_id else new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        extra = [(b"ojs-version", b"1.0"), (b"x-request-id", request_id.encode("latin-1"))]
        started = False

        # Not a coroutine: it hands on the server's own (one coroutine less per message, of
        # which an answer sends two).
        def send_with_headers(message: Message) -> Awaitable[None]:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *extra]
            return send(message)

        declared = _length(given_length)
        # Most requests name no OJS-Version and declare a body within the cap: nothing to refuse,
        # found without the version's decoding and the call (measured per request).
        if given_version or (declared is not None and declared > self.max_body_bytes):
            problem = self._refusal(given_version or b"", declared)
            if problem is not None:
                response = error_response(problem, request_id)
                await response(scope, receive, send_with_headers)
                return
        # A declared length within the cap (a larger one is refused above) bounds the body: the
        # server's parser hands on no more than it. Only a body without one is counted here.
        if declared is None or encoding is not None:
            receive = self._limited(receive)
        app = self.app if proxied is None else self.forwarded
        try:
            await app(scope, receive, send_with_headers)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await unexpected_response(request_id)(scope, receive, send_with_headers)

    def _refusal(self, given_version: bytes, declared: int | None) -> OjsError | None:
        """An unsupported OJS-Version, or a declared body over the cap."""
        version = (given_version or b"1.0").decode("latin-1").strip()
        if version and not version.startswith("1."):
            return Unsupported(f"OJS-Version {version!r} is not supported; this server speaks 1.0")
        if declared is not None and declared > self.max_body_bytes:
            return PayloadTooLarge(f"the body is larger than {self.max_body_bytes} bytes")
        return None

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


def _length(given: bytes | None) -> int | None:
    """A declared Content-Length; None when there is none or it is not a length."""
    if not given:
        return None
    try:
        declared = int(given)
    except ValueError:
        return None
    return declared if declared >= 0 else None


# The request headers `_protocol_headers` reads, by their place in its answer.
PROTOCOL_HEADERS = {
    b"x-request-id": 0,
    b"ojs-version": 1,
    b"content-length": 2,
    b"transfer-encoding": 3,
    b"x-forwarded-for": 4,
    b"x-forwarded-proto": 4,
}


def _protocol_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[bytes | None]:
    """X-Request-Id, OJS-Version, Content-Length, a Transfer-Encoding and an X-Forwarded-For or
    X-Forwarded-Proto (None when absent; the last of a repeated one counts), in one pass rather
    than a dict of every header: ASGI servers give the names in lower case. One dict lookup a
    header, not a comparison with each name."""
    found: list[bytes | None] = [None, None, None, None, None]
    place = PROTOCOL_HEADERS.get
    for name, value in headers:
        index = place(name)
        if index is not None:
            found[index] = value
    return found
