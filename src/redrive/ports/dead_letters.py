"""What the dead-letter and retention stores take and give back: a page of a listing, what a
retry moved, one batch of pruning."""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from typing import TYPE_CHECKING

from redrive.domain.frozen import frozen_dataclass

if TYPE_CHECKING:
    from redrive.domain.dead_letter import MovedEpisode, RequeuedGroup
    from redrive.domain.listeners import Listener


@frozen_dataclass
class Page:
    limit: int
    offset: int = 0
    cursor_at: int | None = None
    cursor_id: str | None = None


@frozen_dataclass
class Retried:
    """What a retry statement moved: one by one (`moved`) the episodes whose job it did not put
    back and every episode of a tenant with an active webhook subscription (`listeners`: it
    wrote each moved episode's event, their deliveries are the caller's), the others counted in
    groups (`requeued`); and the chosen episodes it skipped (held by another transaction or no
    longer dead; a redrive task's: the items it marked moved whose dead letters it skipped)."""

    moved: list[MovedEpisode]
    listeners: list[Listener]
    skipped: list[str]
    requeued: list[RequeuedGroup] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.moved) + sum(group.count for group in self.requeued)

    def by_queue(self) -> Counter[str]:
        """How many moved, by queue."""
        counts = Counter(episode.queue for episode in self.moved)
        for group in self.requeued:
            counts[group.queue] += group.count
        return counts


@frozen_dataclass
class PruneScope:
    """One batch of pruning: one queue or every queue but the excluded ones; by age (every
    episode that died before `before`) or by count (the oldest dead ones, those that died before
    `before` when it is set: the floor); archived (whole rows returned) or just deleted. Dead
    letters under a legal hold are never pruned."""

    queue: str | None
    excluded_queues: list[str] | None
    before: int | None
    archive: bool
    by_count: bool = False
