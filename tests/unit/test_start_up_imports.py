"""What a worker or a producer imports when it starts: not the HTTP app, and nothing its path
does not use (in a child process, so this test's own imports do not count). Each module kept
out here was measured: a producer or worker imports anew in every process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HTTP_APP_PACKAGES = ("fastapi", "starlette", "jinja2", "redrive.api", "redrive.dashboard")
PROBE = """
import json, sys
{imports}
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(imports: str, environment: dict[str, str] | None = None) -> set[str]:
    output = subprocess.run(
        [sys.executable, "-c", PROBE.format(imports=imports)],
        capture_output=True, text=True, check=True, timeout=60, env=environment,
    ).stdout  # fmt: skip
    return set(json.loads(output))


@pytest.mark.parametrize(
    "imports",
    [
        "import redrive; redrive.Embedded",
        "import redrive.worker, redrive.embedded",
        "import redrive.cli.worker",
    ],
)
def test_a_worker_or_embedded_producer_starts_without_the_http_app(imports: str) -> None:
    loaded = modules_after(imports)
    assert "redrive.composition" in loaded  # the probe did load what builds the service
    assert not {
        module
        for module in loaded
        for package in HTTP_APP_PACKAGES
        if module == package or module.startswith(package + ".")
    }


def test_the_process_tuning_imports_no_event_loop() -> None:
    """The command line imports it first, to tune the collector before its other imports."""
    assert "asyncio" not in modules_after("import redrive.process")


def test_the_server_still_builds_its_app_with_the_dashboard() -> None:
    loaded = modules_after(
        "from redrive.composition import build_app\n"
        "from redrive.settings import Settings\n"
        "from redrive.store.sqlite.store import SqliteStore\n"
        "build_app(SqliteStore(':memory:'), Settings(database_url='sqlite:///:memory:'))"
    )
    assert {"fastapi", "redrive.api.app", "redrive.dashboard"} <= loaded


def test_the_command_lines_in_process_app_has_no_dashboard_or_loops() -> None:
    """`--database` commands call the app through httpx's ASGI transport, which runs no
    lifespan (so no loop would start) and asks for no dashboard page."""
    loaded = modules_after(
        "from redrive.composition import build_in_process_app\n"
        "from redrive.settings import Settings\n"
        "from redrive.store.sqlite.store import SqliteStore\n"
        "settings = Settings(database_url='sqlite:///:memory:')\n"
        "build_in_process_app(SqliteStore(':memory:'), settings)"
    )
    assert "redrive.api.app" in loaded
    assert not {
        "redrive.dashboard", "jinja2", "redrive.maintenance.loop", "redrive.service.sweeper",
        "redrive.maintenance.webhooks",
    } & loaded  # fmt: skip


def test_an_embedded_producer_starts_without_the_http_client_or_the_servers_loops() -> None:
    loaded = modules_after("import redrive; redrive.Embedded")
    assert not {"httpx", "redrive.client.client", "redrive.maintenance.webhooks"} & loaded


def test_the_service_builds_a_use_case_when_first_used() -> None:
    """The facade imports the use-cases a caller reaches, not the sweeper, webhooks or crons."""
    loaded = modules_after(
        "from redrive.composition import build_service\n"
        "from redrive.settings import Settings\n"
        "from redrive.store.sqlite.store import SqliteStore\n"
        "service = build_service(SqliteStore(':memory:'), Settings())\n"
        "service.jobs, service.dead_letters, service.incidents"
    )
    assert "redrive.service.jobs" in loaded
    assert not {
        "redrive.service.sweeper", "redrive.service.webhooks", "redrive.service.crons",
        "redrive.service.alerts", "redrive.service.redrives", "redrive.service.keys",
    } & loaded  # fmt: skip


def test_the_client_package_still_offers_every_name() -> None:
    loaded = modules_after(
        "import redrive.client\nfor name in redrive.client.__all__: getattr(redrive.client, name)"
    )
    assert {"httpx", "redrive.client.client", "redrive.client.sync"} <= loaded


def test_the_server_does_not_import_the_clients_network_library() -> None:
    loaded = modules_after("import redrive.cli\nfrom redrive.composition import build_app")
    assert "redrive.client.transport" in loaded and "aiohttp" not in loaded


# Loaded by a path that needs them only: registering a job schema (jsonschema), sealing or
# opening a webhook secret (cryptography), checking a redaction candidate's checksum (stdnum),
# an in-process transport or a webhook send (httpx), serving (uvicorn and the app's pydantic),
# reading a TOML settings or upcasters file (tomllib), the other store's driver.
ON_DEMAND = (
    "jsonschema", "cryptography", "stdnum", "httpx", "uvicorn", "typer", "fastapi", "starlette",
    "pydantic", "tomllib",
)  # fmt: skip


def loaded_packages(modules: set[str], packages: tuple[str, ...]) -> set[str]:
    return {package for package in packages for module in modules
            if module == package or module.startswith(package + ".")}  # fmt: skip


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_embedded_producer_enqueues_with_only_its_stores_driver(database_url: str) -> None:
    loaded = modules_after(
        "import asyncio, redrive\n"
        "async def produce():\n"
        f"    async with redrive.Embedded({database_url!r}) as jobs:\n"
        "        await jobs.enqueue('mail.send', ['ada'])\n"
        "asyncio.run(produce())"
    )
    other_driver = "asyncpg" if database_url.startswith("sqlite") else "sqlite3"
    assert "redrive.service.facade" in loaded  # it did build the service
    assert not loaded_packages(loaded, (*ON_DEMAND, other_driver))
    # Retrying dead letters loads their service, its filter and its audit; enqueuing does not,
    # nor the HTTP client's models (a JobSpec's retry policy may be one, or a mapping).
    assert not {"redrive.service.dead_letters", "redrive.client.models"} & loaded
    assert not set(NOT_ENQUEUING) & loaded
    # Nor the secret detectors' patterns: a redactor compiles them when it first redacts.
    assert "redrive.domain.redaction" in loaded and "redrive.domain.secret_patterns" not in loaded


# What an enqueue never reads or writes: dead letters and their incidents, audit records, keys
# and sessions, legal holds, redrive tasks, replay rules, job schemas, root causes, alert rules,
# webhook deliveries, retention policies (with the secret detectors, a third of a producer's
# open-enqueue-close instructions on SQLite, callgrind, when they were loaded at start).
NOT_ENQUEUING = (
    "redrive.domain.dead_letter", "redrive.domain.incident", "redrive.domain.trend",
    "redrive.domain.dead_letter_filter", "redrive.domain.audit", "redrive.domain.keys",
    "redrive.domain.sessions", "redrive.domain.legal_hold", "redrive.domain.redrive",
    "redrive.domain.replay", "redrive.domain.job_schemas", "redrive.service.audit",
    "redrive.domain.root_cause", "redrive.domain.alerts", "redrive.domain.webhook_delivery",
    "redrive.domain.retention", "redrive.domain.cursor",
    # nor webhook subscriptions (it asks only which listeners want its events), claims and acks,
    # nor the values of dead letters, keys, sessions and subscriptions as the ports pass them
    "redrive.domain.webhooks", "redrive.ports.attempts", "redrive.ports.dead_letters",
    "redrive.ports.access",
)  # fmt: skip


def test_the_store_imports_the_domain_of_a_use_case_when_it_runs() -> None:
    """Every store has every use-case's methods; the domain modules they build records with
    are imported by those methods, so the store and the events load none of them."""
    loaded = modules_after(
        "import redrive.store.transaction, redrive.store.sqlite.store, redrive.domain.events"
    )
    assert "redrive.store.dead_letters" in loaded  # the probe did load the store's methods
    assert not set(NOT_ENQUEUING) & loaded


def test_a_job_specs_retry_policy_is_the_clients_or_a_mapping() -> None:
    from redrive.client import JobSpec, RetryPolicy

    policy = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
    typed = JobSpec("mail.send", retry=RetryPolicy(max_attempts=1, on_exhaustion="dead_letter"))
    assert typed.to_envelope()["options"]["retry"] == policy
    assert JobSpec("mail.send", retry=policy).to_envelope()["options"]["retry"] == policy


def test_the_ports_name_the_domains_types_without_importing_their_modules() -> None:
    loaded = modules_after("import redrive.ports")
    assert not {module for module in loaded if module.startswith("redrive.domain.")}


def test_the_ports_values_are_imported_by_name_on_first_use() -> None:
    """Each value the ports pass is importable from `redrive.ports`, from the module of its
    concern, which `import redrive.ports` alone does not load."""
    import redrive.ports

    loaded = modules_after("import redrive.ports")
    assert not {module for module in loaded if module.startswith("redrive.ports.")}
    for name, module in redrive.ports.VALUE_MODULES.items():
        value = getattr(redrive.ports, name)
        assert value.__module__ == f"redrive.ports.{module}" and value.__name__ == name
    with pytest.raises(AttributeError):
        _ = redrive.ports.Nothing


def test_an_http_producer_loads_the_client_only() -> None:
    loaded = modules_after(
        "import redrive\nfrom redrive.client import DeadLetterFilter\nredrive.Client"
    )
    assert "redrive.client.client" in loaded
    assert not loaded_packages(
        loaded, (*ON_DEMAND, "pydantic", "redrive.composition", "redrive.service", "redrive.store")
    )
    # Nor the result classes of the dead letters, the audit log and webhooks (17 of the client's
    # 36 frozen dataclasses): the operations returning them import them; enqueuing, listing
    # incidents and starting a redrive return none of them.
    assert not {
        "redrive.client.dead_letters", "redrive.client.audit", "redrive.client.webhooks"
    } & loaded  # fmt: skip


@pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="proxies from the system too")
def test_an_http_producer_reaches_its_first_request_without_the_proxy_lookup() -> None:
    """With no `*_proxy` variable set, the client's connection pool looks no proxy up, so it
    does not import urllib.request (http.client, email, tempfile: 12 ms of a producer's start);
    with one set it does, and the proxy is honoured (test_client_transport)."""
    opened = (
        "import asyncio, redrive\n"
        "async def open():\n"
        "    async with redrive.Client('http://127.0.0.1:1'):\n"
        "        pass\n"
        "asyncio.run(open())"
    )
    clean = {name: value for name, value in os.environ.items() if name[-6:].lower() != "_proxy"}
    loaded = modules_after(opened, clean)
    assert "redrive.client.transport" in loaded
    assert "urllib.request" not in loaded
    proxied = {**clean, "HTTPS_PROXY": "http://proxy.internal:3128"}
    assert "urllib.request" in modules_after(opened, proxied)


def test_a_worker_over_http_loads_no_store_or_service() -> None:
    """Nor the parsers of the service's settings, which import most of the domain, nor rich
    (imported when the CLI prints)."""
    loaded = modules_after(
        "import redrive.cli\nfrom redrive.worker.http_source import HttpJobSource"
    )
    assert {"typer", "redrive.cli.worker"} <= loaded
    assert not loaded_packages(
        loaded,
        ("redrive.service", "redrive.store.transaction", "redrive.store.sqlite",
         "redrive.store.postgres", "jsonschema", "uvicorn", "pydantic", "rich",
         "redrive.domain.alerts", "redrive.domain.fingerprint", "redrive.domain.webhooks",
         "redrive.domain.upcasting", "redrive.domain.retention", "urllib.request"),
    )  # fmt: skip


def test_a_command_parses_its_options_without_pydantic() -> None:
    """typer 0.29 checked every option of the command it ran with a pydantic TypeAdapter, so
    each `redrive worker` start imported pydantic and built adapters (pyproject keeps typer
    below 0.29); nothing a command prints to people needs rich when it prints nothing."""
    loaded = modules_after(
        "import typer.testing, redrive.cli\n"
        "command = ['--api-key', 'k', 'version']\n"
        "result = typer.testing.CliRunner().invoke(redrive.cli.app, command)\n"
        "assert result.exit_code == 0 and result.output == '0.1.0\\n', result.output"
    )
    assert "redrive.cli" in loaded
    assert not loaded_packages(loaded, ("pydantic", "rich"))


def test_the_command_line_imports_its_remote_commands_when_they_run() -> None:
    """`redrive worker` and `redrive serve` start without the client and the commands built on
    it; `redrive dlq` imports them when it runs, and help still lists every command."""
    loaded = modules_after("import redrive.cli")
    assert not {"redrive.client.client", "redrive.cli.dead_letters", "rich.table"} & loaded
    loaded = modules_after(
        "import typer.testing, redrive.cli\n"
        "result = typer.testing.CliRunner().invoke(redrive.cli.app, ['dlq', '--help'])\n"
        "assert result.exit_code == 0 and 'dead-letter queue' in result.output, result.output"
    )
    assert "redrive.cli.dead_letters" in loaded


def test_the_command_lines_help_lists_every_command_in_order() -> None:
    from typer.testing import CliRunner

    from redrive.cli import app

    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    listed = [
        line.strip("│ ").split()[0]
        for line in result.output.split("Commands")[1].splitlines()[1:]
        if line.startswith("│ ") and not line.startswith("│  ")
    ]
    assert listed == [
        "serve", "migrate", "enqueue", "worker", "version", "dlq", "jobs", "queues", "keys",
        "audit", "incidents", "holds", "alerts", "webhooks", "redrives",
    ]  # fmt: skip


# What an embedded worker's first claims and acks never use: its sweep and webhook deliveries
# (the sweeper imports every use-case it drives) start a sweep interval after the worker, and
# the dead-letter, incident, alert, redrive and audit modules are imported by a failure, a
# redriven job or a worker directive (a fifth of the worker's start-up instructions).
NOT_CLAIMING = (
    "redrive.maintenance.loop", "redrive.maintenance.webhooks", "redrive.service.sweeper",
    "redrive.service.webhooks", "redrive.service.alerts", "redrive.service.audit",
    "redrive.service.incidents", "redrive.service.redrives", "redrive.domain.dead_letter",
    "redrive.domain.incident", "redrive.domain.alerts", "redrive.domain.redrive",
    "redrive.domain.audit",
)  # fmt: skip
EMBEDDED_WORKER = """
import asyncio, datetime, json, sys, redrive
from redrive.cli.worker import run_embedded
from redrive.settings import Settings
from redrive.worker import Worker

worker = Worker(queues=["default"])
at_first_job: list[str] = []

@worker.handler("mail.send")
async def send(job):
    at_first_job.extend(sys.modules)

@worker.handler("mail.later")
async def later(job):
    worker.stop()  # it ran: the sweep promoted it once it fell due

async def main():
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.1)
    async with redrive.Embedded({url!r}) as jobs:
        await jobs.enqueue("mail.send", ["ada"])
        await jobs.enqueue("mail.later", ["ada"], options={{"scheduled_at": due.isoformat()}})
    await run_embedded(worker, Settings(database_url={url!r}, sweep_interval_ms=1000))

asyncio.run(asyncio.wait_for(main(), 30))
print(json.dumps([sorted(at_first_job), sorted(sys.modules)]))
"""


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_embedded_worker_claims_and_acks_before_its_sweep_imports(database_url: str) -> None:
    output = subprocess.run(
        [sys.executable, "-c", EMBEDDED_WORKER.format(url=database_url)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    at_first_job, at_exit = (set(modules) for modules in json.loads(output.splitlines()[-1]))
    assert "redrive.worker.embedded_source" in at_first_job  # it did claim in this process
    assert not set(NOT_CLAIMING) & at_first_job
    assert {"redrive.service.sweeper", "redrive.maintenance.webhooks"} <= at_exit


# What a bulk retry by filter, and the root cause it needs first, never read: the job lifecycle
# (fingerprints name their backtrace keys from domain.job), incident trends, legal holds (its
# statement skips held dead letters itself) and gzip (archives are written by pruning only).
# Together about 5 ms of CPU of a retrying producer's start, measured.
NOT_RETRYING = (
    "redrive.domain.lifecycle", "redrive.domain.trend", "redrive.domain.legal_hold",
    "redrive.service.legal_holds", "gzip",
)  # fmt: skip


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_embedded_bulk_retry_loads_only_what_it_reads(database_url: str) -> None:
    loaded = modules_after(
        "import asyncio, redrive\n"
        "from redrive.domain.errors import NotFound\n"
        "async def retry():\n"
        f"    async with redrive.Embedded({database_url!r}) as jobs:\n"
        "        try:\n"
        "            await jobs.record_root_cause('inc_' + '0' * 24, 'contract', 'x', 'PR 1')\n"
        "        except NotFound:\n"
        "            pass\n"
        "        assert await jobs.retry_dead_letters({'type': 'mail.send'}) == 0\n"
        "asyncio.run(retry())"
    )
    assert {"redrive.service.dead_letters", "redrive.service.incidents"} <= loaded
    assert not set(NOT_RETRYING) & loaded


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_embedded_bulk_retry_compiles_no_classification_rule_or_frame_pattern(
    database_url: str,
) -> None:
    """The built-in classification rules are parsed, and the backtrace frames' patterns
    compiled, when an incident is first classified or a backtrace first read: a retry does
    neither (~12 M instructions of its start, callgrind)."""
    output = subprocess.run(
        [sys.executable, "-c",
         "import asyncio, json, redrive\n"
         "async def retry():\n"
         f"    async with redrive.Embedded({database_url!r}) as jobs:\n"
         "        assert await jobs.retry_dead_letters({'type': 'mail.send'}) == 0\n"
         "asyncio.run(retry())\n"
         "from redrive.domain import fingerprint, root_cause\n"
         "print(json.dumps([root_cause.default_rules.cache_info().currsize,\n"
         "                  fingerprint._frame_patterns.cache_info().currsize]))"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert json.loads(output) == [0, 0]


def test_an_http_client_without_a_proxy_in_its_environment_does_not_import_urllib_request() -> None:
    """It imports http.client and the email package (~57 M instructions, a tenth of an HTTP
    producer's or worker's start); only a proxy named in the environment needs it."""
    loaded = modules_after(
        "import asyncio, os, redrive\n"
        "for name in [name for name in os.environ if name.lower().endswith('_proxy')]:\n"
        "    del os.environ[name]\n"
        "async def main():\n"
        "    async with redrive.Client('http://127.0.0.1:9') as client:\n"
        "        pass\n"
        "asyncio.run(main())"
    )
    assert "redrive.client.transport" in loaded and "urllib.request" not in loaded
