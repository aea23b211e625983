"""Wake-ups: waiters sleep until a queue they watch gets work (or their timeout passes)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


class Wakeups:
    """In-process fan-out of "queue X has work" signals to waiting fetches."""

    def __init__(self) -> None:
        self._waiters: list[tuple[frozenset[str], asyncio.Event]] = []

    def signal(self, queues: Iterable[str]) -> None:
        if not self._waiters:
            return
        names = set(queues)
        if not names:
            return
        for watched, event in self._waiters:
            if watched & names:
                event.set()

    async def wait(self, queues: Iterable[str], timeout: float) -> bool:
        """True when woken for one of `queues`, False on timeout."""
        entry = (frozenset(queues), asyncio.Event())
        self._waiters.append(entry)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry[1].wait(), timeout)
            return entry[1].is_set()
        finally:
            self._waiters.remove(entry)
