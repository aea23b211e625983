-- redrive schema 14 (SQLite): dead-letter alerts (domain/alerts.py). One row per alert:
-- the rule, the queue and key it is about, its severity, state (firing, acknowledged, resolved),
-- when it first and last fired, what it counted and its message. At most one open (firing or
-- acknowledged) alert per (tenant, rule, queue, key): the partial unique index says so.
CREATE TABLE alerts (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    rule TEXT NOT NULL,
    severity TEXT NOT NULL,
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL,
    message TEXT NOT NULL,
    count INTEGER NOT NULL,
    first_fired_at INTEGER NOT NULL,
    last_fired_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    acknowledged_at INTEGER,
    acknowledged_by TEXT,
    resolved_at INTEGER
);
CREATE UNIQUE INDEX alerts_open ON alerts (tenant_id, rule, queue, key) WHERE state <> 'resolved';
CREATE INDEX alerts_recent ON alerts (tenant_id, first_fired_at DESC, id DESC);

-- What evaluation counts without reading rows: the dead letters that arrived lately, per queue
-- (a covering range scan of the last minutes), and, for a queue whose window could be a spike,
-- those of the day before (a covering range scan of that queue's day).
CREATE INDEX dead_letters_arrivals ON dead_letters (discarded_at, tenant_id, queue);
CREATE INDEX dead_letters_queue_arrivals ON dead_letters (tenant_id, queue, discarded_at);
-- The value at the aggregate key path (meta.aggregate_id by default) as each dead letter enters,
-- and the dead ones per (tenant, queue, value): the aggregate rule counts a few values by it.
ALTER TABLE dead_letters ADD COLUMN aggregate_key TEXT;
CREATE INDEX dead_letters_by_aggregate_key ON dead_letters (tenant_id, queue, aggregate_key)
    WHERE status = 'dead' AND aggregate_key IS NOT NULL;
