"""`redrive serve`'s joined writes: a response of known length goes out in one send, everything else
as before, whole and in order, over a real loopback TCP connection."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from redrive.api.server_protocol import JOINED_BYTES, JoinedWrites, is_sized_head

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
        yield JoinedWrites(protocol.transport), protocol, peer
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


SIZED_HEAD = b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


async def test_a_head_of_known_length_goes_out_with_the_body_in_one_send() -> None:
    async with connected() as (joined, protocol, peer):
        joined.write(SIZED_HEAD)
        assert protocol.sends == []  # held for the body
        joined.write(b"{}")
        assert protocol.sends == [SIZED_HEAD + b"{}"]
        expected = SIZED_HEAD + b"{}"
        assert await asyncio.to_thread(received, peer, len(expected)) == expected


async def test_a_chunked_head_and_its_chunks_go_out_at_once() -> None:
    async with connected() as (joined, protocol, peer):
        joined.write(CHUNKED_HEAD)
        joined.write(b"2\r\n{}\r\n")
        assert protocol.sends == [CHUNKED_HEAD, b"2\r\n{}\r\n"]
        expected = CHUNKED_HEAD + b"2\r\n{}\r\n"
        assert await asyncio.to_thread(received, peer, len(expected)) == expected


async def test_a_large_body_is_not_copied_onto_its_head() -> None:
    large = b"x" * JOINED_BYTES
    async with connected() as (joined, protocol, peer):
        joined.write(SIZED_HEAD)
        joined.write(large)
        assert protocol.sends == [SIZED_HEAD, large]
        expected = SIZED_HEAD + large
        assert await asyncio.to_thread(received, peer, len(expected)) == expected


async def test_a_held_head_goes_out_on_flush_or_before_a_close() -> None:
    async with connected() as (joined, protocol, peer):
        joined.write(SIZED_HEAD)  # the answer to HEAD: no body write follows
        joined.flush()
        assert protocol.sends == [SIZED_HEAD]
        joined.write(SIZED_HEAD)
        joined.close()
        assert protocol.sends == [SIZED_HEAD, SIZED_HEAD]
        expected = SIZED_HEAD + SIZED_HEAD
        assert await asyncio.to_thread(received, peer, len(expected)) == expected
        assert await asyncio.to_thread(peer.recv, 1) == b""  # then the close


@pytest.mark.parametrize(
    ("data", "sized"),
    [
        (SIZED_HEAD, True),
        (CHUNKED_HEAD, False),
        (b"HTTP/1.1 100 Continue\r\n\r\n", False),
        (b"content-length: 2\r\n\r\n", False),  # not a head
        (SIZED_HEAD[:-2], False),  # not a whole head
    ],
)
def test_only_a_whole_head_that_declares_its_length_is_held(data: bytes, sized: bool) -> None:
    assert is_sized_head(data) is sized
