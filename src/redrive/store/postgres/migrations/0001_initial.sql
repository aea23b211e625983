-- redrive schema 1 (PostgreSQL): jobs, dead letters, queues, workers, crons, events.
CREATE TABLE jobs (
    sequence BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    envelope JSONB NOT NULL,
    timeout_ms BIGINT,
    visibility_timeout_ms BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    enqueued_at BIGINT,
    scheduled_at BIGINT,
    expires_at BIGINT,
    started_at BIGINT,
    completed_at BIGINT,
    cancelled_at BIGINT,
    discarded_at BIGINT,
    expired_at BIGINT,
    next_attempt_at BIGINT,
    retry_delay_ms BIGINT,
    run_at BIGINT,
    worker_id TEXT,
    lease_token TEXT,
    lease_expires_at BIGINT,
    timeout_at BIGINT,
    error JSONB,
    errors JSONB NOT NULL DEFAULT '[]',
    result JSONB,
    dead_lettered BOOLEAN NOT NULL DEFAULT FALSE
);
-- Partial on the claimable state so the claim never re-reads finished rows.
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, sequence) WHERE state = 'available';
CREATE INDEX jobs_due ON jobs (run_at) WHERE state IN ('scheduled', 'retryable');
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'active';
CREATE INDEX jobs_timeout ON jobs (timeout_at) WHERE state = 'active';
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
    discarded_at BIGINT NOT NULL,
    status TEXT NOT NULL,
    job JSONB NOT NULL,
    moved_at BIGINT,
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
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    paused_at BIGINT,
    resumed_at BIGINT
);

CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    state TEXT NOT NULL,
    directive TEXT,
    queues JSONB NOT NULL DEFAULT '[]',
    active_jobs INTEGER NOT NULL DEFAULT 0,
    first_seen_at BIGINT NOT NULL,
    last_heartbeat_at BIGINT NOT NULL
);

CREATE TABLE crons (
    name TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    definition JSONB NOT NULL,
    enabled BOOLEAN NOT NULL,
    next_run_at BIGINT,
    last_run_at BIGINT,
    last_job_id TEXT,
    run_count INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);

CREATE TABLE events (
    sequence BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    type TEXT NOT NULL,
    queue TEXT,
    job_type TEXT,
    subject TEXT,
    time BIGINT NOT NULL,
    data JSONB NOT NULL
);
CREATE INDEX events_by_time ON events (time);
