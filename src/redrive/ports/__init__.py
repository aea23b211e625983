"""The ports the service needs: a clock, and a store whose transactions are split by concern.
The values they take and give back live in this package's modules by concern."""

from __future__ import annotations

import importlib
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

# The domain's types appear here only in annotations: imported for the type checker alone, so
# a process imports the domain modules its own path uses, not every one a port names.
if TYPE_CHECKING:
    from redrive.domain.alerts import Alert, AlertQuery, Arrivals, GroupCount
    from redrive.domain.audit import AuditQuery, AuditRecord, ChainHead
    from redrive.domain.caller import Caller
    from redrive.domain.dead_letter import (
        DeadLetter,
        DeadLetterStats,
        MovedEpisode,
    )
    from redrive.domain.dead_letter_filter import DeadLetterFilter
    from redrive.domain.events import BlockHeads
    from redrive.domain.incident import Incident, IncidentEntry, IncidentQuery, StateChange
    from redrive.domain.job import Job
    from redrive.domain.job_schemas import JobSchema
    from redrive.domain.keys import ApiKey
    from redrive.domain.legal_hold import LegalHold
    from redrive.domain.listeners import Listener
    from redrive.domain.records import CronRecord, QueueRecord, WorkerRecord
    from redrive.domain.redrive import ItemOutcome, RedriveFailure, RedriveOutcome, RedriveTask
    from redrive.domain.replay import ReplayRule
    from redrive.domain.retention import ArchiveRecord, PolicyRecord
    from redrive.domain.root_cause import RootCause, Unexplained
    from redrive.domain.sessions import DashboardSession
    from redrive.domain.trend import Buckets
    from redrive.domain.webhook_delivery import DeliveryQuery, DeliveryRecord
    from redrive.domain.webhooks import Subscription

    # The values, by these names too (imported on first use at run time, below).
    from redrive.ports.access import StoredKey as StoredKey
    from redrive.ports.access import StoredSession as StoredSession
    from redrive.ports.access import StoredSubscription as StoredSubscription
    from redrive.ports.attempts import Claim as Claim
    from redrive.ports.attempts import Claimed as Claimed
    from redrive.ports.attempts import CompletedJob as CompletedJob
    from redrive.ports.attempts import Completion as Completion
    from redrive.ports.attempts import Completions as Completions
    from redrive.ports.attempts import JobChange as JobChange
    from redrive.ports.dead_letters import Page as Page
    from redrive.ports.dead_letters import PruneScope as PruneScope
    from redrive.ports.dead_letters import Retried as Retried
    from redrive.ports.events import EventQuery as EventQuery
    from redrive.ports.events import StoredEvent as StoredEvent
    from redrive.ports.jobs import Enqueued as Enqueued
    from redrive.ports.jobs import JobFilter as JobFilter

# Where each value lives: `from redrive.ports import Page` imports only the module that holds it,
# so a process makes the value classes its own path uses (each frozen dataclass execs its
# generated methods: ~0.3 ms apiece), not all sixteen.
VALUE_MODULES = {
    **dict.fromkeys(("StoredKey", "StoredSession", "StoredSubscription"), "access"),
    **dict.fromkeys(
        ("Claim", "Claimed", "CompletedJob", "Completion", "Completions", "JobChange"), "attempts"
    ),
    **dict.fromkeys(("Page", "PruneScope", "Retried"), "dead_letters"),
    **dict.fromkeys(("EventQuery", "StoredEvent"), "events"),
    **dict.fromkeys(("Enqueued", "JobFilter"), "jobs"),
}


def __getattr__(name: str) -> Any:
    """A value of the ports, imported from its module on first use."""
    module = VALUE_MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'redrive.ports' has no attribute {name!r}")
    return getattr(importlib.import_module(f"redrive.ports.{module}"), name)


class Clock(Protocol):
    def now_ms(self) -> int: ...


class JobStore(Protocol):
    """The live jobs: write and read them, lease them, promote and expire them, count them, and
    wake waiting fetches (on commit) when a queue gets work."""

    async def insert_job(self, job: Job) -> bool: ...
    async def insert_jobs(self, jobs: list[Job]) -> set[str]: ...
    async def enqueue_jobs(
        self,
        jobs: list[Job],
        event_ids: list[str] | None,
        now: int,
        alone: bool = False,
        queue_known: bool = False,
    ) -> Enqueued:
        """New jobs (as `new_job` makes them: never claimed), their queues and, with
        `event_ids` (one per job), each job's `enqueued_event` under its id. An id that exists
        already is in `Enqueued.existing` or raises Duplicate (PostgreSQL's statements, plain
        inserts, fail: the transaction cannot go on), naming the job when it is one, none for a
        batch. `alone`: the only
        statement of a unit of one statement (`Store.transaction(one_statement=True)`), which
        commits it by itself: then nothing is written when the events have a listener (the
        caller enqueues again in a transaction, which queues the deliveries), and the wake-ups
        of the available jobs go out with it. `queue_known`: the one job's queue row exists
        (the caller saw it committed; queue rows are never deleted), so it is not written; a
        batch writes its queues' rows whatever it says."""
        ...

    async def upsert_job(self, job: Job) -> None: ...
    async def update_job(
        self, job: Job, expected_state: str, expected_lease: str | None
    ) -> bool: ...
    async def update_jobs(self, changes: list[JobChange]) -> set[str]: ...
    async def complete_jobs(
        self, completions: list[Completion], columns: dict[str, Any], tenant_id: str | None,
        now: int,
    ) -> Completions: ...  # fmt: skip
    async def get_job(
        self, job_id: str, tenant_id: str | None, lock: bool = False
    ) -> Job | None: ...
    async def lock_jobs(self, job_ids: list[str], tenant_id: str | None) -> dict[str, Job]: ...
    async def existing_job_ids(self, job_ids: list[str], tenant_id: str | None) -> set[str]: ...
    async def list_jobs(
        self, tenant_id: str | None, filters: JobFilter, limit: int, offset: int
    ) -> tuple[list[Job], int]: ...
    async def claim_jobs(self, claim: Claim, now: int, block_heads: BlockHeads) -> Claimed: ...
    async def promote_due_jobs(self, now: int, queues: list[str] | None = None) -> set[str]: ...
    async def prune_finished_jobs(self, before: int, limit: int) -> int: ...
    async def oldest_finished_at(self) -> int | None:
        """When the longest-finished job still kept (completed, cancelled or discarded)
        finished; None when there is none."""
        ...

    async def due_work(self, now: int) -> set[str]:
        """Which of the sweep's every-tick tasks have something to do at `now`, of
        promote, expire, reap, crons (due), redrives (running) and replay (a rule enabled)."""
        ...

    async def expired_jobs(self, now: int, limit: int) -> list[Job]: ...
    async def expired_leases(self, now: int, limit: int) -> list[Job]: ...
    async def count_jobs(
        self, tenant_id: str | None, queue: str | None
    ) -> dict[tuple[str, str], int]: ...
    async def count_finished_since(self, tenant_id: str | None, since: int) -> dict[str, int]: ...
    async def notify(self, queues: set[str]) -> None: ...


class QueueStore(Protocol):
    """Queues, keyed by (tenant, name): known ones and which are paused. A tenant of None reads
    every tenant's (only for a caller that spans every tenant)."""

    async def ensure_queue(self, name: str, tenant_id: str, now: int) -> None: ...
    async def set_queue_paused(
        self, name: str, tenant_id: str, paused: bool, now: int
    ) -> QueueRecord: ...
    async def list_queues(self, tenant_id: str | None) -> list[QueueRecord]: ...
    async def paused_queue_names(self, tenant_id: str | None) -> set[str]: ...


class DeadLetterStore(Protocol):
    """Dead episodes: enter them, search and count them, move them out of `dead` (the
    exactly-once guard), requeue or delete their jobs, and tally what is dead."""

    async def enter_dead_letters(
        self, dead_letters: list[DeadLetter], entries: list[IncidentEntry]
    ) -> list[Incident]:
        """Insert the episodes and add `entries` to their incidents (one statement): new
        incidents open, resolved ones regress; the incidents as they are after it."""
        ...

    async def list_dead_letters(
        self, filters: DeadLetterFilter, page: Page
    ) -> list[DeadLetter]: ...
    async def count_dead_letters(self, filters: DeadLetterFilter) -> int: ...
    async def count_dead_letters_by_queue(self, filters: DeadLetterFilter) -> dict[str, int]: ...
    async def get_dead_letter(self, job_id: str, tenant_id: str | None) -> DeadLetter | None: ...
    async def move_dead_letters(
        self, filters: DeadLetterFilter, limit: int, status: str, now: int, moved_by: str
    ) -> list[MovedEpisode]: ...
    async def dead_letter_ids(
        self, filters: DeadLetterFilter, limit: int, excluded: list[str]
    ) -> list[str]:
        """The ids of up to `limit` dead episodes matching the filter, newest first, but for
        those `excluded`."""
        ...

    async def retry_dead_letters(
        self, episode_ids: list[str], block_heads: BlockHeads, now: int, moved_by: str,
        upcast_types: list[str], task_id: str | None = None,
    ) -> Retried:  # fmt: skip
        """Move the chosen episodes still dead to `retried`, requeue their jobs in place where
        the job's row is still there and its type is not in `upcast_types` (carrying the
        redrive task `task_id`, if one moves them), and write the moved episodes'
        `dead_letter.retried` events, a block a run (domain/events.py `retried_event_ids`,
        each chosen episode's block head at its place in `block_heads`), in one statement."""
        ...

    async def dead_letters_by_id(self, episode_ids: list[str]) -> list[DeadLetter]: ...
    async def redrive_jobs(
        self, job_ids: list[str], now: int, task_id: str | None = None
    ) -> set[str]: ...
    async def delete_dead_jobs(self, job_ids: list[str]) -> None: ...
    async def dead_letter_episodes(
        self, job_id: str, tenant_id: str | None
    ) -> list[DeadLetter]: ...
    async def move_dead_letter(
        self, dead_letter: DeadLetter, status: str, now: int, moved_by: str
    ) -> bool: ...
    async def dead_letter_stats(self, tenant_id: str | None) -> DeadLetterStats: ...


class IncidentStore(Protocol):
    """Incidents: list and read them, change their state (guarded by the state it was decided
    from), and the backfill of episodes from before incidents (the dead letters entering add to
    their incidents with DeadLetterStore.enter_dead_letters)."""

    async def upsert_incidents(
        self, entries: list[IncidentEntry], regress: bool
    ) -> list[Incident]: ...
    async def list_incidents(self, query: IncidentQuery) -> list[Incident]: ...
    async def get_incident(self, incident_id: str, tenant_id: str | None) -> Incident | None: ...
    async def count_incident_arrivals(
        self, incident_ids: list[str], tenant_id: str | None, buckets: Buckets
    ) -> dict[str, dict[int, int]]:
        """The dead letters (in any status now) that arrived at each incident in the buckets'
        window, per bucket index (0 the oldest): one grouped query for them all. Incidents and
        buckets with none are absent."""
        ...

    async def change_incident_state(
        self, change: StateChange, tenant_id: str | None
    ) -> Incident | None:
        """None when the incident is no longer in `change.expected_state` (or not the tenant's)."""
        ...

    async def classify_incident(
        self, incident_id: str, classification: str, classified_by: str, tenant_id: str | None
    ) -> Incident | None: ...
    async def get_root_cause(self, incident_id: str, tenant_id: str | None) -> RootCause | None: ...
    async def save_root_cause(self, root_cause: RootCause) -> RootCause | None:
        """None when the record's revision moved on meanwhile (a concurrent edit)."""
        ...

    async def unexplained_incidents(
        self, filters: DeadLetterFilter, limit: int
    ) -> list[Unexplained]:
        """The incidents dead letters matching `filters` belong to that lack a root cause with a
        fix reference or are poison pills (at most `limit`), and one with id None when some
        matching dead letters belong to no incident."""
        ...

    async def dead_letters_by_class(self) -> dict[str, int]:
        """Dead letters held now per incident class (of every tenant the caller sees)."""
        ...

    async def unexplained_among(
        self, incident_ids: list[str], tenant_id: str | None
    ) -> list[Unexplained]: ...
    async def unfingerprinted_dead_letters(self, limit: int) -> list[DeadLetter]: ...
    async def fingerprint_dead_letters(self, dead_letters: list[DeadLetter]) -> set[str]:
        """Write the episodes' fingerprints and incidents; the ids written (the others were
        fingerprinted meanwhile)."""
        ...


class RetentionStore(Protocol):
    """Retention policies, pruning the dead-letter queue (deleting or archiving), the archives
    written, and restoring archived rows."""

    async def prune_dead_letters(
        self, scope: PruneScope, limit: int, now: int, moved_by: str
    ) -> list[dict[str, Any]]: ...
    async def delete_old_episodes(self, scope: PruneScope, limit: int) -> list[dict[str, Any]]:
        """Delete history episodes that died, and tombstones pruned, before `scope.before`."""
        ...

    async def count_prunable_dead_letters(self, scope: PruneScope, limit: int) -> int:
        """How many dead letters (at most `limit`) a count prune of the scope could remove: not
        younger than its floor, under no legal hold."""
        ...

    async def restore_dead_letter(self, row: dict[str, Any]) -> bool: ...
    async def dead_letter_policies(self, tenant_id: str) -> list[PolicyRecord]: ...
    async def save_dead_letter_policy(self, policy: PolicyRecord) -> None: ...
    async def delete_dead_letter_policy(self, tenant_id: str, queue: str) -> bool: ...
    async def add_dead_letter_archive(self, archive: ArchiveRecord) -> None: ...
    async def dead_letter_archives(self) -> list[ArchiveRecord]: ...
    async def mark_archive_restored(self, name: str, now: int) -> None: ...


class ReplayRuleStore(Protocol):
    """Automatic replay rules and how many dead letters each has replayed."""

    async def replay_rules(self, tenant_id: str | None) -> list[ReplayRule]: ...
    async def save_replay_rule(self, rule: ReplayRule) -> None: ...
    async def delete_replay_rule(self, rule_id: str) -> bool: ...
    async def count_replays(self, rule_id: str, count: int) -> None: ...


class WorkerStore(Protocol):
    """Workers as last seen, keyed by (tenant, id), and the directives waiting for them."""

    async def touch_worker(
        self, worker_id: str, tenant_id: str, queues: list[str], active_jobs: int, now: int
    ) -> WorkerRecord: ...
    async def set_worker_directive(
        self, worker_id: str, tenant_id: str | None, directive: str | None
    ) -> int: ...
    async def list_workers(self, tenant_id: str | None) -> list[WorkerRecord]: ...


class CronStore(Protocol):
    """Cron entries, keyed by (tenant, name): every lookup names its tenant."""

    async def save_cron(self, cron: CronRecord) -> None: ...
    async def list_crons(self, tenant_id: str | None) -> list[CronRecord]: ...
    async def get_cron(self, name: str, tenant_id: str | None) -> CronRecord | None: ...
    async def delete_cron(self, name: str, tenant_id: str | None) -> bool: ...
    async def due_crons(self, now: int, limit: int) -> list[CronRecord]: ...


class EventStore(Protocol):
    """The events outbox webhooks and event streams read."""

    async def add_events(
        self, events: list[StoredEvent], subjects: list[list[str | None]] | None = None
    ) -> list[Listener]:
        """Append the events, a row each; the active webhook subscriptions of their tenants come
        back in the same round trip, so that their deliveries are queued in the same
        transaction. `subjects` (None: each event's own) are, for each event, the subjects of
        the run of alike events its row keeps (`EventRun`): a run of several is a block's row,
        named by the event's id (the block's first), its members' subjects in order."""
        ...

    async def list_events(self, query: EventQuery) -> list[StoredEvent]: ...
    async def delete_events_before(self, before: int) -> int: ...


class MaintenanceStore(Protocol):
    """The lock that lets one replica at a time run a periodic task, and the test-only wipe."""

    async def try_lock(self, key: int) -> bool: ...
    async def reset(self) -> None: ...


class RedriveTaskStore(Protocol):
    """Redrive tasks (keyed by id within a tenant; `tenant_id` None: every tenant's), the dead
    letters each pinned, the queues each holds until it ends, and the redriven jobs' outcomes."""

    async def insert_redrive_task(self, task: RedriveTask) -> None: ...
    async def pin_redrive_items(
        self, task_id: str, filters: DeadLetterFilter, limit: int | None
    ) -> dict[tuple[str, str], int]:
        """Pin the dead letters matching now (not pinned by another task), the newest `limit`
        of them (None: all); how many per (tenant, queue)."""
        ...

    async def claim_redrive_queues(
        self, task_id: str, queues: list[tuple[str, str]]
    ) -> dict[str, str]:
        """Hold the task's queues ((tenant, queue) pairs, as pinned); those another unfinished
        task holds, with its id."""
        ...

    async def queue_redrive_holders(
        self, queues: list[str], tenant_id: str | None
    ) -> dict[str, str]:
        """The unfinished tasks holding these queues, by queue."""
        ...

    async def set_redrive_task_pins(
        self, task_id: str, to_move: int, queues: list[str]
    ) -> None: ...
    async def release_redrive_task(self, task_id: str) -> None:
        """Let go of its queues and of the dead letters it still pins."""
        ...

    async def get_redrive_task(self, task_id: str, tenant_id: str | None) -> RedriveTask | None: ...
    async def list_redrive_tasks(
        self, tenant_id: str | None, state: str | None, limit: int
    ) -> list[RedriveTask]: ...
    async def running_redrive_tasks(self, limit: int) -> list[RedriveTask]: ...
    async def change_redrive_task(
        self, task: RedriveTask, state: str, now: int, changed_by: str, paced_until: int
    ) -> RedriveTask | None:
        """None when the task is no longer in `task.state` (or not the tenant's)."""
        ...

    async def pending_redrive_items(
        self, task_id: str, limit: int, after: str = ""
    ) -> dict[str, str]:
        """The task's next pinned dead letters to move, by episode id after `after`: their job
        ids by episode id, in order."""
        ...

    async def claim_redrive_items(
        self, task_id: str, limit: int, after: str = ""
    ) -> dict[str, str]:
        """As pending_redrive_items, the chunk this transaction moves: retry_dead_letters (with
        the task) moves their dead letters, and fail_redrive_items fails those an upcaster
        refuses, in the same transaction (a claim undone with it leaves them pending)."""
        ...

    async def pending_redrive_dead_letters(
        self, task_id: str, job_types: list[str], after: str, limit: int
    ) -> list[DeadLetter]:
        """The dead letters of these types the task still pins, by episode id after `after`."""
        ...

    async def fail_redrive_items(self, task_id: str, failures: dict[str, RedriveFailure]) -> None:
        """Claimed dead letters (by episode id) that cannot move: `failed`, with the error."""
        ...

    async def fail_redrive_task(
        self, task: RedriveTask, failure: RedriveFailure, now: int
    ) -> RedriveTask | None:
        """The task ends `failed` with the reason; None when it left `task.state` meanwhile."""
        ...

    async def count_redrive_batch(
        self, task_id: str, moved: int, skipped: int, now: int, paced_until: int,
        failed: int = 0, through: str = "",
    ) -> RedriveTask:  # fmt: skip
        """Add a batch's counts to the task (its items were marked by the move) and its pace,
        and remember `through`, the last item the batch took (by id; '' for none): the task's
        later reads of pending items start after the last of these; the task as it is after."""
        ...

    async def mark_redriven_jobs(self, task_id: str, job_ids: list[str]) -> None: ...
    async def record_redrive_outcomes(
        self, outcomes: list[RedriveOutcome]
    ) -> tuple[list[ItemOutcome], list[RedriveTask]]:
        """Items of redriven jobs that ended, once each; the tasks as counted after it."""
        ...

    async def redrive_items(
        self, task_id: str, state: str | None, limit: int
    ) -> list[dict[str, Any]]: ...


class EventWrites(JobStore, QueueStore, EventStore, Protocol):
    """What announcing events writes: the events, and the webhook deliveries (jobs on the
    reserved queue) they start."""


class AttemptWrites(
    JobStore, QueueStore, DeadLetterStore, IncidentStore, RedriveTaskStore, EventStore, Protocol
):
    """What ending attempts writes: the jobs, the dead letters of those that died (and their
    incidents), the redrive tasks that redrove them, the events."""


class DeadLetterMoves(JobStore, QueueStore, DeadLetterStore, EventStore, Protocol):
    """What moving episodes out of the dead-letter queue writes: the episode, its job (requeued
    or deleted) and the job's queue, and the events."""


class CronFiring(CronStore, JobStore, QueueStore, EventStore, Protocol):
    """What firing due crons writes: the cron's run, the job it enqueues and its queue, events."""


class KeyStore(Protocol):
    """API keys, by id; lists and revocation limited to a tenant unless `tenant_id` is None."""

    async def insert_key(self, key: ApiKey, key_hash: str) -> bool:
        """False when the tenant already has a live key of this name."""
        ...

    async def key_by_id(self, key_id: str) -> StoredKey | None: ...
    async def list_keys(self, tenant_id: str | None, include_revoked: bool) -> list[ApiKey]: ...
    async def revoke_key(self, key_id: str, tenant_id: str | None, now: int) -> ApiKey | None: ...
    async def count_live_keys(self, now: int) -> int: ...


class AuditStore(Protocol):
    """The audit log: append to a tenant's chain (taking its head first, which holds back other
    appends to that chain until commit), list records, and read chains back to verify them."""

    async def lock_audit_head(self, tenant_id: str) -> ChainHead: ...
    async def append_audit_record(self, record: AuditRecord) -> None: ...
    async def list_audit_records(self, query: AuditQuery) -> list[AuditRecord]: ...
    async def audit_chain(self, tenant_id: str, after_seq: int, limit: int) -> list[AuditRecord]:
        """A tenant's records after `after_seq`, in seq order."""
        ...

    async def audit_heads(self, tenant_id: str | None) -> list[ChainHead]: ...
    async def audit_tenants(self, tenant_id: str | None) -> list[str]:
        """The tenants that have records (a head may be missing where records are not)."""
        ...


class SessionStore(Protocol):
    """Dashboard sessions, by the hash of their token."""

    async def insert_session(self, session: DashboardSession, token_hash: str) -> None: ...
    async def session_by_token(self, token_hash: str) -> StoredSession | None: ...
    async def delete_session(self, token_hash: str) -> None: ...
    async def delete_ended_sessions(self, now: int) -> int:
        """Remove sessions that expired or whose key was revoked or expired; how many."""
        ...


class WebhookStore(Protocol):
    """Webhook subscriptions, keyed by id within a tenant (`tenant_id` None: every tenant's), and
    the delivery log."""

    async def insert_subscription(self, stored: StoredSubscription) -> None: ...
    async def update_subscription(self, stored: StoredSubscription) -> bool: ...
    async def get_subscription(
        self, subscription_id: str, tenant_id: str | None
    ) -> StoredSubscription | None: ...
    async def list_subscriptions(self, tenant_id: str | None) -> list[Subscription]: ...
    async def any_active_subscription(self) -> bool:
        """Whether any tenant visible to the caller has an active subscription."""
        ...

    async def delete_subscription(self, subscription_id: str, tenant_id: str | None) -> bool:
        """Delete it and its delivery log; False when there is no such subscription."""
        ...

    async def add_delivery_record(self, record: DeliveryRecord) -> None: ...
    async def list_delivery_records(self, query: DeliveryQuery) -> list[DeliveryRecord]: ...
    async def delete_delivery_records_before(self, before: int, limit: int) -> int: ...


class LegalHoldStore(Protocol):
    """Legal holds, keyed by id within a tenant (`tenant_id` None: every tenant's), and how many
    dead letters matching a filter they keep (the prune, purge and delete statements skip held
    dead letters themselves)."""

    async def insert_legal_hold(self, hold: LegalHold) -> None: ...
    async def list_legal_holds(
        self, tenant_id: str | None, include_released: bool, limit: int
    ) -> list[LegalHold]: ...
    async def get_legal_hold(self, hold_id: str, tenant_id: str | None) -> LegalHold | None: ...
    async def release_legal_hold(
        self, hold_id: str, tenant_id: str | None, now: int, released_by: str
    ) -> LegalHold | None:
        """The hold as released; None when there is no such active hold."""
        ...

    async def count_held_dead_letters(self, filters: DeadLetterFilter) -> int: ...


class SchemaStore(Protocol):
    """Job schemas, by tenant, job type and version."""

    async def save_job_schema(self, schema: JobSchema) -> None: ...
    async def job_schema(self, tenant_id: str, job_type: str, version: int) -> JobSchema | None: ...


class AlertStore(Protocol):
    """Alerts, and what their evaluation counts: dead letters that arrived lately (per queue),
    those of chosen queues in a span (the spike baseline), dead letters dead now per job type
    (from the tallies) and per aggregate key. A tenant of None: every tenant's."""

    async def dead_letter_arrivals(self, quiet_start: int, window_start: int) -> list[Arrivals]: ...
    async def queue_arrivals_between(
        self, queues: list[tuple[str, str]], start: int, end: int
    ) -> dict[tuple[str, str], int]: ...
    async def dead_type_counts(self, above: int) -> list[GroupCount]: ...
    async def aggregate_counts(self, since: int, at_least: int) -> list[GroupCount]:
        """Dead letters dead now per aggregate key, for the keys of those that arrived since
        `since` and of open aggregate alerts, where at least `at_least` share one."""
        ...

    async def open_alerts(self) -> list[Alert]: ...
    async def insert_alert(self, alert: Alert) -> bool:
        """False when an open alert of the same (tenant, rule, queue, key) exists already."""
        ...

    async def update_alert(
        self, alert: Alert, expected_state: str, tenant_id: str | None
    ) -> Alert | None:
        """None when the alert is no longer in `expected_state` (or not the tenant's)."""
        ...

    async def list_alerts(self, query: AlertQuery) -> list[Alert]: ...
    async def get_alert(self, alert_id: str, tenant_id: str | None) -> Alert | None: ...
    async def count_open_alerts(self, tenant_id: str | None) -> dict[tuple[str, str, str], int]:
        """Open alerts per (rule, severity, state)."""
        ...


class AlertWrites(AlertStore, EventWrites, Protocol):
    """What evaluating the alert rules reads and writes: the counts, the alerts, the events
    (and webhook deliveries) announcing them."""


class Transaction(
    JobStore,
    QueueStore,
    DeadLetterStore,
    IncidentStore,
    RetentionStore,
    ReplayRuleStore,
    WorkerStore,
    CronStore,
    EventStore,
    MaintenanceStore,
    KeyStore,
    AuditStore,
    SessionStore,
    WebhookStore,
    RedriveTaskStore,
    LegalHoldStore,
    SchemaStore,
    AlertStore,
    Protocol,
):
    """One unit of work over every concern above: everything done through it commits together
    or not at all. Use-cases open one; helpers that need less take the narrower ports."""

    def savepoint(self) -> AbstractAsyncContextManager[None]:
        """A part of the transaction an exception undoes alone (the exception goes on)."""
        ...


class Archive(Protocol):
    """Cold storage for pruned dead letters."""

    async def write(self, name: str, rows: list[dict[str, Any]]) -> str: ...
    async def read(self, name: str) -> list[dict[str, Any]]: ...


class Store(Protocol):
    """A database holding redrive's tables."""

    backend: str

    # How many write transactions are worth running at once: bulk operations spread their
    # chunks over this many (1 where writers queue up anyway).
    write_lanes: int

    def transaction(
        self, caller: Caller, one_statement: bool = False
    ) -> AbstractAsyncContextManager[Transaction]:
        """One transaction acting for the caller: on PostgreSQL, row-level security limits it
        to the caller's tenant (every tenant for a caller that spans them). With
        `one_statement` the unit runs exactly one statement, one made to run alone (given
        `alone=True`, see `JobStore.enqueue_jobs`): on PostgreSQL it commits by itself in one
        round trip (no BEGIN, no COMMIT); a second statement is an error."""
        ...

    def open_lanes(self, statement: str | None = None) -> None:
        """Start making the connections `write_lanes` transactions side by side need beside the
        caller's, in the background (a bulk operation calls it as it reads what its lanes will
        move), each readied to run the named `statement` (the store's method of that name) it
        will run first; nothing where there is one lane."""
        ...

    async def migrate(self) -> list[str]: ...
    async def ping(self) -> bool: ...
    async def wait_for_work(self, queues: list[str], timeout: float) -> bool: ...
    async def wait_for_local_work(self, queues: list[str], timeout: float) -> bool:
        """`wait_for_work` woken only by this process's own commits: on PostgreSQL without a
        LISTEN connection (see `PostgresStore.local_wakeups`)."""
        ...

    async def close(self) -> None: ...
