"""A TCP proxy in front of PostgreSQL that names each message the clients send through it."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from urllib.parse import urlsplit, urlunsplit

# The frontend messages of the PostgreSQL protocol, by their type byte.
FRONTEND = {
    b"Q": "Query", b"P": "Parse", b"B": "Bind", b"E": "Execute", b"D": "Describe", b"S": "Sync",
    b"C": "Close", b"H": "Flush", b"X": "Terminate", b"p": "Password", b"d": "CopyData",
    b"c": "CopyDone", b"f": "CopyFail", b"F": "FunctionCall",
}  # fmt: skip
# Startup requests answered with one byte (and refused: the proxied URL disables TLS), after
# which the client sends its startup message.
ENCRYPTION_REQUESTS = {80877103, 80877104}


class Wire:
    """Forwards every connection to the server unchanged, and while `recording()` is open keeps
    the name of each message the clients send (Parse, Bind, Execute, Sync, Query, ...)."""

    def __init__(self, url: str) -> None:
        self.target = urlsplit(url)
        self.messages: list[str] = []
        self._recording = False
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()

    @property
    def round_trips(self) -> int:
        """Each Sync or simple Query is one wait for the server's answer."""
        return sum(message in ("Sync", "Query") for message in self.messages)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        """Listen on a free local port; yield the URL that reaches the server through it."""
        self._server = await asyncio.start_server(self._proxy, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        user, at, _ = self.target.netloc.rpartition("@")
        netloc = f"{user}{at}127.0.0.1:{port}"
        query = "&".join(part for part in (self.target.query, "sslmode=disable") if part)
        try:
            yield urlunsplit((self.target.scheme, netloc, self.target.path, query, ""))
        finally:
            self._server.close()
            for pump in list(self._pumps):
                pump.cancel()
            await asyncio.gather(*self._pumps, return_exceptions=True)
            await self._server.wait_closed()

    @contextmanager
    def recording(self) -> Iterator[None]:
        self.messages = []
        self._recording = True
        try:
            yield
        finally:
            self._recording = False

    async def _proxy(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        host, port = self.target.hostname or "127.0.0.1", self.target.port or 5432
        server, to_server = await asyncio.open_connection(host, port)
        pumps = [
            asyncio.create_task(self._client_messages(client, to_server)),
            asyncio.create_task(_copy(server, to_client)),
        ]
        self._pumps.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            self._pumps.difference_update(pumps)
            for writer in (to_server, to_client):
                writer.close()

    async def _client_messages(
        self, client: asyncio.StreamReader, to_server: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:  # startup: a length, then a request code or protocol version
                header = await client.readexactly(8)
                length, code = struct.unpack("!ii", header)
                to_server.write(header + await client.readexactly(length - 8))
                if code not in ENCRYPTION_REQUESTS:
                    break
            while True:
                header = await client.readexactly(5)
                (length,) = struct.unpack("!i", header[1:])
                to_server.write(header + await client.readexactly(length - 4))
                await to_server.drain()
                if self._recording:
                    self.messages.append(FRONTEND.get(header[:1], repr(header[:1])))


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
