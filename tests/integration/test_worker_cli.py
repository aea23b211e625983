"""`redrive worker` refuses bad input with a clear message and exit code 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "workers"


def redrive_worker(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(WORKERS), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "redrive", "worker", *arguments],
        cwd=directory, capture_output=True, text=True, env=environment, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["example_tasks"], "expected MODULE:ATTRIBUTE"),
        (["no_such_module:worker"], "cannot import module 'no_such_module'"),
        (["broken:worker"], "SyntaxError"),
        (["example_tasks:nothing"], "has no attribute 'nothing'"),
        (["example_tasks:SmtpError"], "not a redrive Worker"),
        (["example_tasks:worker", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["example_tasks:worker", "--queues", ","], "--queues needs at least one queue"),
        (["example_tasks:worker", "--database-url", "sqlite:///x.db"], "only applies with"),
        (["example_tasks:worker", "--embedded", "--database-url", "mysql://x"], "must start"),
    ],
)
def test_bad_input_is_a_clear_error(arguments: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("worker = (\n")
    result = redrive_worker(tmp_path, *arguments)
    assert result.returncode == 2, result.stderr
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_an_embedded_worker_stops_with_the_error_that_ended_its_maintenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep and deliveries run in a task started after the worker: should that task end by
    an error, the worker does not go on without them."""
    import asyncio
    import importlib

    from redrive.service.facade import Service
    from redrive.settings import Settings
    from redrive.worker import Worker

    async def failing(service: Service, settings: Settings) -> None:
        raise RuntimeError("the sweep could not start")

    command = importlib.import_module("redrive.cli.worker")  # the module, not its command
    monkeypatch.setattr(command, "maintain", failing)
    settings = Settings(database_url=f"sqlite:///{tmp_path}/redrive.db")
    with pytest.raises(RuntimeError, match="the sweep could not start"):
        worker = Worker(queues=["default"])
        asyncio.run(asyncio.wait_for(command.run_embedded(worker, settings), 30))
