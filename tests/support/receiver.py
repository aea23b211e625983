"""A webhook receiver for tests: a real HTTP server on 127.0.0.1, in a thread, that answers each
request with the next status it was told (or stalls past the sender's timeout) and keeps every
request it got; and an independent check of Standard Webhooks signatures."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

STALL = -1  # an answer that comes too late: the handler sleeps past the sender's timeout
STALL_SECONDS = 3.0


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """`with Receiver() as receiver:` serves on a free port; `answer(500, 200)` queues the
    statuses of the next requests (200 once they run out)."""

    def __init__(self) -> None:
        self.answers: deque[int] = deque()
        self.received: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                with receiver._lock:
                    receiver.received.append(Received(self.path, headers, body))
                    status = receiver.answers.popleft() if receiver.answers else 200
                if status == STALL:
                    time.sleep(STALL_SECONDS)
                    status = 200
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the tests read `received`, not a log."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def answer(self, *statuses: int) -> None:
        with self._lock:
            self.answers.extend(statuses)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on: every connection is refused."""
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as server:
        port = server.server_address[1]
    return f"http://127.0.0.1:{port}/down"


def signatures_of(received: Received) -> list[str]:
    return received.headers["webhook-signature"].split(" ")


def verifies(secret: str, received: Received) -> bool:
    """Whether one of the request's signatures is the one `secret` makes (written from the
    Standard Webhooks text, not from redrive's code): v1, base64 of HMAC-SHA256 over
    `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the base64 after `whsec_` (or, for a
    secret not in that form, its bytes)."""
    key = (
        base64.b64decode(secret[len("whsec_") :])
        if secret.startswith("whsec_")
        else secret.encode()
    )
    message_id = received.headers["webhook-id"]
    timestamp = received.headers["webhook-timestamp"]
    signed = message_id.encode() + b"." + timestamp.encode() + b"." + received.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for signature in signatures_of(received):
        version, _, value = signature.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return True
    return False
