"""The client's own HTTP/1.1 connection against a real socket server that answers as scripted:
chunked answers, keep-alive, a reused connection the server had closed, timeouts, header and path
encoding, proxies, TLS (directly and through a proxy's tunnel)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trustme

from redrive.client import Client, UnreachableError
from redrive.client.errors import InvalidRequestError

pytestmark = pytest.mark.anyio
OK = b'{"status":"ok"}'
Answer = Callable[[bytes], bytes | None]
Start = Callable[..., Awaitable["ScriptedServer"]]


def sized(body: bytes = OK, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


@dataclass
class ScriptedServer:
    """Reads each request head (and a sized body), hands it to `answer`, writes what it returns;
    `None` closes the connection without an answer, `hang` answers never."""

    answer: Answer
    hang: bool = False
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if self.hang:
                    await asyncio.sleep(60)
                answer = self.answer(request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def scripted() -> AsyncIterator[Start]:
    servers: list[asyncio.Server] = []

    async def start(answer: Answer, hang: bool = False) -> ScriptedServer:
        script = ScriptedServer(answer, hang)
        server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
        servers.append(server)
        script.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return script

    yield start
    for server in servers:
        server.close()


async def test_chunked_answers_are_read_whole_and_the_connection_is_kept(
    scripted: Start,
) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"sta\r\na\r\ntus":"ok"}\r\n0\r\n\r\n'
    )
    server = await scripted(lambda request: chunked)
    async with Client(server.url) as client:
        assert await client.health() == {"status": "ok"}
        assert await client.health() == {"status": "ok"}
    assert server.connections == 1
    assert server.requests[0].startswith(b"GET /ojs/v1/health HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in server.requests[0]


async def test_a_closed_keep_alive_connection_is_retried_for_a_get_not_for_a_post(
    scripted: Start,
) -> None:
    answered: list[bytes] = []

    def once_per_connection(request: bytes) -> bytes | None:
        """Answer the first request of a connection, then close it (no `Connection: close`)."""
        if answered and answered[-1] == b"open":
            answered.append(b"closed")
            return None
        answered.append(b"open")
        return sized()

    server = await scripted(once_per_connection)
    async with Client(server.url) as client:
        await client.health()
        assert await client.health() == {"status": "ok"}  # retried on a second connection
        with pytest.raises(UnreachableError, match="closed the connection"):
            await client._request("POST", "/ojs/v1/jobs", {"type": "a.b", "args": []})
        assert await client.health() == {"status": "ok"}  # a third
    assert server.connections == 3


async def test_no_answer_within_the_timeout_is_unreachable(
    scripted: Start,
) -> None:
    server = await scripted(lambda request: sized(), hang=True)
    async with Client(server.url, timeout=0.2) as client:
        with pytest.raises(UnreachableError, match="TimeoutError"):
            await client.health()


async def test_a_connections_one_timer_keeps_each_requests_own_deadline(
    scripted: Start,
) -> None:
    """The timer armed for the first request's deadline fires early for a later request, which
    then gets its whole timeout; a shorter timeout than the armed timer's is kept too."""
    server = await scripted(lambda request: sized())
    loop = asyncio.get_running_loop()
    async with Client(server.url, timeout=0.5) as client:
        await client.health()  # the connection's timer: due in 0.5 s
        await asyncio.sleep(0.3)
        server.hang = True
        started = loop.time()
        with pytest.raises(UnreachableError, match="TimeoutError"):
            await client.health()  # due 0.5 s from now, after the timer's first time
        assert loop.time() - started >= 0.45
    server.hang = False
    async with Client(server.url, timeout=30) as client:
        await client.health()  # the timer: due in 30 s
        server.hang = True
        started = loop.time()
        with pytest.raises(UnreachableError, match="TimeoutError"):
            await client._request("GET", "/ojs/v1/health", timeout=0.2)
        assert loop.time() - started < 5
    assert server.connections == 2


async def test_a_refused_connection_and_a_malformed_answer_are_unreachable(
    scripted: Start,
) -> None:
    server = await scripted(lambda request: b"NOT HTTP\r\n\r\n")
    async with Client(server.url) as client:
        with pytest.raises(UnreachableError):
            await client.health()
    async with Client("http://127.0.0.1:9") as client:
        with pytest.raises(UnreachableError):
            await client.health()


async def test_paths_are_percent_encoded_and_header_line_breaks_refused(
    scripted: Start,
) -> None:
    server = await scripted(lambda request: sized(b'{"job": {"id": "x"}}'))
    async with Client(server.url + "/base/", tenant="acme") as client:
        await client._request("GET", "/ojs/v1/jobs/a b/é", params={"q": "x&y z"})
    assert server.requests[0].startswith(
        b"GET /base/ojs/v1/jobs/a%20b/%C3%A9?q=x%26y+z HTTP/1.1\r\n"
    )
    assert b"\r\nX-OJS-Tenant: acme\r\n" in server.requests[0]
    with pytest.raises(InvalidRequestError):
        Client(server.url, tenant="acme\r\nX-Injected: 1")


async def test_each_request_is_written_whole_whether_its_head_was_kept_or_not(
    scripted: Start,
) -> None:
    """A request's head is kept for the next of the same method and path (without a query): the
    next is written as the first was, with its own body and length, and a query, a minimal
    answer's headers or another method never reuse another request's head."""
    server = await scripted(lambda request: sized(b'{"job": {"id": "x"}}'))
    async with Client(server.url) as client:
        await client._request("POST", "/ojs/v1/jobs", {"type": "a"})
        await client._request("POST", "/ojs/v1/jobs", {"type": "bb"})
        await client._request("POST", "/ojs/v1/jobs", {"type": "a"}, minimal=True)
        await client._request("GET", "/ojs/v1/jobs", params={"q": "1"})
        await client._request("GET", "/ojs/v1/jobs")
        await client._request("POST", "/ojs/v1/jobs")
    first, second, minimal, queried, plain, empty = server.requests
    head = b"POST /ojs/v1/jobs HTTP/1.1\r\n"
    assert first.startswith(head) and first.endswith(b'Content-Length: 12\r\n\r\n{"type":"a"}')
    assert second == first.replace(b"12\r\n\r\n", b"13\r\n\r\n").replace(b'"a"', b'"bb"')
    assert minimal.startswith(head) and b"\r\nPrefer: return=minimal\r\n" in minimal
    assert b"Prefer" not in first + second
    assert queried.startswith(b"GET /ojs/v1/jobs?q=1 HTTP/1.1\r\n")
    assert plain.startswith(b"GET /ojs/v1/jobs HTTP/1.1\r\n") and plain.endswith(b"\r\n\r\n")
    assert b"Content-Length" not in plain + queried and b"Content-Type" not in plain
    assert empty.startswith(head) and empty.endswith(b"\r\nContent-Length: 0\r\n\r\n")
    assert b"Content-Type" not in empty


async def test_a_proxy_from_the_environment_gets_the_whole_url_and_its_credentials(
    scripted: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await scripted(lambda request: sized())
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("://", "://ada:s%40cret@"))
    async with Client("http://jobs.internal:8080") as client:
        assert await client.health() == {"status": "ok"}
    request = proxy.requests[0]
    assert request.startswith(b"GET http://jobs.internal:8080/ojs/v1/health HTTP/1.1\r\n")
    assert b"\r\nHost: jobs.internal:8080\r\n" in request
    assert b"\r\nProxy-Authorization: Basic YWRhOnNAY3JldA==\r\n" in request


@pytest.fixture
def authority(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> trustme.CA:
    """A certificate authority the client trusts (SSL_CERT_FILE, as the system's are read)."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return ca


async def tls_server(authority: trustme.CA) -> tuple[ScriptedServer, asyncio.Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(context)
    script = ScriptedServer(lambda request: sized())
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0, ssl=context)
    script.url = f"https://localhost:{server.sockets[0].getsockname()[1]}"
    return script, server


async def test_https_with_the_trusted_certificates(authority: trustme.CA) -> None:
    script, server = await tls_server(authority)
    async with Client(script.url) as client:
        assert await client.health() == {"status": "ok"}
        assert await client.health() == {"status": "ok"}
    server.close()
    assert script.connections == 1
    assert b"\r\nHost: localhost:" in script.requests[0]


async def test_https_through_a_proxy_goes_in_a_tunnel(
    authority: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, server = await tls_server(authority)
    asked: list[bytes] = []
    closed = asyncio.Event()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65_536):
            writer.write(data)
        writer.close()

    async def tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.readuntil(b"\r\n\r\n"))
        port = int(asked[-1].split(b" ")[1].rsplit(b":", 1)[1])
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        closed.set()

    proxy = await asyncio.start_server(tunnel, "127.0.0.1", 0)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}")
    async with Client(script.url) as client:
        assert await client.health() == {"status": "ok"}
    await asyncio.wait_for(closed.wait(), 5)  # the client's close went through the tunnel
    proxy.close()
    server.close()
    assert asked[0].startswith(b"CONNECT localhost:")
    assert script.requests[0].startswith(b"GET /ojs/v1/health HTTP/1.1\r\n")
