"""Starts and stops a real `redrive serve` subprocess for the conformance tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

HOST = "127.0.0.1"
HEALTH_PATH = "/ojs/v1/health"
STARTUP_TIMEOUT_SECONDS = 30.0
SHUTDOWN_GRACE_SECONDS = 10.0
POLL_INTERVAL_SECONDS = 0.1
LOG_TAIL_CHARACTERS = 6000


class ServerStartError(RuntimeError):
    """The server process exited or never became healthy."""


def find_free_port() -> int:
    """A port that was free a moment ago (bind port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def server_environment(
    database_url: str, work_directory: Path, auth: bool = False
) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update(
        {
            "REDRIVE_DATABASE_URL": database_url,
            "REDRIVE_ARCHIVE_DIR": str(work_directory / "archive"),
            "REDRIVE_TEST_HOOKS": "1",
            "REDRIVE_LOG_LEVEL": "warning",
            "PYTHONUNBUFFERED": "1",
            "REDRIVE_AUTH": "on" if auth else "auto",
            # PostgreSQL has no key file: the server key that seals webhook secrets is given.
            "REDRIVE_SECRET_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        }
    )
    return environment


def make_key(database_url: str, work_directory: Path) -> str:
    """An admin key for every tenant, made the way a user makes the first one (the CLI, on the
    database); the auth-on run sends it with every request."""
    made = subprocess.run(
        [sys.executable, "-m", "redrive", "keys", "create", "--database", database_url,
         "--tenant", "conformance", "--role", "admin", "--name", "conformance",
         "--all-tenants", "--json"],
        env=server_environment(database_url, work_directory), capture_output=True, check=True,
    )  # fmt: skip
    key: str = json.loads(made.stdout)["key"]
    return key


class RedriveServer:
    """One `python -m redrive serve` process on a free local port, logging to a file."""

    def __init__(
        self,
        database_url: str,
        work_directory: Path,
        api_key: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.api_key = api_key
        # Set over `server_environment`'s (a test's own settings).
        self.environment = dict(environment or {})
        self.work_directory = work_directory
        self.port = find_free_port()
        self.log_path = work_directory / "server.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", "redrive", "serve", "--host", HOST, "--port", str(self.port)]

    def start(self) -> None:
        """Launch the process and wait until the health endpoint answers 200."""
        self.work_directory.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("wb")
        self._process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={
                **server_environment(
                    self.database_url, self.work_directory, auth=self.api_key is not None
                ),
                **self.environment,
            },
        )
        try:
            self._wait_until_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_until_healthy(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        last_problem = "no answer yet"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                exit_code = self._process.poll()
                if exit_code is not None:
                    raise ServerStartError(
                        f"`{' '.join(self.command)}` exited with code {exit_code} before it was "
                        f"healthy; its output:\n{self.log_tail()}"
                    )
                try:
                    response = client.get(self.base_url + HEALTH_PATH)
                except httpx.TransportError as error:
                    last_problem = f"{type(error).__name__}: {error}"
                else:
                    if response.status_code == 200:
                        return
                    last_problem = f"{response.status_code}: {response.text[:500]}"
                time.sleep(POLL_INTERVAL_SECONDS)
        raise ServerStartError(
            f"GET {HEALTH_PATH} did not answer 200 within {STARTUP_TIMEOUT_SECONDS:.0f} s "
            f"(last: {last_problem}); server output:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after the grace period; close the log."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=SHUTDOWN_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_position(self) -> int:
        """The current size of the log, to read what a test adds with `log_since`."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, position: int, limit: int = LOG_TAIL_CHARACTERS) -> str:
        """What the server logged after `position`, keeping the last `limit` characters."""
        if self._log_file is not None:
            self._log_file.flush()
        try:
            with self.log_path.open("rb") as log:
                log.seek(position)
                text = log.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        if len(text) > limit:
            return f"[... {len(text) - limit} earlier characters ...]\n{text[-limit:]}"
        return text

    def log_tail(self, limit: int = LOG_TAIL_CHARACTERS) -> str:
        return self.log_since(0, limit) or "<no output>"

    def __enter__(self) -> RedriveServer:
        self.start()
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def headers(self) -> dict[str, str]:
        """What every request to this server carries: its API key when auth is on."""
        return {} if self.api_key is None else {"Authorization": f"Bearer {self.api_key}"}


@contextmanager
def running_server(
    database_url: str, work_directory: Path, auth: bool = False
) -> Iterator[RedriveServer]:
    """A healthy server for the duration of the block; with `auth`, one that needs API keys."""
    work_directory.mkdir(parents=True, exist_ok=True)
    api_key = make_key(database_url, work_directory) if auth else None
    with RedriveServer(database_url, work_directory, api_key) as server:
        yield server
