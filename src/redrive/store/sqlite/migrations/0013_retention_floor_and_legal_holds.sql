-- redrive schema 13 (SQLite): the retention floor and legal holds (seed 003 §7.2).
-- A policy's min_age_ms is the floor: no dead letter younger than it is deleted by pruning.
-- Stored policies take the default floor, 90 days.
ALTER TABLE dead_letter_policies ADD COLUMN min_age_ms INTEGER NOT NULL DEFAULT 7776000000;

-- A legal hold keeps dead letters from being pruned, purged or deleted until it is released. Its
-- scope names what it holds: one job's dead letters (job_id), an incident's (incident_id), or
-- every dead letter matching a filter of exact queue, type and error type (NULL is any; at least
-- one is set). Prune, purge and delete test `NOT EXISTS` against the active holds (fragment
-- `not_held`), so a dead letter entering a held incident or matching a held filter is held too.
CREATE TABLE legal_holds (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    job_id TEXT,
    incident_id TEXT,
    queue TEXT,
    type TEXT,
    error_type TEXT,
    reason TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    released_at INTEGER,
    released_by TEXT
);
CREATE INDEX legal_holds_active ON legal_holds (tenant_id, created_at) WHERE released_at IS NULL;
