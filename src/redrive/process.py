"""Process-wide tuning for a long-running redrive process: `redrive serve` and `redrive worker`."""

from __future__ import annotations

import gc
from collections.abc import Coroutine
from typing import Any, TypeVar

Result = TypeVar("Result")

# Python's cyclic collector looks at its youngest generation every 700 container allocations.
# A batch of 1,000 jobs allocates far more than that, so the collector ran dozens of times per
# batch, scanning every object the batch still held: 12 % of bulk enqueue, measured. Cycles are
# still collected, only every 50,000 allocations instead.
YOUNG_GENERATION_THRESHOLD = 50_000
OLDER_GENERATION_THRESHOLD = 20


def collect_rarely() -> None:
    """Collect cycles every YOUNG_GENERATION_THRESHOLD allocations. The command line sets it
    before it imports anything else: a command's imports (asyncio, typer, the service, a store
    and its driver) made the collector run dozens of times over objects that live as long as
    the process: 2-2.6 % of a `redrive worker`'s instructions from spawn to its first handler
    call (callgrind: 790 -> 775 M embedded on PostgreSQL, 713 -> 697 M on SQLite, 610 -> 594 M
    over HTTP)."""
    gc.set_threshold(
        YOUNG_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD
    )


def tune_garbage_collector() -> None:
    """Collect cycles less often, and never scan again what start-up made (modules, settings,
    statements, templates), which lives as long as the process. Call it once, after start-up.
    Frozen without a full collection first: at this point of a worker's or a server's start
    one found nothing to free (imports leave no cycles behind) and cost 5-15 ms of CPU, a
    cost paid on every start; whatever start-up left unreachable would be kept, once."""
    gc.freeze()
    collect_rarely()


def run(main: Coroutine[Any, Any, Result]) -> Result:
    """Run a long-lived process's event loop on uvloop (libuv, in C), as `uvicorn` would
    pick it: asyncio.run gives the pure-Python loop, whose scheduling, selector and socket
    transports were about a fifth of `redrive serve`'s CPU per enqueue request (and of an
    embedded worker's). Imported here: a worker over HTTP, which imports this module too,
    starts without it. asyncio is imported here too: the command line imports this module
    first, to collect rarely before it imports asyncio (collect_rarely)."""
    import asyncio

    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
