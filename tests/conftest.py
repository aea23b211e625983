"""Fixtures shared by the behavioural tests: one suite, run against SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from redrive.api.app import create_app
from redrive.ports import Store
from redrive.service.facade import Service
from redrive.service.runtime import Runtime
from redrive.store.postgres.store import PostgresStore
from redrive.store.sqlite.store import SqliteStore
from tests.support.clock import ManualClock
from tests.support.options import service_options
from tests.support.postgres import database_from_template, fresh_database, require_postgres


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated database that each test copies."""
    require_postgres()
    with fresh_database("redrive_template") as url:

        async def migrate() -> None:
            store = PostgresStore(url, max_size=1)
            await store.migrate()
            await store.close()

        asyncio.run(migrate())
        yield url.rsplit("/", 1)[1]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """Which store a behavioural test runs on; every such test runs on both."""
    return str(request.param)


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/redrive.db"
        return
    template = request.getfixturevalue("postgres_template")
    with database_from_template(template) as url:
        yield url


async def open_test_store(database_url: str) -> Store:
    if database_url.startswith("sqlite"):
        store: Store = SqliteStore(database_url.removeprefix("sqlite:///"))
    else:
        store = PostgresStore(database_url, max_size=4)
    await store.migrate()
    return store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    opened = await open_test_store(database_url)
    yield opened
    await opened.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def service(store: Store, clock: ManualClock) -> Service:
    return Service(Runtime(store, clock=clock, options=service_options(), rng=random.Random(7)))


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service, max_body_bytes=64_000)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://redrive.test") as http:
        yield http
