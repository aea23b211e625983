"""Handlers the worker integration tests run inside a real `redrive worker` process."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redrive import JobContext, NonRetryable, SendToDeadLetter, Worker

worker = Worker(queues=["default"], concurrency=8)


class SmtpError(Exception):
    """What a mail handler raises when the relay refuses it."""


@worker.handler("echo")
def echo(job: JobContext) -> dict[str, Any]:
    return {"args": job.args, "attempt": job.attempt}


@worker.handler("flaky")
def flaky(job: JobContext) -> str:
    if job.attempt < 3:
        raise ConnectionError(f"attempt {job.attempt} refused")
    return "third time lucky"


@worker.handler("smtp.down")
def smtp_down(job: JobContext) -> None:
    raise SmtpError("connection refused by relay")


@worker.handler("poison")
async def poison(job: JobContext) -> None:
    raise SendToDeadLetter("cannot parse the payload")


@worker.handler("declined")
def declined(job: JobContext) -> None:
    raise NonRetryable("card declined")


@worker.handler("sleep")
def sleep(job: JobContext) -> str:
    time.sleep(float(job.args[0]))
    return "slept"


@worker.handler("sleep.async")
async def sleep_async(job: JobContext) -> str:
    await asyncio.sleep(float(job.args[0]))
    return "slept"
