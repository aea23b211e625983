"""Loading named SQL statements from a dialect's `statements.sql` file."""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


def load_statements(path: Path) -> dict[str, str]:
    """`-- name: x` headers split the file; each body runs the statements it holds in order."""
    text = path.read_text(encoding="utf-8")
    parts = _NAME.split(text)
    statements: dict[str, str] = {}
    for index in range(1, len(parts), 2):
        name, body = parts[index], parts[index + 1]
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        statements[name] = "\n".join(lines).strip()
    return statements


def parameter_names(sql: str) -> set[str]:
    return set(_PARAMETER.findall(sql))


def to_pyformat(sql: str) -> str:
    """`:name` placeholders to psycopg's `%(name)s` (leaving `::type` casts alone)."""
    return _PARAMETER.sub(lambda match: f"%({match.group(1)})s", sql)


def split_script(sql: str) -> list[str]:
    return [part.strip() for part in sql.split(";") if part.strip()]


def migration_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql"))
