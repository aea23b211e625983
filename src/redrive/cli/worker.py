"""`redrive worker MODULE:ATTRIBUTE`: run a Worker against a server (HTTP) or the database."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from redrive.cli.remote import stderr
from redrive.composition import ConfigurationError, redactor
from redrive.logs import configure_logging
from redrive.process import run, tune_garbage_collector
from redrive.settings import Settings
from redrive.worker.runtime import Worker

if TYPE_CHECKING:
    from redrive.service.facade import Service

DEFAULT_URL = "http://127.0.0.1:8080"
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
log = logging.getLogger("redrive.worker")


class DatabaseUnreachable(Exception):
    """The database of an embedded worker could not be opened or migrated."""


def _usage(message: str) -> typer.Exit:
    stderr().print(f"[red]error:[/red] {message}")
    return typer.Exit(EXIT_USAGE)


def load_worker(target: str) -> Worker:
    """Import `module:attribute` (the current directory is importable) and check it is a Worker."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise _usage(f"expected MODULE:ATTRIBUTE (for example tasks:worker), got {target!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # the user's module may fail in any way while importing
        raise _usage(
            f"cannot import module {module_name!r}: {type(error).__name__}: {error}"
        ) from error
    found: object = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise _usage(f"module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not isinstance(found, Worker):
        raise _usage(f"{target} is a {type(found).__name__}, not a redrive Worker")
    return found


def _configure(
    worker: Worker,
    queues: str | None,
    concurrency: int | None,
    prefetch: int | None,
    shutdown_timeout: float | None,
    worker_id: str | None,
) -> None:
    if queues is not None:
        names = [name.strip() for name in queues.split(",") if name.strip()]
        if not names:
            raise _usage("--queues needs at least one queue name")
        worker.queues = names
    if concurrency is not None:
        if concurrency < 1:
            raise _usage("--concurrency must be at least 1")
        worker.concurrency = concurrency
    if prefetch is not None:
        if prefetch < 0:
            raise _usage("--prefetch must not be negative")
        worker.prefetch = prefetch
    if shutdown_timeout is not None:
        if shutdown_timeout < 0:
            raise _usage("--shutdown-timeout must not be negative")
        worker.shutdown_timeout = shutdown_timeout
    if worker_id:
        worker.worker_id = worker_id


async def run_over_http(worker: Worker, url: str) -> None:
    from redrive.worker.http_source import HttpJobSource

    worker.install_signal_handlers()
    await worker.run(HttpJobSource.connect(url))


async def run_embedded(worker: Worker, settings: Settings) -> None:
    """Straight to the database: the service in this process, with its own maintenance sweep
    (so retries come due and expired leases are reaped without a server) and webhook deliveries.
    The service, the stores and the loops are imported here: a worker over HTTP needs none."""
    from redrive.composition import build_service, open_ready_store
    from redrive.worker.embedded_source import EmbeddedJobSource

    try:
        store, _ = await open_ready_store(settings)
    except ConfigurationError:
        raise
    except Exception as error:  # asyncpg, pool and sqlite errors alike
        raise DatabaseUnreachable(f"{type(error).__name__}: {error}") from error
    try:
        service = build_service(store, settings)
        maintenance = asyncio.create_task(maintain(service, settings))

        def stop_if_failed(task: asyncio.Task[None]) -> None:
            """The maintenance ends only by an error: the worker stops, and it is raised."""
            if not task.cancelled() and task.exception() is not None:
                worker.stop()

        maintenance.add_done_callback(stop_if_failed)
        try:
            worker.install_signal_handlers()
            await worker.run(EmbeddedJobSource(service))
        finally:
            maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await maintenance  # re-raises what stopped it, if it stopped the worker
    finally:
        await store.close()


async def maintain(service: Service, settings: Settings) -> None:
    """The embedded worker's sweep and webhook deliveries, until cancelled. Both start one sweep
    interval after the worker, as each later sweep runs an interval after the one before: the
    worker's first claim waits neither for their imports (the sweeper imports every use-case it
    drives, ~40 ms of CPU) nor, on SQLite, behind the first sweep's dozen transactions. Nothing
    a user sees changes: a job due, a lease expired or a cron firing at start waits at most an
    interval to be handled, as one falling due between two sweeps always has."""
    interval = settings.sweep_interval_ms / 1000
    await asyncio.sleep(interval)
    from redrive.maintenance.loop import sweep_forever
    from redrive.maintenance.webhooks import DeliveryLoop

    deliveries = DeliveryLoop(service.webhooks, settings.webhook_concurrency)
    await deliveries.start()
    try:
        await sweep_forever(service.sweeper, interval)
    finally:
        await deliveries.stop()


def _exit_past_stuck_threads() -> None:
    """Sync handlers still running after the shutdown deadline were handed back already; do not
    let their threads hold the process open."""
    stuck = [
        t for t in threading.enumerate() if t.name.startswith("redrive-worker") and t.is_alive()
    ]
    if stuck:
        log.warning("%d handler threads still running after shutdown; exiting anyway", len(stuck))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def worker(
    target: str = typer.Argument(..., metavar="MODULE:ATTRIBUTE", help="e.g. tasks:worker"),
    url: str | None = typer.Option(
        None, envvar="REDRIVE_URL", help=f"OJS server to work for (default {DEFAULT_URL})"
    ),
    embedded: bool = typer.Option(
        False, "--embedded", help="no server: fetch straight from the database in this process"
    ),
    database_url: str | None = typer.Option(
        None, help="database for --embedded [REDRIVE_DATABASE_URL]"
    ),
    queues: str | None = typer.Option(None, help="comma-separated queues, in priority order"),
    concurrency: int | None = typer.Option(None, help="jobs run at once (default 100)"),
    prefetch: int | None = typer.Option(None, help="jobs claimed ahead of a free slot"),
    shutdown_timeout: float | None = typer.Option(
        None, help="seconds to let running jobs finish on SIGTERM (default 30)"
    ),
    worker_id: str | None = typer.Option(None, help="name shown in the admin worker list"),
) -> None:
    """Run the handlers of a Worker (MODULE:ATTRIBUTE) until SIGTERM or SIGINT."""
    try:
        settings = Settings(database_url=database_url) if database_url else Settings()
    except ValueError as error:
        raise _usage(f"invalid settings: {error}") from error
    try:
        configure_logging(settings.log_level, settings.log_format, redactor(settings))
    except ConfigurationError as error:
        raise _usage(str(error)) from error
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))
    if database_url and not embedded:
        raise _usage("--database-url only applies with --embedded")
    found = load_worker(target)
    _configure(found, queues, concurrency, prefetch, shutdown_timeout, worker_id)
    tune_garbage_collector()  # after the handlers' module is imported: that is start-up too
    try:
        if embedded:
            # uvloop (process.run), whichever store: on PostgreSQL, where asyncpg's sockets are
            # most of the loop's work, the pure-Python loop cost a quarter more CPU (2,000 no-op
            # jobs, 8 interleaved pairs, 0.478 -> 0.386 s); on SQLite its import outweighed the
            # gain at 2,000 jobs (0.465 -> 0.492 s) but not at 20,000 (interleaved, medians:
            # no-op 6 pairs, CPU 1.92 -> 1.74 s, wall 2.13 -> 1.90 s; to the dead-letter queue
            # 5 pairs, CPU 3.86 -> 3.63 s, wall 4.13 -> 3.87 s). Over HTTP it gained nothing.
            run(run_embedded(found, settings))
        else:
            asyncio.run(run_over_http(found, url or DEFAULT_URL))
    except (ConfigurationError, ValueError) as error:
        raise _usage(str(error)) from error
    except DatabaseUnreachable as error:
        stderr().print(f"[red]error:[/red] cannot open the database: {error}")
        raise typer.Exit(EXIT_UNREACHABLE) from error
    _exit_past_stuck_threads()
