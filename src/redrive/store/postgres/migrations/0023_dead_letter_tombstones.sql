-- redrive schema 23 (PostgreSQL): tombstones in a table of their own. Pruning used to turn each
-- dead letter it removed into a tombstone in place: a non-HOT UPDATE of the wide dead_letters row
-- (status is in the predicate of every partial index) that wrote a new row version and an entry
-- in six indexes. Now the dead letter is DELETEd (no index entries) and its tombstone (status
-- pruned or archived, who and when, the job without args, meta, errors and result) INSERTed
-- here, beside three indexes: about half the WAL and CPU of a prune.
-- The indexes: the id (an archive restore replaces its tombstone), the job (a job's episodes),
-- and status then time (`dlq ls --status pruned|archived`, and arrivals: tombstones count as
-- dead letters that arrived, read by status and time range).
CREATE TABLE dead_letter_tombstones (
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
    moved_at BIGINT NOT NULL,
    moved_by TEXT NOT NULL,
    args TEXT NOT NULL DEFAULT '[]',
    replay_count INTEGER NOT NULL,
    fingerprint TEXT,
    fingerprint_version INTEGER,
    incident_id TEXT,
    aggregate_key TEXT
);
CREATE INDEX dead_letter_tombstones_by_job ON dead_letter_tombstones (job_id);
CREATE INDEX dead_letter_tombstones_by_time
    ON dead_letter_tombstones (status, discarded_at DESC, id DESC);

INSERT INTO dead_letter_tombstones (
    id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, job, moved_at,
    moved_by, replay_count, fingerprint, fingerprint_version, incident_id, aggregate_key
)
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, job,
       COALESCE(moved_at, discarded_at), COALESCE(moved_by, 'system'), replay_count, fingerprint,
       fingerprint_version, incident_id, aggregate_key
FROM dead_letters WHERE status IN ('pruned', 'archived');
DELETE FROM dead_letters WHERE status IN ('pruned', 'archived');

-- Tenant data: row-level security as 0007 sets it for the others.
ALTER TABLE dead_letter_tombstones ENABLE ROW LEVEL SECURITY;
ALTER TABLE dead_letter_tombstones FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON dead_letter_tombstones
    USING (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
           ELSE tenant_id = current_setting('redrive.tenant_id', true) END)
    WITH CHECK (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
                ELSE tenant_id = current_setting('redrive.tenant_id', true) END);
