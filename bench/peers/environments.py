"""The peers' throw-away virtualenvs under bench/.peers/: pinned, made once, reused when present."""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import redrive

CACHE = Path(__file__).resolve().parent.parent / ".peers"
PYTHON_312 = ("python3.12", "/root/.pyenv/versions/3.12.1/bin/python3.12")
STAMP = ".requirement"


@dataclass(frozen=True)
class Peer:
    """A peer as pip installs it (`requirements`: the pinned peer, and any pin its release
    needs); `minimum_python` decides which interpreter its venv gets."""

    name: str
    requirements: tuple[str, ...]
    minimum_python: tuple[int, int]


@dataclass(frozen=True)
class Environment:
    """A ready virtualenv: its bin directory, Python version and installed distributions."""

    bin: Path
    python_version: str
    packages: dict[str, str]

    def command(self, name: str) -> str:
        return str(self.bin / name)


class Unavailable(Exception):
    """A peer could not be installed; the message says exactly why."""


def _version(python: str) -> tuple[str, tuple[int, int]] | None:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.executable); print(*sys.version_info[:3])"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    executable, version = done.stdout.splitlines()[:2]
    major, minor, _ = (int(part) for part in version.split())
    return executable, (major, minor)


def interpreter(minimum: tuple[int, int]) -> tuple[str, tuple[int, int]]:
    """The running Python when it is new enough, else the first Python 3.12 found."""
    if sys.version_info[:2] >= minimum:
        return sys.executable, (sys.version_info.major, sys.version_info.minor)
    for candidate in PYTHON_312:
        found = shutil.which(candidate) or (candidate if Path(candidate).exists() else None)
        resolved = _version(found) if found else None
        if resolved and resolved[1] >= minimum:
            return resolved
    raise Unavailable(
        f"needs Python >= {minimum[0]}.{minimum[1]} and none was found (looked for "
        f"{', '.join(PYTHON_312)} and the running {sys.version.split()[0]})"
    )


def _freeze(python: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    pairs = (line.split("==", 1) for line in done.stdout.splitlines() if "==" in line)
    return {name.lower(): version for name, version in pairs}


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-1500:]
        raise Unavailable(f"{what} failed (exit {done.returncode}): {output}")


def prepare(peer: Peer) -> Environment:
    """The peer's virtualenv, made (venv + pip install of the pinned requirement) unless a
    complete one for the same requirement and Python is already cached."""
    python, version = interpreter(peer.minimum_python)
    directory = CACHE / f"{peer.name}-py{version[0]}.{version[1]}"
    stamp = directory / STAMP
    inside = directory / "bin" / "python"
    wanted = " ".join(peer.requirements)
    if not (stamp.exists() and stamp.read_text() == wanted and inside.exists()):
        shutil.rmtree(directory, ignore_errors=True)
        directory.parent.mkdir(parents=True, exist_ok=True)
        _run([python, "-m", "venv", str(directory)], f"{python} -m venv")
        _run(
            [str(inside), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *peer.requirements],
            f"pip install {wanted}",
        )  # fmt: skip
        stamp.write_text(wanted)
    return Environment(inside.parent, f"{version[0]}.{version[1]}", _freeze(inside))


def current() -> Environment:
    """redrive's own environment: the Python running the benchmark and its `redrive` command,
    with redrive's modules compiled to bytecode first, as pip does when it installs a wheel
    (the peers' venvs have theirs). An editable checkout under PYTHONDONTWRITEBYTECODE=1 would
    otherwise compile all of redrive in every process the clock times: 2.57 G instructions to
    import redrive.embedded from source, 1.84 G from bytecode (callgrind)."""
    compileall.compile_dir(Path(redrive.__file__).parent, quiet=1)
    executable = Path(sys.executable)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return Environment(executable.parent, version, {})
