"""The one transaction both dialects share: every concern's part, over one executor.

Each part implements one port of `redrive.ports` over the dialect's named statements:

- `store/base.py`: the executor, wake-ups on commit, dead-letter tally changes (`SqlBase`)
- `store/jobs.py`: the live jobs (`JobStore`)
- `store/dead_letters.py`: dead episodes, their jobs and tallies (`DeadLetterStore`)
- `store/incidents.py`: incidents and the backfill of older episodes (`IncidentStore`)
- `store/retention.py`: retention policies, pruning, archives (`RetentionStore`) and replay rules
  (`ReplayRuleStore`)
- `store/administration.py`: queues, workers, crons (`QueueStore`, `WorkerStore`, `CronStore`),
  periodic-task locks and the test-only wipe (`MaintenanceStore`)
- `store/events.py`: the events outbox (`EventStore`)
- `store/audit.py`: the audit log and its chain heads (`AuditStore`)
- `store/keys.py`: API keys (`KeyStore`) and dashboard sessions (`SessionStore`)
- `store/webhooks.py`: webhook subscriptions and the delivery log (`WebhookStore`)
- `store/redrives.py`: redrive tasks, their pinned dead letters and queues (`RedriveTaskStore`)
- `store/legal_holds.py`: legal holds (`LegalHoldStore`)
- `store/schemas.py`: job schemas (`SchemaStore`)
- `store/alerts.py`: alerts and the counts their evaluation reads (`AlertStore`)
"""

from __future__ import annotations

from redrive.ports import Transaction
from redrive.store.administration import SqlCrons, SqlMaintenance, SqlQueues, SqlWorkers
from redrive.store.alerts import SqlAlerts
from redrive.store.audit import SqlAudit
from redrive.store.base import Executor, SqlBase
from redrive.store.dead_letters import SqlDeadLetters
from redrive.store.events import SqlEvents
from redrive.store.incidents import SqlIncidents
from redrive.store.jobs import SqlJobs
from redrive.store.keys import SqlKeys, SqlSessions
from redrive.store.legal_holds import SqlLegalHolds
from redrive.store.redrives import SqlRedriveTasks
from redrive.store.retention import SqlReplayRules, SqlRetention
from redrive.store.schemas import SqlSchemas
from redrive.store.webhooks import SqlWebhooks


class SqlTransaction(
    SqlJobs,
    SqlQueues,
    SqlDeadLetters,
    SqlIncidents,
    SqlRetention,
    SqlReplayRules,
    SqlWorkers,
    SqlCrons,
    SqlEvents,
    SqlMaintenance,
    SqlKeys,
    SqlAudit,
    SqlSessions,
    SqlWebhooks,
    SqlRedriveTasks,
    SqlLegalHolds,
    SqlSchemas,
    SqlAlerts,
    SqlBase,
    Transaction,
):
    """One unit of work over every table; the store opens it, calls finish() and commits."""


__all__ = ["Executor", "SqlTransaction"]
