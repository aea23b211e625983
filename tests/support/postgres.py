"""Throw-away PostgreSQL databases for tests, on the server named by REDRIVE_TEST_POSTGRES_URL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def admin_url() -> str:
    return os.environ.get("REDRIVE_TEST_POSTGRES_URL", DEFAULT_ADMIN_URL)


def database_url(name: str) -> str:
    parts = urlsplit(admin_url())
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def require_postgres() -> None:
    """Skip when PostgreSQL is unreachable, except under CI=true where that is a failure."""
    try:
        with psycopg.connect(admin_url(), connect_timeout=3):
            pass
    except psycopg.OperationalError as error:
        message = f"PostgreSQL at {admin_url()} is unreachable: {error}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


@contextmanager
def fresh_database(prefix: str = "redrive_test") -> Iterator[str]:
    """Create an empty database, yield its URL, and drop it afterwards."""
    require_postgres()
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        with psycopg.connect(admin_url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database_from_template(template: str, prefix: str = "redrive_test") -> Iterator[str]:
    """A copy of an already-migrated template database (much faster than migrating again)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield database_url(name)
    finally:
        with psycopg.connect(admin_url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
