"""The HTTP/1.1 protocol `redrive serve` gives uvicorn: its httptools protocol, with a response of
known length sent in one write rather than one for the head and another for the body."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# A body at least this large is not copied to be joined to the head: two writes then.
JOINED_BYTES = 65_536


def is_sized_head(data: bytes) -> bool:
    """Whether `data` is a whole response head, as uvicorn writes it (header names in lower
    case), that declares a Content-Length: a head whose body comes next. (`find`, not `in`:
    `bytes in bytes` first tries the needle as an integer, a TypeError raised, formatted and
    dropped each time.)"""
    return (
        data.startswith(b"HTTP/")
        and data.endswith(b"\r\n\r\n")
        and data.find(b"\r\ncontent-length:") != -1
    )


class JoinedWrites:
    """A transport that holds a response head declaring its length until the body's first
    write, then sends both in one write. uvicorn writes a response's head and its body
    separately, and each write was a send to the socket: for an enqueue, two trips through the
    loopback TCP stack (the costliest calls `redrive serve` makes per request), the client often
    woken by each. A chunked head (a stream, whose body may come much later) and everything
    else goes out at once, as before. Everything but `write` and `close` is the transport's."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None
        # What uvicorn asks of every request's transport, found here rather than through
        # __getattr__ (a failed lookup first, then a call: measurable per request).
        self.is_closing = transport.is_closing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head, self._head = self._head, None
        if head is not None:
            if len(data) < JOINED_BYTES:
                self._transport.write(head + bytes(data))
                return
            self._transport.write(head)
        elif type(data) is bytes and is_sized_head(data):
            self._head = data
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Send a held head (a response that ended without a body write: HEAD)."""
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a `JoinedWrites` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._joined = JoinedWrites(transport)
        joined: Any = self._joined
        super().connection_made(joined)

    def on_response_complete(self) -> None:
        self._joined.flush()
        super().on_response_complete()
