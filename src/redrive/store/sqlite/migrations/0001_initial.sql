-- redrive schema 1 (SQLite): jobs, dead letters, queues, workers, crons, events.
CREATE TABLE jobs (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    envelope TEXT NOT NULL,
    timeout_ms INTEGER,
    visibility_timeout_ms INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    enqueued_at INTEGER,
    scheduled_at INTEGER,
    expires_at INTEGER,
    started_at INTEGER,
    completed_at INTEGER,
    cancelled_at INTEGER,
    discarded_at INTEGER,
    expired_at INTEGER,
    next_attempt_at INTEGER,
    retry_delay_ms INTEGER,
    run_at INTEGER,
    worker_id TEXT,
    lease_token TEXT,
    lease_expires_at INTEGER,
    timeout_at INTEGER,
    error TEXT,
    errors TEXT NOT NULL DEFAULT '[]',
    result TEXT,
    dead_lettered INTEGER NOT NULL DEFAULT 0
);
-- A plain (queue, state, ...) index: SQLite ignored a partial one on the claim path after ANALYZE.
CREATE INDEX jobs_claim ON jobs (queue, state, priority DESC, sequence);
CREATE INDEX jobs_due ON jobs (state, run_at);
CREATE INDEX jobs_lease ON jobs (state, lease_expires_at);
CREATE INDEX jobs_timeout ON jobs (state, timeout_at);
CREATE INDEX jobs_expiry ON jobs (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX jobs_tenant ON jobs (tenant_id, queue, state);

CREATE TABLE dead_letters (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    type TEXT NOT NULL,
    error_type TEXT,
    reason TEXT NOT NULL,
    discarded_at INTEGER NOT NULL,
    status TEXT NOT NULL,
    job TEXT NOT NULL,
    moved_at INTEGER,
    moved_by TEXT
);
CREATE UNIQUE INDEX dead_letters_one_dead_per_job ON dead_letters (job_id) WHERE status = 'dead';
CREATE INDEX dead_letters_by_time ON dead_letters (tenant_id, status, discarded_at DESC, id);
CREATE INDEX dead_letters_by_queue ON dead_letters (tenant_id, status, queue, discarded_at DESC);
CREATE INDEX dead_letters_by_type ON dead_letters (tenant_id, status, type, discarded_at DESC);
CREATE INDEX dead_letters_by_error ON dead_letters (tenant_id, status, error_type, discarded_at DESC);
CREATE INDEX dead_letters_by_job ON dead_letters (job_id);

CREATE TABLE queues (
    name TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    paused_at INTEGER,
    resumed_at INTEGER
);

CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    state TEXT NOT NULL,
    directive TEXT,
    queues TEXT NOT NULL DEFAULT '[]',
    active_jobs INTEGER NOT NULL DEFAULT 0,
    first_seen_at INTEGER NOT NULL,
    last_heartbeat_at INTEGER NOT NULL
);

CREATE TABLE crons (
    name TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    definition TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    next_run_at INTEGER,
    last_run_at INTEGER,
    last_job_id TEXT,
    run_count INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);

CREATE TABLE events (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    type TEXT NOT NULL,
    queue TEXT,
    job_type TEXT,
    subject TEXT,
    time INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX events_by_time ON events (time);
