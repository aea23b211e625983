-- redrive schema 3 (SQLite): crons are keyed by (tenant_id, name) and workers by (tenant_id, id),
-- so two tenants may register a cron of the same name or run a worker of the same id.
-- SQLite cannot change a primary key in place: each table is rebuilt under a new name, its rows
-- copied, the old table dropped and the new one renamed (its key index follows the rename).
CREATE TABLE crons_by_tenant (
    name TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    definition TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    next_run_at INTEGER,
    last_run_at INTEGER,
    last_job_id TEXT,
    run_count INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
INSERT INTO crons_by_tenant (
    name, tenant_id, definition, enabled, next_run_at, last_run_at, last_job_id, run_count,
    created_at
)
SELECT name, tenant_id, definition, enabled, next_run_at, last_run_at, last_job_id, run_count,
       created_at
FROM crons;
DROP TABLE crons;
ALTER TABLE crons_by_tenant RENAME TO crons;

CREATE TABLE workers_by_tenant (
    id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    state TEXT NOT NULL,
    directive TEXT,
    queues TEXT NOT NULL DEFAULT '[]',
    active_jobs INTEGER NOT NULL DEFAULT 0,
    first_seen_at INTEGER NOT NULL,
    last_heartbeat_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
INSERT INTO workers_by_tenant (
    id, tenant_id, state, directive, queues, active_jobs, first_seen_at, last_heartbeat_at
)
SELECT id, tenant_id, state, directive, queues, active_jobs, first_seen_at, last_heartbeat_at
FROM workers;
DROP TABLE workers;
ALTER TABLE workers_by_tenant RENAME TO workers;
