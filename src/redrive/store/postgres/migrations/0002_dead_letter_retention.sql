-- redrive schema 2 (PostgreSQL): dead-letter search on args, replay counts, tallies for fast stats,
-- retention policies, replay rules and archives.
ALTER TABLE dead_letters ADD COLUMN args TEXT NOT NULL DEFAULT '[]';
ALTER TABLE dead_letters ADD COLUMN replay_count INTEGER NOT NULL DEFAULT 0;
DROP INDEX dead_letters_by_time;
DROP INDEX dead_letters_by_queue;
DROP INDEX dead_letters_by_type;
DROP INDEX dead_letters_by_error;
CREATE INDEX dead_letters_by_time ON dead_letters (status, discarded_at DESC, id DESC);
CREATE INDEX dead_letters_by_queue ON dead_letters (status, queue, discarded_at DESC, id DESC);
CREATE INDEX dead_letters_by_type ON dead_letters (status, type, discarded_at DESC, id DESC);
CREATE INDEX dead_letters_by_error ON dead_letters (status, error_type, discarded_at DESC, id DESC);
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, status, discarded_at DESC);

-- Live counts of dead episodes, kept in step in the same transactions that move them.
CREATE TABLE dead_letter_tallies (
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    type TEXT NOT NULL,
    error_type TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, queue, type, error_type)
);
INSERT INTO dead_letter_tallies (tenant_id, queue, type, error_type, count)
SELECT tenant_id, queue, type, COALESCE(error_type, ''), COUNT(*) FROM dead_letters
WHERE status = 'dead' GROUP BY tenant_id, queue, type, COALESCE(error_type, '');

-- queue '*' holds the global policy.
CREATE TABLE dead_letter_policies (
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    max_age_ms BIGINT NOT NULL,
    max_count BIGINT NOT NULL,
    pruning_policy TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (tenant_id, queue)
);

CREATE TABLE replay_rules (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    filter JSONB NOT NULL,
    delay_ms BIGINT NOT NULL,
    max_replays INTEGER NOT NULL,
    enabled BOOLEAN NOT NULL,
    replayed_total BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX replay_rules_name ON replay_rules (tenant_id, name);

CREATE TABLE dead_letter_archives (
    name TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    path TEXT NOT NULL,
    entries INTEGER NOT NULL,
    created_at BIGINT NOT NULL,
    restored_at BIGINT
);
