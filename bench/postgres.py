"""Throw-away PostgreSQL databases for benchmarks: create, copy from a template, drop."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SERVER_SETTINGS = (
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "effective_cache_size",
    "max_wal_size",
    "checkpoint_completion_target",
    "wal_compression",
    "synchronous_commit",
    "fsync",
    "autovacuum",
    "max_parallel_workers_per_gather",
)


def admin_url() -> str:
    """REDRIVE_BENCH_POSTGRES_URL, else REDRIVE_TEST_POSTGRES_URL, else the local server."""
    return (
        os.environ.get("REDRIVE_BENCH_POSTGRES_URL")
        or os.environ.get("REDRIVE_TEST_POSTGRES_URL")
        or DEFAULT_ADMIN_URL
    )


def database_url(name: str) -> str:
    parts = urlsplit(admin_url())
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def server_address() -> str:
    """host:port of the server, without user or password (for the saved results)."""
    parts = urlsplit(admin_url())
    return f"{parts.hostname}:{parts.port or 5432}"


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def _new_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def _drop(name: str) -> None:
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database(prefix: str = "redrive_bench", keep: bool = False) -> Iterator[str]:
    """Create an empty database, yield its URL, and drop it afterwards (unless `keep`)."""
    name = _new_name(prefix)
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        if not keep:
            _drop(name)


@contextmanager
def database_copy(template_url: str, prefix: str = "redrive_bench_copy") -> Iterator[str]:
    """A file-level copy of a seeded database (nobody may be connected to the template)."""
    name = _new_name(prefix)
    template = database_name(template_url)
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY = FILE_COPY')
    try:
        yield database_url(name)
    finally:
        _drop(name)


def server_facts() -> dict[str, str]:
    """The server's version and the settings that move these figures."""
    with psycopg.connect(admin_url(), autocommit=True) as connection:
        facts: dict[str, str] = {}
        for setting in ("server_version", *SERVER_SETTINGS):
            row = connection.execute(f"SHOW {setting}").fetchone()
            facts[setting] = str(row[0]) if row else ""
        return facts


def reachable() -> str | None:
    """None when the server answers, else why not."""
    try:
        with psycopg.connect(admin_url(), connect_timeout=3):
            return None
    except psycopg.OperationalError as error:
        return str(error).strip()
