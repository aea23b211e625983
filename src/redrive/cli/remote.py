"""Where CLI commands send their calls: a server (--url) or a database in-process (--database),
both through the Python client; client errors become messages and exit codes."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

from redrive.client.errors import (
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    RedriveError,
    UnauthenticatedError,
    UnreachableError,
)
from redrive.client.transport import DEFAULT_URL
from redrive.composition import ConfigurationError, build_in_process_app, open_ready_store
from redrive.domain.frozen import frozen_dataclass
from redrive.settings import Settings

# rich is imported when something is printed, not with this module: `redrive worker` and
# `redrive serve` import it for the exit codes and the consoles, and start without rich
# (about 30 ms of CPU per process start, measured).
if TYPE_CHECKING:
    from rich.console import Console

    from redrive.client.client import Client
    from redrive.ports import Store


def stdout() -> Console:
    """A console made when printing, so it measures the terminal (or COLUMNS) as it is then,
    not as it was when the CLI was imported."""
    from rich.console import Console

    return Console()


def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True)


Result = TypeVar("Result")

# Exit codes scripts can rely on (also in `redrive --help` and the README).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_DENIED = 6
EXIT_ABORTED = 130
EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 operation failed or server error; 2 bad usage or invalid input; "
    "3 server (or database) unreachable; 4 not found; 5 conflict; 6 no valid API key (401) or "
    "not allowed (403); 130 aborted at a prompt."
)
IN_PROCESS_URL = "http://redrive.in-process"
ACTOR = "cli"

URL = typer.Option(DEFAULT_URL, "--url", envvar="REDRIVE_URL", help="server URL", show_envvar=True)
DATABASE = typer.Option(
    None,
    "--database",
    help="talk straight to this database (sqlite:///PATH or postgresql://...), no server needed",
)
TENANT = typer.Option(None, "--tenant", envvar="REDRIVE_TENANT", help="tenant id (X-OJS-Tenant)")
JSON = typer.Option(False, "--json", help="print JSON on stdout for scripts")


@frozen_dataclass
class Target:
    """A server URL, or a database URL to serve in-process; and the tenant to act as."""

    url: str = DEFAULT_URL
    database: str | None = None
    tenant: str | None = None


def fail(message: str, code: int, hint: str | None = None) -> NoReturn:
    from rich.markup import escape

    stderr().print(f"[red]error:[/red] {escape(message)}", highlight=False)
    if hint:
        stderr().print(f"hint: {escape(hint)}", highlight=False)
    raise typer.Exit(code)


def confirm(question: str) -> None:
    """Ask; anything but yes (including end of input) exits with 130."""
    try:
        agreed = typer.confirm(question, default=False, err=True)
    except typer.Abort:
        agreed = False
    if not agreed:
        stderr().print("aborted; nothing changed")
        raise typer.Exit(EXIT_ABORTED)


class DatabaseUnavailable(Exception):
    """--database named a database that could not be opened or migrated."""


def masked(url: str) -> str:
    """The database URL without its password."""
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


async def _open_database(url: str) -> tuple[Store, Settings]:
    try:
        settings = Settings(database_url=url)
    except ValueError as error:
        raise ConfigurationError(f"invalid settings: {error}") from error
    store, _ = await open_ready_store(settings)
    return store, settings


@dataclass
class Credentials:
    """What `redrive --api-key` (or REDRIVE_API_KEY) gave: set by the root command before any
    subcommand runs, sent to a server; the in-process client needs none."""

    api_key: str | None = None


CREDENTIALS = Credentials()


@asynccontextmanager
async def open_client(target: Target, key: str | None = None) -> AsyncIterator[Client]:
    """A client for the server at the URL, or for an app built in-process over the database."""
    # Here, not with the module: `redrive worker` and `serve` import this one, not the client.
    from redrive.client.client import Client

    if target.database is None:
        async with Client(target.url, tenant=target.tenant, actor=ACTOR, api_key=key) as client:
            yield client
        return
    try:
        store, settings = await _open_database(target.database)
    except ConfigurationError:
        raise
    except Exception as error:
        raise DatabaseUnavailable(f"{type(error).__name__}: {error}") from error
    import httpx  # only for --database: the server's commands and the worker start without it

    try:
        transport = httpx.ASGITransport(app=build_in_process_app(store, settings))
        async with Client(
            IN_PROCESS_URL, tenant=target.tenant, transport=transport, actor=ACTOR
        ) as client:
            yield client
    finally:
        await store.close()


def _exit_code(error: RedriveError) -> int:
    if isinstance(error, UnreachableError):
        return EXIT_UNREACHABLE
    if isinstance(error, (UnauthenticatedError, ForbiddenError)):
        return EXIT_DENIED
    if isinstance(error, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(error, ConflictError):
        return EXIT_CONFLICT
    if isinstance(error, InvalidRequestError):
        return EXIT_USAGE
    return EXIT_FAILED


def _hint(error: RedriveError, target: Target) -> str | None:
    if isinstance(error, UnreachableError):
        return (
            "is the server running? start it with `redrive serve`, or pass --url "
            "(REDRIVE_URL), or use --database to work on the database directly"
        )
    if isinstance(error, UnauthenticatedError):
        return "pass an API key with --api-key or REDRIVE_API_KEY (`redrive keys create` makes one)"
    if isinstance(error, NotFoundError) and target.tenant is None:
        return error.hint or "check the id (and --tenant, if you use tenants)"
    return error.hint


def run(target: Target, operation: Callable[[Client], Awaitable[Result]]) -> Result:
    """Run one operation with a client; failures exit with a message and a code scripts trust."""

    async def call() -> Result:
        async with open_client(target, CREDENTIALS.api_key) as client:
            return await operation(client)

    try:
        return asyncio.run(call())
    except RedriveError as error:
        where = f" ({target.database})" if target.database else ""
        fail(f"{error.message} ({error.code}){where}", _exit_code(error), _hint(error, target))
    except ConfigurationError as error:
        fail(str(error), EXIT_USAGE)
    except DatabaseUnavailable as error:
        database = masked(target.database or "")
        fail(f"cannot open the database {database}: {error}", EXIT_UNREACHABLE,
             "check the --database URL and that the database server is running")  # fmt: skip
