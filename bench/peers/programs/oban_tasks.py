"""oban-py's workers, found by `oban start` through their module path (`oban_tasks.Noop`)."""

from __future__ import annotations

from typing import Any

from oban import worker


@worker(queue="default")
class Noop:
    async def process(self, job: Any) -> None:
        return None


@worker(queue="default", max_attempts=1)
class Fail:
    """One attempt, so a failure discards the job (oban's default is 20 attempts)."""

    async def process(self, job: Any) -> None:
        raise RuntimeError("always fails")
