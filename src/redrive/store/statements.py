"""Loading named SQL statements from a dialect's `statements.sql` file."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

Parsed = TypeVar("Parsed")

# A header line, found from the newline before it (the file is read with one put first): a
# pattern that begins with a literal is searched for that literal, not tried at every position of
# the ~100 kB file (`^` first: 0.50 -> 0.13 ms of every store's making).
_HEADER = re.compile(r"\n-- (name|fragment): (\w+)[ \t]*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{(\w+)\}")
_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


def load_statements(path: Path) -> dict[str, str]:
    """`-- name: x` headers split the file; each body runs the statements it holds in order.
    A `-- fragment: y` body is SQL that several statements share, written `{y}` where it goes
    (the dead-letter filter, for one)."""
    parts = _HEADER.split("\n" + path.read_text(encoding="utf-8"))
    found: dict[str, dict[str, str]] = {"name": {}, "fragment": {}}
    for index in range(1, len(parts), 3):
        kind, name, body = parts[index : index + 3]
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        found[kind][name] = "\n".join(lines).strip()
    fragments = found["fragment"]

    def include(match: re.Match[str]) -> str:
        if match.group(1) not in fragments:
            raise ValueError(f"{path}: no fragment named {match.group(1)}")
        return fragments[match.group(1)]

    return {name: _INCLUDE.sub(include, sql) for name, sql in found["name"].items()}


def parameter_names(sql: str) -> set[str]:
    return set(_PARAMETER.findall(sql))


def numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """`:name` placeholders to PostgreSQL's `$1`, `$2`, ... (leaving `::type` casts alone), and
    the parameter names in the order of their numbers: a name used twice keeps one number."""
    names: dict[str, int] = {}

    def placeholder(match: re.Match[str]) -> str:
        number = names.setdefault(match.group(1), len(names) + 1)
        return f"${number}"

    return _PARAMETER.sub(placeholder, sql), tuple(names)


def split_script(sql: str) -> list[str]:
    return [part.strip() for part in sql.split(";") if part.strip()]


def migration_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql"))


class ParsedOnUse(dict[str, Parsed]):
    """Named statements as a store runs them, each parsed from its SQL on its first use: a
    process runs a few dozen of the ~150 (parsing them all took ~3 ms of every start). An
    unknown name raises KeyError, as a plain dict does."""

    def __init__(self, sources: Mapping[str, str], parse: Callable[[str, str], Parsed]) -> None:
        super().__init__()
        self.sources = sources
        self.parse = parse

    def __missing__(self, name: str) -> Parsed:
        parsed = self[name] = self.parse(name, self.sources[name])
        return parsed
