"""The JobSource port: how the worker runtime reaches jobs (HTTP or in-process), in batches."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

DIRECTIVE_QUIET = "quiet"
DIRECTIVE_TERMINATE = "terminate"

Item = TypeVar("Item")
Result = TypeVar("Result")


# The records a batch carries are named tuples, immutable as the frozen dataclasses they were, and
# made once per job on every worker's path: a frozen dataclass's `__init__` sets each field with
# `object.__setattr__` (~1,500 instructions a field on CPython 3.11), a named tuple's `__new__`
# makes its tuple in one call (Completion: ~5,800 -> ~3,100 instructions; callgrind).
class Completion(NamedTuple):
    """A job its handler finished: ack it with `result` under the lease it was fetched with."""

    job_id: str
    lease_token: str | None
    result: Any = None


class Failure(NamedTuple):
    """A job to nack: a failed attempt (`error`), or handed back untouched (`requeue`)."""

    job_id: str
    lease_token: str | None
    error: dict[str, Any]
    requeue: bool = False


class Outcome(NamedTuple):
    """What the server made of one ack or nack: the job's new state, or why it refused."""

    job_id: str
    state: str | None = None
    problem: str | None = None

    @property
    def accepted(self) -> bool:
        return self.problem is None


class HeartbeatReply(NamedTuple):
    directive: str
    extended: list[str]
    lost: list[str]


class JobSource(Protocol):
    """One port, two adapters: `HttpJobSource` (any OJS server) and `EmbeddedJobSource`."""

    async def fetch(
        self, queues: list[str], count: int, wait_ms: int, worker_id: str
    ) -> list[dict[str, Any]]:
        """Claim up to `count` jobs (OJS job documents carrying `lease_token`); with `wait_ms`,
        an empty claim waits for work that long before returning an empty list."""
        ...

    def interrupt(self) -> None:
        """Make a fetch that is waiting for work return soon (the worker is shutting down)."""
        ...

    async def ack(self, completions: list[Completion], worker_id: str) -> list[Outcome]: ...

    async def nack(self, failures: list[Failure], worker_id: str) -> list[Outcome]: ...

    async def heartbeat(self, job_ids: list[str], worker_id: str) -> HeartbeatReply:
        """Extend the leases of `job_ids`; the directive is "", "quiet" or "terminate"."""
        ...

    async def close(self) -> None: ...


async def each_in_lanes(
    items: Sequence[Item], call: Callable[[Item], Awaitable[Result]], lanes: int
) -> list[Result]:
    """`call` for every item, at most `lanes` at a time, results in item order (how adapters
    send a batch with single-job calls until the server takes batches)."""
    results: list[Result | None] = [None] * len(items)
    pending = iter(enumerate(items))

    async def lane() -> None:
        for index, item in pending:
            results[index] = await call(item)

    count = max(1, min(lanes, len(items)))
    if count == 1:
        await lane()
    else:
        await asyncio.gather(*(lane() for _ in range(count)))
    return results  # type: ignore[return-value]  # every slot was filled
