"""A clock the test moves by hand, so tests freeze time instead of sleeping."""

from __future__ import annotations


class ManualClock:
    def __init__(self, start_ms: int = 1_790_000_000_000) -> None:
        self.current = start_ms

    def now_ms(self) -> int:
        return self.current

    def advance(self, milliseconds: int) -> None:
        self.current += milliseconds
