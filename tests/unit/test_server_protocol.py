"""`redrive serve`'s joined writes: what a step of the event loop writes arrives whole and in order,
as one send when it is small, over a real loopback TCP connection."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from redrive.api.server_protocol import HELD_BYTES, JoinedWrites

pytestmark = pytest.mark.anyio


class Sends(asyncio.Protocol):
    """The server end of the connection under test, counting the transport's writes."""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.sends: list[bytes] = []
        original = transport.write

        def counted(data: bytes) -> None:
            self.sends.append(bytes(data))
            original(data)

        transport.write = counted


@asynccontextmanager
async def connected() -> AsyncIterator[tuple[JoinedWrites, Sends, socket.socket]]:
    loop = asyncio.get_running_loop()
    made: asyncio.Future[Sends] = loop.create_future()

    def factory() -> Sends:
        protocol = Sends()
        loop.call_soon(made.set_result, protocol)
        return protocol

    server = await loop.create_server(factory, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    peer = socket.create_connection(("127.0.0.1", port))
    peer.settimeout(5)
    protocol = await made
    try:
        yield JoinedWrites(protocol.transport, loop), protocol, peer
    finally:
        peer.close()
        server.close()
        await server.wait_closed()


def received(peer: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = peer.recv(size - len(data))
        assert chunk, "the connection closed early"
        data += chunk
    return data


async def test_a_head_and_a_body_written_in_one_step_go_out_as_one_send() -> None:
    async with connected() as (joined, protocol, peer):
        head = b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n"
        joined.write(head)
        joined.write(b"{}")
        assert protocol.sends == []  # held until the step ends
        await asyncio.sleep(0)
        assert protocol.sends == [head + b"{}"]
        assert await asyncio.to_thread(received, peer, len(head) + 2) == head + b"{}"


async def test_a_large_write_goes_out_at_once_after_what_was_held() -> None:
    large = b"x" * HELD_BYTES
    async with connected() as (joined, protocol, peer):
        joined.write(b"head")
        joined.write(large)
        assert protocol.sends == [b"head" + large]
        joined.write(large)  # nothing held: straight through
        assert len(protocol.sends) == 2
        expected = b"head" + large + large
        assert await asyncio.to_thread(received, peer, len(expected)) == expected


async def test_close_sends_what_is_held_first() -> None:
    async with connected() as (joined, protocol, peer):
        joined.write(b"last words")
        joined.close()
        assert await asyncio.to_thread(received, peer, 10) == b"last words"
        assert await asyncio.to_thread(peer.recv, 1) == b""  # then the close
        await asyncio.sleep(0)  # the scheduled flush finds nothing left to send
        assert protocol.sends == [b"last words"]
