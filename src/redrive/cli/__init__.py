"""The command line: `redrive serve`, `redrive migrate` (the composition root)."""

from __future__ import annotations

from redrive.process import collect_rarely

# First: every command starts by importing what follows (process.collect_rarely says why).
collect_rarely()

import asyncio
import importlib
import logging
import sys
from typing import TYPE_CHECKING, Any, cast

import typer
from typer import _click as click  # typer's own click, which its TyperGroup is made of
from typer.core import TyperGroup

from redrive import __version__
from redrive.cli.remote import CREDENTIALS, EXIT_CODES_HELP, stderr
from redrive.cli.worker import worker
from redrive.composition import (
    FIRST_KEY_HINT,
    ConfigurationError,
    auth_required,
    build_app,
    build_service,
    open_ready_store,
    open_store,
    redactor,
)
from redrive.domain.caller import SYSTEM
from redrive.logs import configure_logging
from redrive.process import run, tune_garbage_collector
from redrive.settings import Settings

if TYPE_CHECKING:
    from redrive.service.facade import Service

log = logging.getLogger("redrive")


def _settings_help() -> str:
    rows = [f"  {name}={default!s}  {text}" for name, default, text in Settings.describe()]
    return "Settings (environment variables or redrive.toml), with defaults:\n\n" + "\n\n".join(
        rows
    )


# The commands that talk to a server or a database through the client, by name: each is
# imported when it runs (or help lists it), so `redrive worker` and `redrive serve` start
# without the client's models and rich's tables and progress bars (~40 ms CPU of a worker's
# start). Each names its module and its Typer app, or (`enqueue`) its command function.
REMOTE_GROUPS = {
    "dlq": ("redrive.cli.dead_letters", "dead_letter_commands"),
    "jobs": ("redrive.cli.jobs", "jobs"),
    "queues": ("redrive.cli.queues", "queues"),
    "keys": ("redrive.cli.keys", "keys"),
    "audit": ("redrive.cli.audit", "audit"),
    "incidents": ("redrive.cli.incidents", "incidents"),
    "holds": ("redrive.cli.legal_holds", "holds"),
    "alerts": ("redrive.cli.alerts", "alerts"),
    "webhooks": ("redrive.cli.webhooks", "webhooks"),
    "redrives": ("redrive.cli.redrives", "redrives"),
}
REMOTE_COMMANDS = {"enqueue": ("redrive.cli.jobs", "enqueue")}
REMOTE = {**REMOTE_GROUPS, **REMOTE_COMMANDS}


def remote_command(name: str) -> click.Command:
    """The click command of REMOTE[name], its module imported now, made as `app.add_typer` and
    `app.command` made it when every module was imported with this one."""
    module_name, attribute = REMOTE[name]
    found = getattr(importlib.import_module(module_name), attribute)
    holder = typer.Typer(add_completion=False)
    holder.callback()(lambda: None)  # a group, as `redrive` is, whatever it holds
    if name in REMOTE_GROUPS:
        holder.add_typer(found, name=name)
    else:
        holder.command(name, epilog=EXIT_CODES_HELP)(found)
    return cast(TyperGroup, typer.main.get_command(holder)).commands[name]


class RootCommands(TyperGroup):
    """`redrive`'s commands: those defined here, and REMOTE's, each imported on first use. Help
    lists them in the order they were added when all were imported at once: serve, migrate,
    enqueue, worker, version, then the groups."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        here = super().list_commands(ctx)
        position = here.index("migrate") + 1
        return [*here[:position], *REMOTE_COMMANDS, *here[position:], *REMOTE_GROUPS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in REMOTE:
            found = remote_command(cmd_name)
            self.add_command(found, cmd_name)
        return found


app = typer.Typer(
    cls=RootCommands,
    help="redrive: an Open Job Spec job server built around the dead-letter queue.",
    no_args_is_help=True,
    add_completion=False,
    epilog=EXIT_CODES_HELP,
)


@app.callback()
def credentials(
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="REDRIVE_API_KEY",
        help="API key sent to the server as 'Authorization: Bearer' (remote commands)",
        show_envvar=True,
    ),
) -> None:
    """redrive: an Open Job Spec job server built around the dead-letter queue."""
    CREDENTIALS.api_key = api_key or None


def _load_settings(**overrides: object) -> Settings:
    values = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**values)
    except ValueError as error:
        stderr().print(f"[red]invalid settings:[/red] {error}")
        raise typer.Exit(2) from error


async def _serve(settings: Settings) -> None:
    import uvicorn  # here, not with the CLI: `redrive worker` starts without it (125 ms)
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from redrive.api.app import RedriveApp
    from redrive.api.server_protocol import JoinedWritesProtocol

    store, applied = await open_ready_store(settings)
    if applied:
        log.info("applied migrations %s", ", ".join(applied))
    required = auth_required(settings)
    application = build_app(store, settings, authenticate=required)
    if required:
        service: Service = application.state.service
        if await service.keys.live_key_count(SYSTEM) == 0:
            await store.close()
            raise ConfigurationError(
                f"auth is on (serving on {settings.host}) but the database holds no live API "
                f"key, so nobody could use this server; {FIRST_KEY_HINT}"
            )
        access = "auth on: every request needs an API key"
    else:
        access = (
            "auth off: loopback only, anyone on this machine acts as admin "
            "(REDRIVE_AUTH=on to require API keys)"
        )
    config = uvicorn.Config(
        application,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=settings.log_level == "debug",
        lifespan="on",
        http=JoinedWritesProtocol,
        # No `server: uvicorn` header: naming the server software helps only an attacker
        # (common hardening), and uvicorn checks each header of every response in Python.
        server_header=False,
        # uvicorn's proxy-header step (X-Forwarded-For and -Proto from FORWARDED_ALLOW_IPS)
        # runs only for the requests that name them: the app puts it in (`ProtocolHeaders`).
        proxy_headers=False,
    )
    trusted = config.forwarded_allow_ips

    def proxy_headers(app: Any) -> Any:
        return ProxyHeadersMiddleware(app, trusted_hosts=trusted)

    cast(RedriveApp, application).proxy_headers = proxy_headers
    server = uvicorn.Server(config)
    log.info(
        "redrive %s serving on http://%s:%d (%s); %s",
        __version__, settings.host, settings.port, store.backend, access,
    )  # fmt: skip
    await server.serve()


@app.command(epilog=_settings_help())
def serve(
    host: str | None = typer.Option(None, help="address to listen on [REDRIVE_HOST]"),
    port: int | None = typer.Option(None, help="port to listen on [REDRIVE_PORT]"),
    database_url: str | None = typer.Option(None, help="database URL [REDRIVE_DATABASE_URL]"),
    auth: str | None = typer.Option(
        None, help="API keys: auto (required beyond loopback), on, or off [REDRIVE_AUTH]"
    ),
) -> None:
    """Run the OJS HTTP server (migrates the database first)."""
    settings = _load_settings(host=host, port=port, database_url=database_url, auth=auth)
    tune_garbage_collector()
    try:
        configure_logging(settings.log_level, settings.log_format, redactor(settings))
        run(_serve(settings))
    except ConfigurationError as error:
        stderr().print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    except OSError as error:
        stderr().print(f"[red]cannot start: {error}[/red]")
        raise typer.Exit(1) from error


async def _migrate(settings: Settings) -> tuple[list[str], int]:
    """The migrations applied, and how many dead letters from before incidents were then
    fingerprinted into their incidents (a batch per transaction: a large table is fine, and an
    interrupted run goes on where it stopped the next time)."""
    store = await open_store(settings)
    try:
        applied = await store.migrate()
        return applied, await build_service(store, settings).incidents.backfill()
    finally:
        await store.close()


@app.command(epilog=_settings_help())
def migrate(
    database_url: str | None = typer.Option(None, help="database URL [REDRIVE_DATABASE_URL]"),
) -> None:
    """Apply pending database migrations, then file dead letters from before incidents into
    their incidents, and exit."""
    settings = _load_settings(database_url=database_url)
    configure_logging(settings.log_level, settings.log_format)
    try:
        applied, fingerprinted = asyncio.run(_migrate(settings))
    except ConfigurationError as error:
        stderr().print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    stderr().print(f"applied: {', '.join(applied)}" if applied else "database is up to date")
    if fingerprinted:
        stderr().print(f"filed {fingerprinted} older dead letter(s) into their incidents")


app.command(epilog=_settings_help())(worker)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app(prog_name="redrive")


if __name__ == "__main__":
    main()
    sys.exit(0)
