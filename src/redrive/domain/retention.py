"""Dead-letter retention: policies (global and per queue) and what a prune must remove."""

from __future__ import annotations

from typing import Any

from redrive.domain.durations import format_duration, parse_duration_ms
from redrive.domain.errors import InvalidRequest
from redrive.domain.frozen import frozen_dataclass

GLOBAL = "*"
PRUNING_POLICIES = ("delete", "archive")
MAX_COUNT_LIMIT = 1_000_000_000
DAY_MS = 86_400_000


@frozen_dataclass
class RetentionPolicy:
    """How long dead letters stay (max_age) and how many (max_count); what pruning does; and the
    floor (min_age): no dead letter younger than it is deleted by pruning, whatever the other two
    say (seed 003 §7.2). Under the archive policy younger ones are archived (kept in the archive,
    restorable) by age and count; under the delete policy they stay in the queue."""

    max_age_ms: int = 180 * DAY_MS
    max_count: int = 10_000
    pruning_policy: str = "delete"
    min_age_ms: int = 90 * DAY_MS

    @property
    def archives(self) -> bool:
        return self.pruning_policy == "archive"

    def age_cutoff(self, now: int) -> int:
        """Pruning by age removes what died before this: past max_age, and past the floor too
        when pruning deletes (archiving keeps them, so the floor does not stop it)."""
        return now - (self.max_age_ms if self.archives else max(self.max_age_ms, self.min_age_ms))

    def count_cutoff(self, now: int) -> int | None:
        """Which dead letters the count may remove: those that died before this time (the
        floor), or every one (None) when they are archived rather than deleted."""
        return None if self.archives else now - self.min_age_ms

    def to_document(self) -> dict[str, Any]:
        return {
            "max_age": format_duration(self.max_age_ms),
            "max_count": self.max_count,
            "pruning_policy": self.pruning_policy,
            "min_age": format_duration(self.min_age_ms),
        }


@frozen_dataclass
class PolicyRecord:
    """A stored retention policy: the global one (queue GLOBAL) or one queue's override, and who
    changed it last, when."""

    tenant_id: str
    queue: str
    policy: RetentionPolicy
    updated_at: int
    updated_by: str


@frozen_dataclass
class ArchiveRecord:
    """An archive file pruning wrote: where it is, how many dead letters it holds, and when it
    was written (and restored, once it has been)."""

    name: str
    tenant_id: str
    path: str
    entries: int
    created_at: int
    restored_at: int | None = None


@frozen_dataclass
class PolicyChanges:
    """A retention change as a request gives it; what is None keeps its current value."""

    max_age_ms: int | None = None
    max_count: int | None = None
    pruning_policy: str | None = None
    min_age_ms: int | None = None

    def applied_to(self, base: RetentionPolicy) -> RetentionPolicy:
        return RetentionPolicy(
            base.max_age_ms if self.max_age_ms is None else self.max_age_ms,
            base.max_count if self.max_count is None else self.max_count,
            base.pruning_policy if self.pruning_policy is None else self.pruning_policy,
            base.min_age_ms if self.min_age_ms is None else self.min_age_ms,
        )


def parse_policy_changes(raw: object) -> PolicyChanges:
    """A (partial) policy; `max_age` and `min_age` are ISO 8601 durations such as P180D (a
    min_age of P0D turns the floor off)."""
    if not isinstance(raw, dict):
        raise InvalidRequest("the retention policy must be a JSON object", {"field": "body"})
    unknown = set(raw) - {"max_age", "max_count", "pruning_policy", "min_age", "queue"}
    if unknown:
        raise InvalidRequest(
            f"unknown retention fields: {', '.join(sorted(unknown))}", {"field": sorted(unknown)[0]}
        )
    max_age_ms = None
    if "max_age" in raw:
        if not isinstance(raw["max_age"], str):
            raise InvalidRequest(
                "max_age must be an ISO 8601 duration such as P180D", {"field": "max_age"}
            )
        max_age_ms = parse_duration_ms(raw["max_age"], "max_age")
        if max_age_ms <= 0:
            raise InvalidRequest("max_age must be longer than zero", {"field": "max_age"})
    min_age_ms = None
    if "min_age" in raw:
        if not isinstance(raw["min_age"], str):
            raise InvalidRequest(
                "min_age must be an ISO 8601 duration such as P90D", {"field": "min_age"}
            )
        min_age_ms = parse_duration_ms(raw["min_age"], "min_age")
        if min_age_ms < 0:
            raise InvalidRequest("min_age must not be negative", {"field": "min_age"})
    max_count = raw.get("max_count")
    if "max_count" in raw and (
        isinstance(max_count, bool)
        or not isinstance(max_count, int)
        or not 1 <= max_count <= MAX_COUNT_LIMIT
    ):
        raise InvalidRequest(
            f"max_count must be an integer from 1 to {MAX_COUNT_LIMIT}", {"field": "max_count"}
        )
    pruning = raw.get("pruning_policy")
    if "pruning_policy" in raw and pruning not in PRUNING_POLICIES:
        raise InvalidRequest(
            "pruning_policy must be delete or archive", {"field": "pruning_policy"}
        )
    return PolicyChanges(max_age_ms, max_count, pruning, min_age_ms)


@frozen_dataclass
class PrunePlan:
    """Per scope: the age cut-off, and how many of the oldest dead letters exceed the count."""

    queue: str  # a queue name, or GLOBAL for every queue without its own policy
    policy: RetentionPolicy
    age_cutoff: int
    excess: int


def plan_prune(
    global_policy: RetentionPolicy,
    queue_policies: dict[str, RetentionPolicy],
    dead_counts: dict[str, int],
    now: int,
) -> list[PrunePlan]:
    """Age first, then count: a queue with its own policy is capped on its own; all other queues
    together are capped by the global max_count (counts are taken after the age prune)."""
    plans = [
        PrunePlan(
            queue,
            policy,
            policy.age_cutoff(now),
            max(dead_counts.get(queue, 0) - policy.max_count, 0),
        )
        for queue, policy in sorted(queue_policies.items())
    ]
    shared = sum(count for queue, count in dead_counts.items() if queue not in queue_policies)
    plans.append(
        PrunePlan(
            GLOBAL,
            global_policy,
            global_policy.age_cutoff(now),
            max(shared - global_policy.max_count, 0),
        )
    )
    return plans


def next_prune_at(now: int, interval_ms: int) -> int:
    """Prunes run on wall-clock boundaries of the interval, so every replica agrees when."""
    return (now // interval_ms + 1) * interval_ms
