"""Process tuning of long-running redrive processes (in a child process: it is process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys

from redrive.process import OLDER_GENERATION_THRESHOLD, YOUNG_GENERATION_THRESHOLD

PROBE = """
import gc, json
from redrive.process import tune_garbage_collector
before = gc.get_freeze_count()
tune_garbage_collector()
cycle = []
cycle.append(cycle)
del cycle
print(json.dumps({"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count() - before,
                  "collected": gc.collect() >= 1}))
"""


def test_collector_runs_less_often_and_skips_start_up_objects_but_still_collects() -> None:
    output = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    found = json.loads(output)
    assert found["threshold"] == [
        YOUNG_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD,
    ]  # fmt: skip
    assert found["frozen"] > 1000  # modules and their objects
    assert found["collected"] is True  # cycles made after start-up are still garbage-collected


COMMAND_LINE_PROBE = """
import gc, json, sys

at_asyncio = []


class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "asyncio" and not at_asyncio:
            at_asyncio.append(gc.get_threshold())


sys.meta_path.insert(0, Spy())
import redrive.cli
print(json.dumps({"at_asyncio": at_asyncio[0], "after": gc.get_threshold()}))
"""


def test_the_command_line_collects_rarely_before_it_imports_asyncio() -> None:
    """A command's imports (asyncio, typer, the service, a store's driver) make objects that
    live as long as the process: the collector does not scan them every 700 allocations."""
    output = subprocess.run(
        [sys.executable, "-c", COMMAND_LINE_PROBE],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    found = json.loads(output)
    rarely = [YOUNG_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD]
    assert found == {"at_asyncio": rarely, "after": rarely}
