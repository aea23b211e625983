"""pgqueuer's worker as its documentation writes one, run as `pgq run pgqueuer_tasks:main`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job


async def noop(job: Job) -> None:
    return None


async def fail(job: Job) -> None:
    raise RuntimeError("always fails")


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """The factory `pgq run` enters; `on_failure="hold"` keeps a failed job for `pgq requeue`
    (the default deletes it)."""
    connection = await asyncpg.connect(os.environ["PGDSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))
    pgq.entrypoint("noop")(noop)
    pgq.entrypoint("fail", on_failure="hold")(fail)
    try:
        yield pgq
    finally:
        await connection.close()
