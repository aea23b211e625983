"""Chunks over lanes (service/lanes.py): each item taken once, a chunk a step, and an odd
remainder under a tenth of a chunk taken by the last chunk rather than a chunk of its own."""

from __future__ import annotations

import pytest

from redrive.service.lanes import Step, in_lanes

pytestmark = pytest.mark.anyio


async def takes(lanes: int, budget: int, chunk: int) -> list[int]:
    taken: list[int] = []

    def step_for_lane() -> Step:
        async def step(take: int) -> int:
            taken.append(take)
            return take

        return step

    await in_lanes(lanes, budget, chunk, step_for_lane)
    return taken


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (20_000, [5_000] * 4),
        (20_300, [5_000] * 3 + [5_300]),  # 300 is under a tenth of a chunk: with the last
        (20_500, [5_000] * 4 + [500]),  # a tenth: a chunk of its own
        (4_000, [4_000]),
        (0, []),
    ],
)
async def test_chunks_take_the_budget_once_with_an_odd_remainder_in_the_last(
    budget: int, expected: list[int]
) -> None:
    assert sorted(await takes(2, budget, 5_000)) == sorted(expected)
