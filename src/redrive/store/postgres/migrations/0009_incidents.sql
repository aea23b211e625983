-- redrive schema 9 (PostgreSQL): incidents. Each dead letter carries the fingerprint of its final
-- error, the version of the algorithm that made it and the incident it belongs to. An incident
-- groups a tenant's dead letters of one job type and one fingerprint, with its counts (dead now,
-- every episode ever), when it was first and last seen, the queues affected, a sample, the
-- normalised message, and its state. Entering the dead-letter queue upserts the incident in the
-- same transaction, and moving a dead letter out of `dead` takes it off the count.
ALTER TABLE dead_letters ADD COLUMN fingerprint TEXT;
ALTER TABLE dead_letters ADD COLUMN fingerprint_version INTEGER;
ALTER TABLE dead_letters ADD COLUMN incident_id TEXT;
-- An incident's dead letters, newest first (the incident page, `incident=` in the filter).
CREATE INDEX dead_letters_by_incident ON dead_letters (status, incident_id, discarded_at DESC, id DESC);
-- Episodes from before this migration, until `redrive migrate` (or the sweeper, a batch at a
-- time) fingerprints them: empty afterwards, and no new episode ever enters it.
CREATE INDEX dead_letters_unfingerprinted ON dead_letters (id) WHERE fingerprint IS NULL;

-- The id is derived from (tenant_id, type, fingerprint) (domain/fingerprint.py incident_id), so
-- the primary key is the incident's key.
CREATE TABLE incidents (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    type TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    fingerprint_version INTEGER NOT NULL,
    error_type TEXT,
    message TEXT NOT NULL,
    state TEXT NOT NULL,
    dead_count BIGINT NOT NULL,
    total_count BIGINT NOT NULL,
    first_seen_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    queues JSONB NOT NULL,
    sample_dead_letter_id TEXT,
    state_changed_at BIGINT NOT NULL,
    state_changed_by TEXT NOT NULL,
    fix_reference TEXT
);
-- The two orders incidents are listed in: the most recent, and the most dead now.
CREATE INDEX incidents_recent ON incidents (tenant_id, last_seen_at DESC, id DESC);
CREATE INDEX incidents_by_count ON incidents (tenant_id, dead_count DESC, id DESC);

-- Row-level security like every tenant table (see 0007_row_level_security.sql); the grants come
-- from access.sql, which `redrive migrate` applies after the migrations.
ALTER TABLE incidents ENABLE ROW LEVEL SECURITY;
ALTER TABLE incidents FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON incidents
    USING (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
                ELSE tenant_id = current_setting('redrive.tenant_id', true) END)
    WITH CHECK (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
                     ELSE tenant_id = current_setting('redrive.tenant_id', true) END);
