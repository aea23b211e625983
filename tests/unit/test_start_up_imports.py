"""What a worker or an embedded producer imports when it starts: not the HTTP app (in a child
process, so this test's own imports do not count)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HTTP_APP_PACKAGES = ("fastapi", "starlette", "jinja2", "redrive.api", "redrive.dashboard")
PROBE = """
import json, sys
{imports}
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(imports: str) -> set[str]:
    output = subprocess.run(
        [sys.executable, "-c", PROBE.format(imports=imports)],
        capture_output=True, text=True, check=True, timeout=60,
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


def test_the_server_still_builds_its_app_with_the_dashboard() -> None:
    loaded = modules_after(
        "from redrive.composition import build_app\n"
        "from redrive.settings import Settings\n"
        "from redrive.store.sqlite.store import SqliteStore\n"
        "build_app(SqliteStore(':memory:'), Settings(database_url='sqlite:///:memory:'))"
    )
    assert {"fastapi", "redrive.api.app", "redrive.dashboard"} <= loaded


def test_an_embedded_producer_starts_without_the_http_client_or_the_servers_loops() -> None:
    loaded = modules_after("import redrive; redrive.Embedded")
    assert not {"httpx", "redrive.client.client", "redrive.maintenance.webhooks"} & loaded


def test_the_client_package_still_offers_every_name() -> None:
    loaded = modules_after(
        "import redrive.client\nfor name in redrive.client.__all__: getattr(redrive.client, name)"
    )
    assert {"httpx", "redrive.client.client", "redrive.client.sync"} <= loaded


def test_the_server_does_not_import_the_clients_network_library() -> None:
    loaded = modules_after("import redrive.cli\nfrom redrive.composition import build_app")
    assert "redrive.client.transport" in loaded and "aiohttp" not in loaded
