"""The two dialects' named SQL statements stay in step with each other and with the store code."""

from __future__ import annotations

import ast
import inspect
import itertools
import re
from pathlib import Path

import pytest

import redrive.store
from redrive.store.postgres.statements import parse_script
from redrive.store.sqlite.parts import compile_part
from redrive.store.sqlite.parts import split_script as split_sqlite
from redrive.store.statements import ParsedOnUse, load_statements, parameter_names
from redrive.store.transaction import SqlTransaction

STORE = Path(redrive.store.__file__).parent
SQLITE = STORE / "sqlite" / "statements.sql"
POSTGRES = STORE / "postgres" / "statements.sql"
# Every module the shared transaction is composed of (its parts, one per concern, and their base).
TRANSACTION_MODULES = sorted(
    {
        Path(inspect.getfile(part))
        for part in SqlTransaction.__mro__
        if part.__module__.startswith("redrive.store.")
    }
)
# Methods of the transaction and its executor whose first argument is a statement name.
STATEMENT_CALLS = frozenset({"_rows", "_run", "rows", "run", "table"})


def sqlite_statements() -> dict[str, str]:
    return load_statements(SQLITE)


def postgres_statements() -> dict[str, str]:
    return load_statements(POSTGRES)


def test_both_files_define_statements() -> None:
    assert len(sqlite_statements()) >= 20
    assert len(postgres_statements()) >= 20
    for sql in [*sqlite_statements().values(), *postgres_statements().values()]:
        assert sql.strip()


def test_both_dialects_define_the_same_statement_names() -> None:
    sqlite, postgres = set(sqlite_statements()), set(postgres_statements())
    assert sqlite - postgres == set(), "only in sqlite/statements.sql"
    assert postgres - sqlite == set(), "only in postgres/statements.sql"


def test_no_statement_name_is_defined_twice() -> None:
    for path in (SQLITE, POSTGRES):
        names = [
            line.removeprefix("-- name:").strip()
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("-- name:")
        ]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        assert duplicates == [], f"{path.parent.name}: {duplicates}"


# Parameters PostgreSQL's set-based form of a statement needs and SQLite's form, run once per
# element of :rows, does not (`update_jobs` lists the ids again only for PostgreSQL's plan).
SET_BASED_ONLY = {"update_jobs": {"ids"}, "complete_jobs": {"ids"}}
# And those SQLite's form takes made, which PostgreSQL's makes itself (enqueue_jobs: an events
# row for each block of the jobs' events, which PostgreSQL aggregates from :rows).
ROW_BY_ROW_ONLY = {"enqueue_jobs": {"blocks"}}


@pytest.mark.parametrize("name", sorted(set(sqlite_statements()) & set(postgres_statements())))
def test_each_statement_takes_the_same_parameters_in_both_dialects(name: str) -> None:
    sqlite = parameter_names(sqlite_statements()[name]) - ROW_BY_ROW_ONLY.get(name, set())
    postgres = parameter_names(postgres_statements()[name]) - SET_BASED_ONLY.get(name, set())
    assert sqlite == postgres, (
        f"{name}: sqlite-only {sqlite - postgres}, postgres-only {postgres - sqlite}"
    )


def test_a_statement_over_each_element_names_its_array_as_its_parameter() -> None:
    assert parameter_names("UPDATE t SET a = :rows->>a, b = :rows->b WHERE id = :rows->>id") == {
        "rows"
    }


def test_parameter_names_ignore_postgres_casts() -> None:
    assert parameter_names("SELECT :a::bigint, CAST(:b AS text), ':c' FROM t WHERE x = :a") >= {
        "a",
        "b",
    }
    assert "bigint" not in parameter_names("SELECT :a::bigint")


class StatementNames(ast.NodeVisitor):
    """Every statement name the transaction's modules can pass to the executor, resolved
    statically."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.unresolved: list[str] = []
        self.scopes: list[ast.AST] = []
        self.loops: list[ast.For] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(node)

    def _scoped(self, node: ast.AST) -> None:
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    def visit_For(self, node: ast.For) -> None:
        self.loops.append(node)
        self.generic_visit(node)
        self.loops.pop()

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr in STATEMENT_CALLS and node.args:
            values = self.resolve(node.args[0])
            if values is None:
                self.unresolved.append(ast.unparse(node))
            else:
                self.names |= values
        self.generic_visit(node)

    def resolve(self, node: ast.expr) -> set[str] | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.IfExp):
            body, orelse = self.resolve(node.body), self.resolve(node.orelse)
            return None if body is None or orelse is None else body | orelse
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.JoinedStr):
            return self._joined(node)
        return None

    def _joined(self, node: ast.JoinedStr) -> set[str] | None:
        parts: list[set[str]] = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                resolved = self.resolve(value.value)
            else:
                resolved = self.resolve(value)
            if resolved is None:
                return None
            parts.append(resolved)
        return {"".join(combination) for combination in itertools.product(*parts)}

    def _name(self, name: str) -> set[str] | None:
        for loop in reversed(self.loops):
            if isinstance(loop.target, ast.Name) and loop.target.id == name:
                if isinstance(loop.iter, ast.Tuple | ast.List):
                    found = [self.resolve(element) for element in loop.iter.elts]
                    if all(values is not None for values in found):
                        return set().union(*(values for values in found if values is not None))
                return None
        if not self.scopes:
            return None
        scope = self.scopes[-1]
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and scope.name in (
            STATEMENT_CALLS
        ):
            forwarded = [argument.arg for argument in scope.args.posonlyargs + scope.args.args]
            if name in forwarded:
                return set()  # a wrapper forwarding its caller's name: the callers are checked
        assigned: set[str] = set()
        for child in ast.walk(scope):
            if isinstance(child, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == name for target in child.targets
            ):
                values = self.resolve(child.value)
                if values is None:
                    return None
                assigned |= values
        return assigned or None


def statement_names_used() -> StatementNames:
    visitor = StatementNames()
    for module in TRANSACTION_MODULES:
        visitor.visit(ast.parse(module.read_text(encoding="utf-8")))
    return visitor


def test_the_transaction_is_composed_of_its_parts() -> None:
    names = {module.name for module in TRANSACTION_MODULES}
    assert {"base.py", "jobs.py", "dead_letters.py", "retention.py", "administration.py"} <= names


def test_every_statement_name_in_the_transaction_code_is_resolvable() -> None:
    visitor = statement_names_used()
    assert visitor.unresolved == []
    assert len(visitor.names) >= 20
    assert {"claim_jobs", "update_jobs", "move_dead_letter"} <= visitor.names


@pytest.mark.parametrize("path", [SQLITE, POSTGRES], ids=["sqlite", "postgres"])
def test_every_statement_the_transaction_uses_exists(path: Path) -> None:
    defined = set(load_statements(path))
    missing = sorted(statement_names_used().names - defined)
    assert missing == [], f"used by the transaction but missing from {path.parent.name}: {missing}"


def test_fragments_are_included_where_named_and_are_not_statements(tmp_path: Path) -> None:
    path = tmp_path / "statements.sql"
    path.write_text(
        "-- fragment: alive\n-- a comment\nstatus = 'alive'\n\n"
        "-- name: count_alive\nSELECT COUNT(*) FROM t WHERE {alive};\n\n"
        "-- name: list_alive\nSELECT * FROM t WHERE {alive} AND id > :after;\n",
        encoding="utf-8",
    )
    assert load_statements(path) == {
        "count_alive": "SELECT COUNT(*) FROM t WHERE status = 'alive';",
        "list_alive": "SELECT * FROM t WHERE status = 'alive' AND id > :after;",
    }
    path.write_text("-- name: broken\nSELECT 1 WHERE {missing};\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no fragment named missing"):
        load_statements(path)


@pytest.mark.parametrize("path", [SQLITE, POSTGRES], ids=["sqlite", "postgres"])
def test_every_statement_sharing_the_dead_letter_filter_has_all_of_it(path: Path) -> None:
    statements = load_statements(path)
    for name in ("select_dead_letters", "count_dead_letters", "move_dead_letters"):
        assert "{" not in statements[name]
        assert {"queue", "type_prefix", "args_path", "replay_count_below"} <= parameter_names(
            statements[name]
        ), name


def test_a_store_parses_each_statement_on_its_first_use_only() -> None:
    parsed: list[str] = []

    def parse(name: str, sql: str) -> str:
        parsed.append(name)
        return sql.upper()

    scripts = ParsedOnUse({"one": "select 1", "two": "select 2"}, parse)
    assert parsed == []
    assert scripts["two"] == "SELECT 2" and scripts["two"] == "SELECT 2"
    assert parsed == ["two"]
    with pytest.raises(KeyError):
        scripts["three"]


@pytest.mark.parametrize("path", [SQLITE, POSTGRES], ids=["sqlite", "postgres"])
def test_every_statement_parses_for_its_store(path: Path) -> None:
    """Parsed on first use, so parsed here once each: a statement that cannot be parsed fails
    this test, not the first process that runs it."""
    for name, sql in load_statements(path).items():
        if path == POSTGRES:
            assert parse_script(name, sql), name
        else:
            assert [compile_part(part) for part in split_sqlite(sql)], name


def test_an_enqueue_to_a_known_queue_is_the_enqueue_less_its_queue_row() -> None:
    """enqueue_job_known_queue is enqueue_job without the queues insert, in both dialects: an
    edit to one of the pair that the other lacks fails here."""
    sqlite = sqlite_statements()
    full = split_sqlite(sqlite["enqueue_job"])
    assert full[0].startswith("INSERT INTO queues")
    assert split_sqlite(sqlite["enqueue_job_known_queue"]) == full[1:]
    postgres = postgres_statements()
    queue_row = re.compile(
        r"\), known AS \(\n    INSERT INTO queues .*?ON CONFLICT \(tenant_id, name\) DO NOTHING\n",
        re.DOTALL,
    )
    without, removed = queue_row.subn("", postgres["enqueue_job"])
    assert removed == 1
    assert without == postgres["enqueue_job_known_queue"]
