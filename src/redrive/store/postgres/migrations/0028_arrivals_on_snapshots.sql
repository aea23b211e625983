-- redrive schema 28 (PostgreSQL): the indexes over every dead letter whatever its status (the
-- arrivals alerts, incident trends and aggregate candidates count, and a job's episodes) move
-- from dead_letters to dead_letter_snapshots, which is written once when the dead letter enters
-- and deleted with it. A move out of `dead` changes the status, which the partial indexes read,
-- so it is a non-HOT update that adds an entry to every index of dead_letters whose predicate
-- the new row meets: six before, two now (the key, history). Retrying 1,000 dead letters took
-- 37.4 ms of backend CPU with the arrival indexes here, 29.5 without, 27.0 without by-job too
-- (a fixture of 20,000 made by the fail path, after a checkpoint). The columns these indexes
-- read are copied (they never change, but for incident_id, which the fingerprint backfill sets
-- on both rows).
ALTER TABLE dead_letter_snapshots
    ADD COLUMN job_id TEXT NOT NULL DEFAULT '',
    ADD COLUMN queue TEXT NOT NULL DEFAULT '',
    ADD COLUMN discarded_at BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN incident_id TEXT,
    ADD COLUMN aggregate_key TEXT;
ALTER TABLE dead_letter_snapshots ALTER COLUMN job_id DROP DEFAULT,
    ALTER COLUMN queue DROP DEFAULT,
    ALTER COLUMN discarded_at DROP DEFAULT;

UPDATE dead_letter_snapshots AS snapshot
SET job_id = dead.job_id, queue = dead.queue, discarded_at = dead.discarded_at, incident_id = dead.incident_id,
    aggregate_key = dead.aggregate_key
FROM dead_letters AS dead WHERE dead.id = snapshot.id;

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

-- Events are only ever inserted; once VACUUM records each full page's leftover bytes (a few
-- hundred) in the free space map, a new event fits in one of them, so a burst of events (a
-- retry's `dead_letter.retried`, one a job) landed one or two a page across thousands of old
-- pages, each a full-page image after a checkpoint: retrying 20,000 wrote 408 bytes of them a
-- job and touched 1,711 pages. Keeping a tenth of each page free makes those leftovers too
-- small for an insert, which then goes to the table's end (2 bytes a job, 838 pages).
ALTER TABLE events SET (fillfactor = 90);
