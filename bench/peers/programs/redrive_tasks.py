"""redrive's worker as the README writes one, run as `redrive worker redrive_tasks:worker`."""

from __future__ import annotations

from redrive.worker import JobContext, Worker

worker = Worker(queues=["default"])


@worker.handler("bench.noop")
async def noop(job: JobContext) -> None:
    return None


@worker.handler("bench.fail")
async def fail(job: JobContext) -> None:
    raise RuntimeError("always fails")
