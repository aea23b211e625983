"""The committed sync client is exactly what the generator writes from the async client."""

from __future__ import annotations

import ast
import inspect

from redrive.client import Client, SyncClient
from redrive.client.generate import COMMAND, SOURCE, TARGET, generate


def test_committed_sync_client_matches_the_generator() -> None:
    expected = generate(SOURCE.read_text(encoding="utf-8"))
    committed = TARGET.read_text(encoding="utf-8")
    assert committed == expected, (
        f"src/redrive/client/sync.py is out of date with client.py; run `{COMMAND}` "
        "and commit the result"
    )


def test_generated_file_says_it_is_generated() -> None:
    first_line = TARGET.read_text(encoding="utf-8").splitlines()[0]
    assert "do not edit" in first_line and COMMAND in first_line


def test_every_public_async_method_has_a_sync_twin_with_the_same_parameters() -> None:
    public = {
        name: method
        for name, method in inspect.getmembers(Client, inspect.isfunction)
        if not name.startswith("_") and name != "aclose"
    }
    for name, method in public.items():
        twin = getattr(SyncClient, name, None)
        assert twin is not None, f"SyncClient lacks {name}"
        assert inspect.signature(twin).parameters.keys() == (
            inspect.signature(method).parameters.keys()
        ), name
        assert inspect.getdoc(twin) == inspect.getdoc(method), name


def test_async_iterators_become_plain_generators() -> None:
    assert inspect.isasyncgenfunction(Client.iter_dead_letters)
    assert inspect.isgeneratorfunction(SyncClient.iter_dead_letters)


def test_generator_handles_varargs_and_defaults() -> None:
    source = '''
from typing import Any

LIMIT = 3


class Client:
    def __init__(self, url: str = "x") -> None:
        self.url = url

    async def call(self, first: int, *rest: str, flag: bool = False, **extra: Any) -> int:
        """Adds."""
        return first

    async def stream(self, limit: int = LIMIT) -> AsyncIterator[int]:
        yield limit
'''
    generated = generate(source)
    tree = ast.parse(generated)
    sync = next(node for node in tree.body if isinstance(node, ast.ClassDef))
    methods = {node.name: node for node in sync.body if isinstance(node, ast.FunctionDef)}
    assert "self._client.call(first, *rest, flag=flag, **extra)" in generated
    returns = methods["stream"].returns
    assert returns is not None and ast.unparse(returns) == "Iterator[int]"
    assert "from redrive.client.client import LIMIT, Client" in generated


def test_generator_follows_base_classes_of_the_package() -> None:
    derived = '''
from redrive.client.base import Base


class Client(Base):
    async def own(self) -> int:
        return 1

    async def shared(self) -> str:
        """The derived one wins."""
        return "derived"
'''
    base = """
DEFAULT = "x"


class Base:
    def __init__(self, url: str = DEFAULT) -> None:
        self.url = url

    async def shared(self) -> str:
        return "base"

    async def inherited(self, count: int = 1) -> list[int]:
        return [count]

    async def _private(self) -> None:
        return None
"""
    sources = {"redrive.client.base": base}
    generated = generate(derived, sources.get)
    assert "def inherited(self, count: int = 1) -> list[int]:" in generated
    assert generated.count("def shared(") == 1 and "The derived one wins." in generated
    assert "_private" not in generated
    assert "from redrive.client.base import DEFAULT" in generated
