"""The command line: `redrive serve`, `redrive migrate` (the composition root)."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from redrive import __version__
from redrive.cli.alerts import alerts
from redrive.cli.audit import audit
from redrive.cli.dead_letters import dead_letter_commands
from redrive.cli.incidents import incidents
from redrive.cli.jobs import enqueue, jobs
from redrive.cli.keys import keys
from redrive.cli.legal_holds import holds
from redrive.cli.queues import queues
from redrive.cli.redrives import redrives
from redrive.cli.remote import CREDENTIALS, EXIT_CODES_HELP
from redrive.cli.webhooks import webhooks
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
console = Console(stderr=True)


def _settings_help() -> str:
    rows = [f"  {name}={default!s}  {text}" for name, default, text in Settings.describe()]
    return "Settings (environment variables or redrive.toml), with defaults:\n\n" + "\n\n".join(
        rows
    )


app = typer.Typer(
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
        console.print(f"[red]invalid settings:[/red] {error}")
        raise typer.Exit(2) from error


async def _serve(settings: Settings) -> None:
    import uvicorn  # here, not with the CLI: `redrive worker` starts without it (125 ms)

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
    )
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
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    except OSError as error:
        console.print(f"[red]cannot start: {error}[/red]")
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
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    console.print(f"applied: {', '.join(applied)}" if applied else "database is up to date")
    if fingerprinted:
        console.print(f"filed {fingerprinted} older dead letter(s) into their incidents")


app.add_typer(dead_letter_commands, name="dlq")
app.add_typer(jobs, name="jobs")
app.add_typer(queues, name="queues")
app.add_typer(keys, name="keys")
app.add_typer(audit, name="audit")
app.add_typer(incidents, name="incidents")
app.add_typer(holds, name="holds")
app.add_typer(alerts, name="alerts")
app.add_typer(webhooks, name="webhooks")
app.add_typer(redrives, name="redrives")
app.command("enqueue", epilog=EXIT_CODES_HELP)(enqueue)
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
