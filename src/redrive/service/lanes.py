"""Moving a large set in chunks over the store's write lanes, each chunk a transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

# One lane's step: given how many it may take, move up to that many in a transaction of its own
# and say how many it took (0 ends the lane: what is left is held by the other lanes).
Step = Callable[[int], Awaitable[int]]


def lane_share(count: int, lanes: int, least: int, most: int) -> int:
    """The chunk that gives each lane an equal share of `count`, but at least `least` and at most
    `most`: every chunk costs its own commit (a flush of the WAL) and round trips, and equal
    shares end the lanes together."""
    return max(least, min(most, -(-count // lanes)))


def _next_take(chunk: int, left: int) -> int:
    """A chunk, or all that is left when what a chunk would leave is under a tenth of one: such
    an odd remainder was a chunk of its own at the end, with its own read, plan and commit, after
    the other lane had finished (a critical redrive task's lane whose first chunk its pace cut
    to 4,700 of 5,000 left 300 of 20,000 to a fifth chunk: the last ~40 ms of a 1.13 s run)."""
    return left if left - chunk < chunk // 10 else chunk


async def in_lanes(lanes: int, budget: int, chunk: int, step_for_lane: Callable[[], Step]) -> None:
    """Up to `budget` items, a `chunk` a step (the last may take up to a tenth more, see
    `_next_take`), over `lanes` loops side by side, each with a step of its own
    (`step_for_lane()`, for state a lane keeps between its chunks). What a step leaves of its
    take goes back to the budget. The first error stops the other lanes and
    is raised as itself, as one transaction's would be; chunks committed stay moved."""
    left = budget

    async def lane(step: Step) -> None:
        nonlocal left
        while (take := _next_take(chunk, left)) > 0:
            left -= take
            took = await step(take)
            left += take - took
            if not took:
                return

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(lanes):
                group.create_task(lane(step_for_lane()))
    except ExceptionGroup as errors:
        raise errors.exceptions[0] from None
