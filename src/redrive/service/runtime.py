"""What every use-case shares: the store, the clock, randomness, ids, events and counters."""

from __future__ import annotations

import random
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from redrive.domain.events import (
    EVENT_ID_PREFIX,
    BlockHeads,
    Event,
    EventRun,
    block_event_id,
    enqueued_runs,
    event_envelope,
    event_runs,
)
from redrive.domain.fingerprint import DEFAULT_FINGERPRINTER, Fingerprinter
from redrive.domain.frozen import Assembler, frozen_dataclass
from redrive.domain.identifiers import (
    uuid7,
    uuid7_block_head_parts,
    uuid7_block_heads,
    uuid7_blocks,
    uuid7_series,
)
from redrive.domain.job import Job
from redrive.domain.listeners import DELIVERY_TYPE, WEBHOOK_QUEUE, Listener, wants
from redrive.domain.redaction import DEFAULT_REDACTOR, Redactor
from redrive.domain.retry import RetryPolicy
from redrive.domain.secret_box import SecretBox
from redrive.domain.upcasting import Upcasters
from redrive.ports import Archive, Clock, EventWrites, Store, StoredEvent

# The alert rules, the webhook deliveries and the retention policy are imported when a use-case
# first asks for them (`Runtime.alerts`, `.deliveries`, `.retention_policy`): their modules were
# 12% of an embedded producer's instructions from start to its first enqueue (callgrind), and a
# producer uses none of them.
if TYPE_CHECKING:
    from redrive.domain.alerts import AlertConfig
    from redrive.domain.retention import RetentionPolicy
    from redrive.domain.root_cause import ClassificationRule
    from redrive.domain.webhook_delivery import DeliveryOptions

# The events a batch appends are assembled (no frozen __init__ setting each field).
assemble_stored = Assembler(StoredEvent)


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


@frozen_dataclass
class ServiceOptions:
    """Behaviour switches the composition root sets from Settings."""

    test_hooks: bool = False
    default_retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_fetch_count: int = 1000
    max_batch_size: int = 1000
    event_retention_ms: int = 3_600_000
    finished_job_retention_ms: int = 7 * 86_400_000
    # None: the built-in policy, RetentionPolicy() (the REDRIVE_DEAD_LETTER_* defaults).
    retention: RetentionPolicy | None = None
    prune_interval_ms: int = 300_000
    prune_batch_size: int = 5_000
    # How long a dashboard sign-in lasts (never past its key's own expiry).
    session_lifetime_ms: int = 12 * 3_600_000
    # Finds secrets in workers' errors before they are stored; names the keys masked for viewers.
    redactor: Redactor = DEFAULT_REDACTOR
    # Fingerprints dead letters' errors (job types may name a key of meta or args instead).
    fingerprinter: Fingerprinter = DEFAULT_FINGERPRINTER
    # None: DeliveryOptions() (the REDRIVE_WEBHOOK_* defaults).
    webhooks: DeliveryOptions | None = None
    # Seals webhook signing secrets; None: no server key, so no subscription can be made.
    secret_box: SecretBox | None = None
    webhook_log_retention_ms: int = 7 * 86_400_000
    # Redrive tasks: the highest rate one may run at; whether a verified one resolves its incident.
    redrive_max_rate: int = 1000
    redrive_auto_close: bool = False
    # Bring a dead letter's payload up to its type's current schema version when it is redriven.
    upcasters: Upcasters = field(default_factory=Upcasters)
    # The alert rules' thresholds, and how often they are evaluated.
    # None: AlertConfig() (the REDRIVE_ALERT_* defaults).
    alerts: AlertConfig | None = None
    alert_interval_ms: int = 15_000
    # Classify incidents as they open (before the built-in rules, domain/root_cause.py).
    classification_rules: tuple[ClassificationRule, ...] = ()
    # Single retries need a root cause with a fix reference too (bulk ones always do).
    strict_redrive: bool = False


@dataclass
class Metrics:
    """Counters since this process started, labelled the way /metrics prints them."""

    enqueued: Counter[tuple[str, str]] = field(default_factory=Counter)
    completed: Counter[tuple[str, str]] = field(default_factory=Counter)
    failed: Counter[tuple[str, str]] = field(default_factory=Counter)
    dead_letter_added: Counter[tuple[str, str]] = field(default_factory=Counter)
    dead_letter_retried: Counter[str] = field(default_factory=Counter)
    dead_letter_deleted: Counter[str] = field(default_factory=Counter)
    dead_letter_replayed: Counter[str] = field(default_factory=Counter)
    dead_letter_pruned: Counter[str] = field(default_factory=Counter)
    # Per redrive task: dead letters moved, and the redriven jobs that succeeded or died again.
    redrive_moved: Counter[str] = field(default_factory=Counter)
    redrive_succeeded: Counter[str] = field(default_factory=Counter)
    redrive_dead_again: Counter[str] = field(default_factory=Counter)
    # Per task: dead letters an upcaster refused; per error code: tasks that ended `failed`.
    redrive_failed_items: Counter[str] = field(default_factory=Counter)
    redrive_tasks_failed: Counter[str] = field(default_factory=Counter)
    duration_sum_seconds: float = 0.0
    duration_count: int = 0


class Runtime:
    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        options: ServiceOptions | None = None,
        rng: random.Random | None = None,
        archive: Archive | None = None,
    ) -> None:
        self.store = store
        self.archive = archive
        self.clock = clock or SystemClock()
        self.options = options or ServiceOptions()
        # Seeded once from the OS: ids and jitter need spread, not secrecy (lease tokens use
        # `secrets`), and a urandom read per job id showed in profiles.
        self.rng = rng or random.Random(secrets.randbits(128))
        self.metrics = Metrics()
        self.started_at = self.clock.now_ms()

    @cached_property
    def alerts(self) -> AlertConfig:
        """The alert rules' thresholds: the options', else the built-in ones."""
        from redrive.domain.alerts import AlertConfig

        return AlertConfig() if self.options.alerts is None else self.options.alerts

    @cached_property
    def deliveries(self) -> DeliveryOptions:
        """How webhook deliveries are sent and retried: the options', else the built-in way."""
        from redrive.domain.webhook_delivery import DeliveryOptions

        return DeliveryOptions() if self.options.webhooks is None else self.options.webhooks

    @cached_property
    def retention_policy(self) -> RetentionPolicy:
        """The global dead-letter retention policy: the options', else the built-in one."""
        from redrive.domain.retention import RetentionPolicy

        return RetentionPolicy() if self.options.retention is None else self.options.retention

    def now(self) -> int:
        return self.clock.now_ms()

    def new_id(self, now: int | None = None) -> str:
        return uuid7(self.now() if now is None else now, self.rng.getrandbits(74))

    def new_ids(self, count: int, now: int) -> list[str]:
        """`count` new ids at once: one millisecond's series (increasing, a third of `new_id`'s
        instructions an id), or one id made alone (a series of one costs twice `new_id`)."""
        return [self.new_id(now)] if count == 1 else uuid7_series(now, count, self.rng)

    def block_heads(self, count: int, now: int) -> list[str]:
        """`count` new event ids, each the first of a block of its own (an ack batch names its
        events by them: a run's row by its first ack's, a subscribed tenant's job's by its
        ack's own)."""
        return [f"evt_{event_id}" for event_id in uuid7_block_heads(now, count, self.rng)]

    def block_head_parts(self, count: int, now: int) -> BlockHeads:
        """`count` new event ids as `block_heads` makes them, kept as their parts (a claim or a
        bulk retry's chunk names its events' blocks by a few of them: claim_jobs, domain/events.py
        `retried_event_ids`)."""
        prefix, randoms = uuid7_block_head_parts(now, count, self.rng)
        return BlockHeads(EVENT_ID_PREFIX + prefix, randoms)

    def enqueued_event_ids(self, jobs: list[Job], now: int) -> list[str]:
        """The ids of a batch's enqueued events: a block for each run whose events one outbox row
        keeps (domain/events.py `enqueued_runs`), in the jobs' order. One job's is a block of
        one: a UUIDv7 whose counter (rand_a) is 0, made as `uuid7_blocks` makes it with a
        third of the instructions (a producer's enqueue makes one per call)."""
        if len(jobs) == 1:
            return [f"evt_{uuid7(now, self.rng.getrandbits(62))}"]
        return [f"evt_{event_id}" for event_id in uuid7_blocks(now, enqueued_runs(jobs), self.rng)]

    def new_token(self) -> str:
        return secrets.token_hex(12)

    def jitter_factor(self) -> float:
        return 0.5 + self.rng.random()

    async def emit(self, transaction: EventWrites, events: list[Event], now: int) -> None:
        """Append the events and, in the same transaction, queue a webhook delivery for each
        active subscription that wants one of them."""
        if events:
            await self.emit_runs(transaction, event_runs(events), now)

    async def emit_runs(self, transaction: EventWrites, runs: list[EventRun], now: int) -> None:
        """`emit` of the events of `runs` (`event_runs`), each run one outbox row: a run of
        several is a block of ids named by its first, a run of one an id of its own (a series
        when every run is of one)."""
        if not runs:
            return
        stored = self.stored_events(runs, now)
        listeners = await transaction.add_events(stored, [run.subjects for run in runs])
        if listeners:
            await self.queue_deliveries(transaction, listeners, run_members(stored, runs), now)

    def stored_events(self, runs: list[EventRun], now: int) -> list[StoredEvent]:
        """The first event of each run as the outbox keeps it, with a fresh id and the time: the
        ids are one series when every run is of one, else each the head of a block, so that one
        row keeps each run (its members' ids are the block's: `run_members`)."""
        ids = (
            self.new_ids(len(runs), now)
            if all(len(run.subjects) == 1 for run in runs)
            else uuid7_block_heads(now, len(runs), self.rng)
        )
        return [
            assemble_stored.adopt(
                {"id": f"evt_{event_id}", "sequence": 0, "time": now, "event": run.event}
            )
            for event_id, run in zip(ids, runs, strict=True)
        ]

    async def queue_deliveries(
        self, transaction: EventWrites, listeners: list[Listener], events: list[StoredEvent],
        now: int,
    ) -> None:  # fmt: skip
        """A webhook delivery job for each listener that wants one of the events just added."""
        if not listeners:
            return
        from redrive.domain.webhook_delivery import delivery_job

        wanted = [
            (listener, stored)
            for stored in events
            for listener in listeners
            if wants(listener, stored.event.tenant_id, stored.event.type, stored.event.queue)
        ]
        jobs = [
            delivery_job(
                self.new_id(now),
                listener.id,
                listener.tenant_id,
                event_envelope(stored.id, stored.time, stored.event),
                now,
                self.deliveries,
            )
            for listener, stored in wanted
        ]
        if not jobs:
            return
        await transaction.enqueue_jobs(jobs, None, now)  # their queues too, in one statement
        await transaction.notify({WEBHOOK_QUEUE})
        self.metrics.enqueued[(WEBHOOK_QUEUE, DELIVERY_TYPE)] += len(jobs)


def run_members(heads: list[StoredEvent], runs: list[EventRun]) -> list[StoredEvent]:
    """Every event of the runs, as stored: `heads` holds each run's first (a run of several:
    its block's id), and the others are the same event about their own subject, named by their
    place in the block (what a webhook delivery is told of each)."""
    members: list[StoredEvent] = []
    for head, run in zip(heads, runs, strict=True):
        if len(run.subjects) == 1:
            members.append(head)
            continue
        members.extend(
            replace(
                head,
                id=block_event_id(head.id, position),
                event=replace(run.event, subject=subject),
            )
            for position, subject in enumerate(run.subjects)
        )
    return members
