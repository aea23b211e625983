"""The README quick start, run as written: bash in a fresh directory against a fresh SQLite
database on a free port (the only thing set from outside is where the server listens)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.server import find_free_port

README = Path(__file__).parents[2] / "README.md"
BLOCK = re.compile(
    r"<!-- quickstart:begin -->\s*```sh\n(?P<script>.*?)```\s*<!-- quickstart:end -->", re.DOTALL
)
TIMEOUT_SECONDS = 180

pytestmark = pytest.mark.slow


def quickstart_script() -> str:
    found = BLOCK.search(README.read_text())
    assert found is not None, "README.md has no quickstart:begin/end block"
    return found.group("script")


def test_readme_quick_start_works_as_written(tmp_path: Path) -> None:
    port = find_free_port()
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("REDRIVE_")
    }
    environment.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")]),
        REDRIVE_PORT=str(port),
        REDRIVE_URL=f"http://127.0.0.1:{port}",
        COLUMNS="200",
    )
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", quickstart_script()],
        cwd=tmp_path, env=environment, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output, errors = process.communicate(timeout=TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0, f"stdout:\n{output}\nstderr:\n{errors}"

    dead_table, _, after_fix = output.partition("retried: 1")
    assert "Dead letters (1 of 1)" in dead_table, output
    assert "email.send" in dead_table and "SmtpError" in dead_table
    assert "relay refused" in dead_table
    assert re.search(r"state\W*completed", after_fix), output
    assert '"sent_to": "ada@example.com"' in after_fix
    assert (tmp_path / "redrive-quickstart" / "redrive.db").is_file()
