"""The HTTP connection under the client: base URL, headers, JSON bodies and OJS errors."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

import orjson

from redrive.client.errors import (
    InvalidRequestError,
    RedriveError,
    UnreachableError,
    from_response,
)

if TYPE_CHECKING:
    import aiohttp
    import httpx

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 30.0
MEDIA_TYPE = "application/openjobspec+json"
# Idle keep-alive connections are dropped after this long, before uvicorn's (5 s) closes them
# under us: aiohttp checks the age when it picks a pooled connection, so even a SyncClient whose
# event loop sleeps between calls never writes a POST into a connection the server has closed.
KEEPALIVE_SECONDS = 4.0
Query = tuple[tuple[str, str], ...]
# What one read from the socket asks for. asyncio's socket transport asks for 256 KiB, a buffer
# glibc maps anew for each read (mmap) and then shrinks and unmaps (mremap, munmap): three system
# calls and a page fault for every answer, however small. 64 KiB comes from the heap; an answer
# larger than that takes more reads, each as cheap.
READ_BYTES = 65_536
BODY_HEADERS = {"Content-Type": MEDIA_TYPE}
# A request whose answer the client reads only in part: the server may answer less (RFC 7240).
MINIMAL_HEADERS = {"Content-Type": MEDIA_TYPE, "Prefer": "return=minimal"}


# What orjson hands back to `_encode`'s standard-library path: dataclasses, datetimes and
# subclasses of str, int, dict and list (json.dumps refuses the first two and writes the others
# as their base types); anything else it cannot write (integers beyond 64 bits, lone surrogates,
# keys that are not strings, cycles) it refuses, and so goes there too.
PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)  # fmt: skip


def _encode(body: object) -> bytes:
    """JSON the server accepts: no NaN or Infinity, only JSON types. orjson writes it (a batch
    of 1,000 envelopes: 2.65 -> 0.1 us a job); but it writes NaN and the infinities as null,
    so a body whose JSON holds `null` (rare in a request) is written again by json.dumps,
    which refuses them. orjson also writes what json.dumps would refuse among the types it
    knows natively: a UUID as its text, an enum member as its value."""
    try:
        encoded = orjson.dumps(body, option=PASSTHROUGH)
    except TypeError:
        pass
    else:
        if b"null" not in encoded:
            return encoded
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise InvalidRequestError(
            "invalid_payload", f"the request cannot be sent as JSON: {error}"
        ) from error


def _decode(content: bytes) -> object:
    """The answer's JSON value; None when it is not JSON."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass
    try:  # integers beyond 64 bits, which orjson refuses and the server writes exactly
        return json.loads(content)
    except ValueError:
        return None


def _query(params: Mapping[str, Any]) -> Query:
    """Query parameters as httpx wrote them: lists repeat the key, booleans are lower case,
    None is empty."""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        for item in value if isinstance(value, list | tuple) else (value,):
            text = "" if item is None else str(item)
            pairs.append((key, text.lower() if isinstance(item, bool) else text))
    return tuple(pairs)


def object_of(value: object) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def document_of(payload: dict[str, Any], key: str) -> dict[str, Any]:
    """The object wrapped under `key` (`{"job": {...}}`), or the payload when it is flat."""
    inner = payload.get(key)
    return inner if isinstance(inner, dict) else payload


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for the server's URL (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY
    unless NO_PROXY covers the host), as httpx honoured them. Looked up once: aiohttp's own
    `trust_env` looks again on every request, in a thread."""
    import urllib.request  # here: `redrive worker --embedded` imports this module, not a proxy

    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class NetworkSender:
    """Requests over TCP with aiohttp, kept alive in one pool. aiohttp, not httpx: one enqueue
    costs the client about a quarter of the CPU time (its parser and connection pool are C and a
    thin layer; httpx goes through httpcore, h11 and anyio), which is most of what a producer
    process spends per job. aiohttp is a well-kept library (aio-libs) that the ecosystem relies
    on. It is imported, and the session made, on the first request, inside the event loop that
    uses it: `redrive serve` imports the client with its CLI but never sends with it (9 MB)."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        self.url = url
        self.headers = headers
        self.timeout = timeout
        self.proxy = proxy_for(url)
        self._session: aiohttp.ClientSession | None = None
        self._default_limit: aiohttp.ClientTimeout | None = None

    def _opened(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(keepalive_timeout=KEEPALIVE_SECONDS)
            self._session = aiohttp.ClientSession(
                headers=self.headers,
                connector=connector,
                proxy=self.proxy,
                response_class=_response_class(),
            )
        return self._session

    async def send(
        self,
        method: str,
        url: str,
        content: bytes | None,
        query: Query | None,
        timeout: float,
        headers: dict[str, str] | None,
    ) -> tuple[int, bytes]:
        """The status and body of the answer, or UnreachableError when none came back."""
        session = self._opened()
        import aiohttp

        try:
            async with session.request(
                method,
                url,
                data=content,
                params=query,
                headers=headers,
                timeout=self._limit(timeout),
            ) as response:
                return response.status, await response.read()
        except (TimeoutError, aiohttp.ClientError) as error:
            raise UnreachableError(self.url, f"{type(error).__name__}: {error}") from error

    def _limit(self, timeout: float) -> aiohttp.ClientTimeout:
        """The session's usual total made once (a ClientTimeout per request was a measurable
        part of the client's CPU per enqueue), a long poll's longer one when asked."""
        import aiohttp

        if timeout != self.timeout:
            return aiohttp.ClientTimeout(total=timeout)
        if self._default_limit is None:
            self._default_limit = aiohttp.ClientTimeout(total=timeout)
        return self._default_limit

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@functools.cache
def _response_class() -> type[aiohttp.ClientResponse]:
    """aiohttp's response, which first makes its connection's transport read READ_BYTES at a
    time: asyncio's socket transport reads its `max_size`, a class attribute, on every read (set
    once per connection). uvloop's transport reads into a buffer of its own and has no such
    attribute: it is left as it is."""
    import aiohttp

    class Response(aiohttp.ClientResponse):
        async def start(self, connection: aiohttp.connector.Connection) -> aiohttp.ClientResponse:
            transport: Any = connection.transport
            if getattr(transport, "max_size", 0) > READ_BYTES:
                transport.max_size = READ_BYTES
            return await super().start(connection)

    return Response


class InProcessSender:
    """Requests handed to an httpx transport, such as `httpx.ASGITransport(app=...)` for an app
    in this process (the CLI's `--database` and tests): no socket, so no pool to keep lean.
    httpx is imported here, not with the client: it loads its own command line (click, rich,
    pygments), about 200 of the 350 ms a producer or an HTTP worker spent importing the client."""

    def __init__(
        self, url: str, headers: dict[str, str], timeout: float, transport: httpx.AsyncBaseTransport
    ) -> None:
        import httpx

        self.url = url
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport, headers=headers)

    async def send(
        self,
        method: str,
        url: str,
        content: bytes | None,
        query: Query | None,
        timeout: float,
        headers: dict[str, str] | None,
    ) -> tuple[int, bytes]:
        import httpx

        try:
            response = await self._http.request(
                method, url, content=content, params=query, headers=headers, timeout=timeout
            )
        except httpx.TransportError as error:
            raise UnreachableError(self.url, f"{type(error).__name__}: {error}") from error
        return response.status_code, response.content

    async def aclose(self) -> None:
        await self._http.aclose()


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
        """`transport`: an httpx transport to send through instead of the network (say
        `httpx.ASGITransport(app=app)` for an app in this process)."""
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
        self._sender = (
            NetworkSender(self.url, sent, timeout)
            if transport is None
            else InProcessSender(self.url, sent, timeout, transport)
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
        await self._sender.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        body: object = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        minimal: bool = False,
    ) -> dict[str, Any]:
        """The answer's JSON object; `minimal` asks for a minimal answer (`Prefer:
        return=minimal`), which a server may or may not give."""
        content = None if body is None else _encode(body)
        query = _query(params) if params else None
        headers = None if content is None else MINIMAL_HEADERS if minimal else BODY_HEADERS
        status, answer = await self._sender.send(
            method, self.url + path, content, query,
            timeout if timeout is not None else self.timeout, headers,
        )  # fmt: skip
        if status == 204:
            return {}
        payload = _decode(answer)
        if status >= 400:
            raise from_response(status, payload, answer[:300].decode("utf-8", "replace"))
        if not isinstance(payload, dict):
            raise RedriveError(
                "invalid_response",
                f"{method} {path} answered {status} without a JSON object",
                status=status,
            )
        return payload

    # -- worker protocol ------------------------------------------------------------------
