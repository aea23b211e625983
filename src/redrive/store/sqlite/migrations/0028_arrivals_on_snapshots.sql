-- redrive schema 28 (SQLite): the indexes over every dead letter whatever its status (the
-- arrivals alerts, incident trends and aggregate candidates count, and a job's episodes) move
-- from dead_letters to dead_letter_snapshots, written once when the dead letter enters and deleted
-- with it, as on PostgreSQL, where a move out of `dead` adds an entry to each of them (SQLite
-- rewrites only the indexes whose columns change, so here it is for one schema). The columns
-- these indexes read are copied (they never change, but for incident_id, which the fingerprint
-- backfill sets on both rows).
ALTER TABLE dead_letter_snapshots ADD COLUMN job_id TEXT NOT NULL DEFAULT '';
ALTER TABLE dead_letter_snapshots ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE dead_letter_snapshots ADD COLUMN discarded_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dead_letter_snapshots ADD COLUMN incident_id TEXT;
ALTER TABLE dead_letter_snapshots ADD COLUMN aggregate_key TEXT;

UPDATE dead_letter_snapshots
SET (job_id, queue, discarded_at, incident_id, aggregate_key) = (
    SELECT dead.job_id, dead.queue, dead.discarded_at, dead.incident_id, dead.aggregate_key
    FROM dead_letters AS dead WHERE dead.id = dead_letter_snapshots.id
)
WHERE id IN (SELECT id FROM dead_letters);

DROP INDEX dead_letters_arrivals;
DROP INDEX dead_letters_queue_arrivals;
DROP INDEX dead_letters_incident_arrivals;
DROP INDEX dead_letters_by_job;
CREATE INDEX dead_letter_snapshots_by_job ON dead_letter_snapshots (job_id);
CREATE INDEX dead_letter_snapshots_arrivals
    ON dead_letter_snapshots (discarded_at, tenant_id, queue);
CREATE INDEX dead_letter_snapshots_queue_arrivals
    ON dead_letter_snapshots (tenant_id, queue, discarded_at);
CREATE INDEX dead_letter_snapshots_incident_arrivals
    ON dead_letter_snapshots (incident_id, discarded_at, tenant_id);
