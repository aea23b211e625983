"""The sweep loop: run the periodic tasks every interval until cancelled, surviving errors."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redrive.service.sweeper import Sweeper

log = logging.getLogger("redrive.maintenance")


async def sweep_forever(sweeper: Sweeper, interval_seconds: float) -> None:
    failures = 0
    while True:
        try:
            await sweeper.sweep(paced=True)
            failures = 0
        except asyncio.CancelledError:
            raise
        except Exception:
            failures += 1
            if failures == 1 or failures % 100 == 0:
                log.exception("periodic sweep failed (%d in a row); will retry", failures)
        await rest(sweeper, interval_seconds * min(failures + 1, 10))


async def rest(sweeper: Sweeper, seconds: float) -> None:
    """Wait `seconds` for the next sweep; a redrive task started meanwhile in this process moves
    its batch due at once (at the next sweep it waited for the rest of the interval and the
    sweep's other tasks first, which scan the jobs table: a critical redrive's whole batch is
    due by the time its start commits)."""
    clock = asyncio.get_running_loop()
    deadline = clock.time() + seconds
    started = sweeper.redrives.started
    while (left := deadline - clock.time()) > 0:
        try:
            await asyncio.wait_for(started.wait(), left)
        except TimeoutError:
            return
        started.clear()
        try:
            await sweeper.redrives.advance()
        except Exception:
            log.exception("advancing a redrive task just started failed; the sweep will retry")


class SweepLoop:
    """Owns the background task so the server can start and stop it with the app."""

    def __init__(self, sweeper: Sweeper, interval_seconds: float) -> None:
        self.sweeper = sweeper
        self.interval_seconds = interval_seconds
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(sweep_forever(self.sweeper, self.interval_seconds))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None
