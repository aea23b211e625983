"""The HTTP connection under the client: base URL, headers, JSON bodies and OJS errors."""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import functools
import json
import os
import sys
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote, unquote, urlencode, urlsplit

import httptools
import orjson

from redrive.client.errors import (
    InvalidRequestError,
    RedriveError,
    UnreachableError,
    from_response,
)

if TYPE_CHECKING:
    import ssl

    import httpx

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 30.0
MEDIA_TYPE = "application/openjobspec+json"
# Idle keep-alive connections are dropped after this long, before uvicorn's (5 s) closes them
# under us: the age is checked when a pooled connection is picked, so even a SyncClient whose
# event loop sleeps between calls never writes a POST into a connection the server has closed.
KEEPALIVE_SECONDS = 4.0
# At most this many connections to the server at once (aiohttp's default); more requests wait.
CONNECTIONS = 100
# At most this many request heads are kept (`NetworkSender._head`).
HEADS_KEPT = 256
USER_AGENT = "redrive-client"
# Methods retried once when the reused connection they went out on turned out closed (aiohttp's).
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
# Methods sent without a Content-Length when they carry no body.
BODILESS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "DELETE"})
# What a request's path keeps as it is: the characters a path may hold (RFC 3986) and escapes
# already made; anything else (a space, non-ASCII) is percent-encoded, as aiohttp's yarl did.
SAFE = "/:@!$&'()*+,;=%"
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
        # (`find`, not `in`: `bytes in bytes` first tries the needle as an integer, a TypeError
        # raised, formatted and dropped each time: 1,900 instructions, `find` 200.)
        if encoded.find(b"null") == -1:
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


def _names_no_proxy() -> bool:
    """Whether urllib's look-up below would find no proxy at all: on Linux and other Unixes
    (not macOS, which asks its system settings, nor Windows, its registry) it reads only the
    environment, keeping the variables named `*_proxy` in any case whose value is not empty.
    Without one, its answer is None whatever the URL, and urllib.request, which imports
    http.client and the email package, is not imported: ~57 M instructions (callgrind), a
    tenth of the start of a producer or a worker over HTTP."""
    if sys.platform in ("darwin", "win32"):
        return False
    return not any(value and name.lower()[-6:] == "_proxy" for name, value in os.environ.items())


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for the server's URL (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY
    unless NO_PROXY covers the host), as httpx honoured them. Looked up once (aiohttp's
    `trust_env` looked again on every request, in a thread)."""
    if _names_no_proxy():
        return None
    import urllib.request  # here: `redrive worker --embedded` imports this module, not a proxy

    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class NetworkSender:
    """Requests over TCP (TLS for https), kept alive in a pool of `Exchange` connections:
    HTTP/1.1 written here, answers parsed by httptools (llhttp, in C: uvicorn's parser, a
    dependency of `redrive serve` anyway). Hand-written rather than a library's client because
    the client's CPU per request is most of what a producer process spends per job: aiohttp took
    571k instructions per enqueue (request and response objects, header multidicts, URL objects,
    a writer step, timers), this takes 222k; httpx (httpcore, h11, anyio) took more still. What
    it keeps of theirs: a total timeout per request (waiting for a connection included),
    keep-alive with idle connections dropped before the server drops them, one retry of an
    idempotent request whose reused connection the server had closed (as aiohttp), at most
    CONNECTIONS connections at once, TLS with the system's certificates, the environment's proxy
    (looked up once; a tunnel for https), and a user and password in a URL as Basic
    authorization."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequestError("invalid_url", f"not an http(s) URL: {url!r}")
        self.url = url
        self.timeout = timeout
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self._base_path = parts.path
        self._idle: list[Exchange] = []
        self._limit = Slots(CONNECTIONS)
        self._ssl: ssl.SSLContext | None = None
        sent = {"Host": parts.netloc.rpartition("@")[2], "User-Agent": USER_AGENT, **headers}
        if parts.username is not None:
            sent.setdefault("Authorization", _basic(parts.username, parts.password))
        proxy = proxy_for(url)
        self._proxy = None if proxy is None else urlsplit(proxy if "://" in proxy else f"//{proxy}")
        self._proxy_lines = b""
        if self._proxy is not None and self._proxy.username is not None:
            authorization = _basic(self._proxy.username, self._proxy.password)
            self._proxy_lines = _header_lines({"Proxy-Authorization": authorization})
        # Plain HTTP through a proxy: the URL in full, to the proxy. https: a tunnel.
        self._absolute = self._proxy is not None and not self._tls
        self._fixed = _header_lines(sent) + (self._proxy_lines if self._absolute else b"")
        self._heads: dict[tuple[str, str, int], bytes] = {}

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
        head = None if query else self._heads.get((method, url, id(headers)))
        if head is None:
            head = self._head(method, url, query, headers)
        if content is not None or method not in BODILESS:
            content = content or b""
            request = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(content), content)
        else:
            request = head + b"\r\n"
        # The deadline is kept by a timer on the answer (`Exchange.exchange`), and by
        # asyncio's timeouts only on the rare waits for a free slot or a new connection:
        # asyncio.timeout around every request was a tenth of the client's CPU per enqueue.
        # The running loop asked for once a request: each time asyncio checks the process id,
        # a system call (about 1.3 us here).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            if not self._limit.take_now():
                await self._limit.take(deadline)
            try:
                return await self._exchange(method, request, deadline, loop)
            finally:
                self._limit.give()
        except (OSError, TimeoutError, httptools.HttpParserError) as error:
            raise UnreachableError(self.url, f"{type(error).__name__}: {error}") from error

    def _head(
        self, method: str, url: str, query: Query | None, headers: dict[str, str] | None
    ) -> bytes:
        """A request's line and headers, up to its Content-Length; kept for the next request
        of the same method and URL, without a query, whose headers are none or constant
        (`CONSTANT_LINES`: alive for good, so no other object takes their id): a producer sends
        one such request a job, whose head was most of `send`'s own instructions."""
        path = url if self._absolute else self._base_path + url[len(self.url) :]
        target = _quoted(path or "/")
        if query:
            target += "?" + urlencode(query)
        head = f"{method} {target} HTTP/1.1\r\n".encode() + self._fixed
        lines = None if headers is None else CONSTANT_LINES.get(id(headers))
        if headers:
            head += _header_lines(headers) if lines is None else lines
        if not query and (headers is None or lines is not None):
            if len(self._heads) >= HEADS_KEPT:  # many paths (one a job id): forget them all
                self._heads.clear()
            self._heads[method, url, id(headers)] = head
        return head

    async def _exchange(
        self, method: str, request: bytes, deadline: float, loop: asyncio.AbstractEventLoop
    ) -> tuple[int, bytes]:
        while True:
            exchange = self._idle.pop() if self._idle else None
            if exchange is not None and not exchange.reusable():
                exchange.close()
                continue
            reused = exchange is not None
            if exchange is None:
                async with asyncio.timeout_at(deadline):
                    exchange = await self._connect()
            try:
                status, body, keep_alive = await exchange.exchange(request, deadline, loop)
            except Dropped:
                exchange.close()
                if reused and method in IDEMPOTENT:
                    continue
                raise
            except BaseException:
                exchange.close()  # its answer may still come: never reused
                raise
            if keep_alive:
                self._idle.append(exchange)
            else:
                exchange.close()
            return status, body

    async def _connect(self) -> Exchange:
        loop = asyncio.get_running_loop()
        if self._tls and self._ssl is None:
            import ssl  # here: a worker or producer on plain HTTP never loads it

            self._ssl = ssl.create_default_context()
        if self._proxy is None or self._absolute:
            host, port = (self._host, self._port) if self._proxy is None else self._proxy_address()
            tls = self._ssl if self._proxy is None else None
            _, exchange = await loop.create_connection(
                Exchange, host, port, ssl=tls, server_hostname=self._host if tls else None
            )
            return exchange
        # https through a proxy: CONNECT, then TLS with the server inside the tunnel.
        reader, writer = await asyncio.open_connection(*self._proxy_address())
        authority = f"{self._host}:{self._port}"
        writer.write(
            f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n".encode()
            + self._proxy_lines + b"\r\n"
        )  # fmt: skip
        answer = await reader.readuntil(b"\r\n\r\n")
        if answer.split(b" ", 2)[1:2] != [b"200"]:
            writer.close()
            raise ConnectionRefusedError(f"the proxy refused a tunnel to {authority}")
        await writer.start_tls(self._ssl, server_hostname=self._host)  # type: ignore[arg-type]
        exchange = Exchange()
        transport: Any = writer.transport
        transport.set_protocol(exchange)
        exchange.connection_made(transport)
        return exchange

    def _proxy_address(self) -> tuple[str, int]:
        assert self._proxy is not None and self._proxy.hostname
        return self._proxy.hostname, self._proxy.port or 80

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for exchange in idle:
            exchange.close()


class Dropped(ConnectionError):
    """The connection ended before the whole answer came."""


class Slots:
    """At most `count` holders at once, served in the order they came: asyncio.Semaphore's, but
    a free slot is taken without a coroutine (`take_now`). The semaphore's `acquire` is one, and
    its `locked` walks the waiters with a generator: ~5k instructions of every request."""

    def __init__(self, count: int) -> None:
        self._free = count
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def take_now(self) -> bool:
        """Take a free slot if one is free and nobody waits for one."""
        waiters = self._waiters
        while waiters and waiters[0].done():  # gave up (timed out, cancelled), not yet gone
            waiters.popleft()
        if self._free > 0 and not waiters:
            self._free -= 1
            return True
        return False

    async def take(self, deadline: float) -> None:
        """Wait for a slot, in turn, until `deadline` (the loop's time): TimeoutError after."""
        if self.take_now():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot as it gave up: the next one's
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        """A slot back: to the first waiter still waiting, else free."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class Exchange(asyncio.Protocol):
    """One keep-alive connection: writes a request, parses its answer with httptools. An answer
    must declare its length or come chunked, as HTTP/1.1 servers send them: one the end of the
    connection cuts short is `Dropped`. The client sends no HEAD request (the parser would wait
    for the body its answer declares)."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._body: list[bytes] = []
        self._answer: asyncio.Future[tuple[int, bytes, bool]] | None = None
        # When the answer awaited now is due (loop time), and the timer that checks it, armed at
        # `_checked_at`, no later than that: one timer serves request after request, re-armed
        # only when it fires early (a later request's deadline) or too late (a shorter timeout).
        # A timer made and cancelled for each request was a twentieth of the client's CPU.
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._checked_at = 0.0
        self._idle_since = time.monotonic()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        # asyncio's socket transport reads `max_size` bytes at a time (256 KiB: a buffer glibc
        # maps anew, shrinks and unmaps for every answer); uvloop's has no such attribute.
        if getattr(transport, "max_size", 0) > READ_BYTES:
            transport.max_size = READ_BYTES  # type: ignore[attr-defined]

    def reusable(self) -> bool:
        """Open, and idle for less than KEEPALIVE_SECONDS."""
        return not self.closed and time.monotonic() - self._idle_since < KEEPALIVE_SECONDS

    async def exchange(
        self, request: bytes, deadline: float, loop: asyncio.AbstractEventLoop
    ) -> tuple[int, bytes, bool]:
        """(status, body, whether the connection may carry another request); TimeoutError,
        and the connection closed, when no whole answer came by `deadline` (`loop`'s time)."""
        if self.closed or self._transport is None:
            raise Dropped("the connection is closed")
        answer: asyncio.Future[tuple[int, bytes, bool]]
        answer = self._answer = loop.create_future()
        self._deadline = deadline
        if self._timer is None or self._checked_at > deadline:
            self._arm(loop, deadline)
        self._transport.write(request)
        try:
            return await answer
        finally:
            self._answer = None
            self._deadline = None
            self._body = []
            self._idle_since = time.monotonic()

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._checked_at = when
        self._timer = loop.call_at(when, self._check_deadline, loop)

    def _check_deadline(self, loop: asyncio.AbstractEventLoop) -> None:
        """The timer fired: the awaited answer is late if its deadline has come (it is no later
        than the timer's time), else the timer waits for that deadline; idle, it stops."""
        self._timer = None
        deadline = self._deadline
        if deadline is None:
            return
        if deadline <= self._checked_at:
            self._expire()
        else:
            self._arm(loop, deadline)

    def _expire(self) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(TimeoutError("no answer in time"))
        self.close()

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
            self.close()
            if self._answer is not None and not self._answer.done():
                self._answer.set_exception(httptools.HttpParserError(str(error)))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._answer is not None and not self._answer.done():
            answer = (self._parser.get_status_code(), b"".join(self._body))
            self._answer.set_result((*answer, self._parser.should_keep_alive()))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(Dropped(f"the server closed the connection ({exc})"))

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self._transport.close()


@functools.lru_cache(maxsize=1_024)
def _quoted(path: str) -> str:
    """A request path as sent (`SAFE`): remembered, as a client sends few paths many times
    (urllib's quote was 2% of the client's instructions per enqueue)."""
    return quote(path, safe=SAFE)


def _header_lines(headers: Mapping[str, str]) -> bytes:
    """Header lines as sent; a name or value that would end its line is refused."""
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    if lines.count("\n") != len(headers) or lines.count("\r") != len(headers):
        raise InvalidRequestError("invalid_header", "a header name or value holds a line break")
    return lines.encode("utf-8")


# The lines of the headers `Connection._request` sends with a body, written once (module
# constants: no other object can share their id while they live).
CONSTANT_LINES = {id(fixed): _header_lines(fixed) for fixed in (BODY_HEADERS, MINIMAL_HEADERS)}


def _basic(user: str, password: str | None) -> str:
    credentials = f"{unquote(user)}:{unquote(password or '')}".encode()
    return "Basic " + base64.b64encode(credentials).decode("ascii")


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
