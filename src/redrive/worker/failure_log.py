"""Failed attempts in the worker's log: a line each, until they flood; then a count a second."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

log = logging.getLogger("redrive.worker")

# Each failure's own line, up to this many a second. Every failure is recorded in full on the
# server (the job's errors, its dead letter); the line is for a person reading the log. A
# handler failing every job wrote 20,000 lines at ~2,000 a second, and formatting and redacting
# them was 15 % of the embedded worker's CPU on the always-failing path.
LINES_PER_SECOND = 20
WINDOW_SECONDS = 1.0


class FailureLog:
    """One line per failed attempt while they are few; past `lines_per_second`, the rest of
    each second are counted by job type and error type and written as one line at its end."""

    def __init__(
        self,
        lines_per_second: int = LINES_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lines_per_second = lines_per_second
        self.clock = clock
        self._window_start = float("-inf")
        self._lines = 0
        self._held: Counter[tuple[str, str]] = Counter()
        self._flush: asyncio.TimerHandle | None = None

    def failed(
        self, job_id: str, job_type: object, attempt: object, error: dict[str, object]
    ) -> None:
        now = self.clock()
        if now - self._window_start >= WINDOW_SECONDS:
            self.flush()
            self._window_start, self._lines = now, 0
        if self._lines < self.lines_per_second:
            self._lines += 1
            log.warning("job %s (%s) failed on attempt %s: %s: %s",
                        job_id, job_type, attempt, error["type"], error["message"])  # fmt: skip
            return
        self._held[(str(job_type), str(error["type"]))] += 1
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(WINDOW_SECONDS, self.flush)

    def flush(self) -> None:
        """Write the count of the failures held back, if any (the worker calls it on stopping)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if not self._held:
            return
        total = sum(self._held.values())
        kinds = ", ".join(
            f"{job_type} {error_type} x{count}"
            for (job_type, error_type), count in self._held.most_common()
        )
        self._held.clear()
        log.warning("%d more jobs failed (beyond %d lines a second): %s",
                    total, self.lines_per_second, kinds)  # fmt: skip
