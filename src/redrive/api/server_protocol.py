"""The HTTP/1.1 protocol `redrive serve` gives uvicorn: its httptools protocol, each response sent
in one write rather than one for the status line and headers and another for the body."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# Writes are held to be joined only while they are small: a larger body goes out at once (with
# what is held before it), so a long streamed answer never waits in this layer and uvicorn's flow
# control still sees the transport's buffer.
HELD_BYTES = 65_536


class JoinedWrites:
    """A transport whose small writes made in one step of the event loop go out as one write,
    at the end of that step. uvicorn writes a response's head and its body separately, and each
    write was a send to the socket: for an enqueue that is two trips through the loopback TCP
    stack (the costliest calls of `redrive serve` per request, with the client woken by the first
    and often again by the second). Everything but `write` and `close` is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held and len(data) >= HELD_BYTES:
            self._transport.write(data)
            return
        self._held.append(bytes(data))
        self._held_bytes += len(data)
        if self._held_bytes >= HELD_BYTES:
            self.flush()
        elif len(self._held) == 1:
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send what is held (at the end of the step, or before a close or a large write)."""
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held = []
        self._held_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a `JoinedWrites` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        joined: Any = JoinedWrites(transport, self.loop)
        super().connection_made(joined)
