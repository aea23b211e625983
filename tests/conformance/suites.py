"""Where the OJS conformance suites live, and what a run without them does (skip; fail in CI)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest

SUITES_DIRECTORY_VARIABLE = "REDRIVE_OJS_SUITES"
DEFAULT_SUITES_DIRECTORY = Path(__file__).resolve().parents[3] / "shared" / "ojs" / "suites"
SUITES_REPOSITORY = "https://github.com/openjobspec/ojs-conformance"
CONFORMANCE_FOLDERS: tuple[str, ...] = (
    "level-0-core",
    "level-1-reliable",
    "level-2-scheduled",
    "ext-dead-letter",
    "ext-admin-api",
    "ext-multi-tenancy",
    "ext-observability",
    "ext-webhooks",
    "ext-job-versioning",
)


def suites_directory() -> Path:
    configured = os.environ.get(SUITES_DIRECTORY_VARIABLE)
    return Path(configured) if configured else DEFAULT_SUITES_DIRECTORY


def missing_suites(
    folders: Sequence[str] = CONFORMANCE_FOLDERS, root: Path | None = None
) -> str | None:
    """None when every folder is under the suites directory, else one line saying where to get
    them and how to point the tests at them."""
    root = root or suites_directory()
    missing = [folder for folder in folders if not (root / folder).is_dir()]
    if not missing:
        return None
    problem = (
        f"OJS conformance suites not found at {root}"
        if len(missing) == len(folders)
        else f"OJS conformance suites at {root} lack {', '.join(missing)}"
    )
    return (
        f"{problem}: get them from {SUITES_REPOSITORY} (its `suites` folder) and set "
        f"{SUITES_DIRECTORY_VARIABLE}=/path/to/ojs-conformance/suites"
    )


def without_suites(message: str) -> NoReturn:
    """Skip, except under CI=true where missing suites are a failure (as for PostgreSQL)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def require_suites(folders: Sequence[str] = CONFORMANCE_FOLDERS, root: Path | None = None) -> Path:
    """The suites directory; skips (fails under CI=true) when any folder is missing."""
    root = root or suites_directory()
    message = missing_suites(folders, root)
    if message is not None:
        without_suites(message)
    return root
