-- redrive schema 25 (PostgreSQL): each dead letter's job snapshot in a table of its own. A move
-- out of `dead` (retry, replay, purge) flips the status, which every partial index reads, so it
-- is a non-HOT UPDATE that writes a whole new row version: with the snapshot (about 1.2 KB of a
-- 1.45 KB row) inline, that copy dominated the WAL of a bulk retry. Here the snapshot is written
-- once, when the dead letter enters, and read by id; the row a move rewrites is about 300 bytes.
-- Existing rows keep their bytes on disk until rewritten (DROP COLUMN does not rewrite the table).
CREATE TABLE dead_letter_snapshots (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    job JSONB NOT NULL
);

INSERT INTO dead_letter_snapshots (id, tenant_id, job) SELECT id, tenant_id, job FROM dead_letters;
ALTER TABLE dead_letters DROP COLUMN job;

-- Tenant data: row-level security as 0007 sets it for the others.
ALTER TABLE dead_letter_snapshots ENABLE ROW LEVEL SECURITY;
ALTER TABLE dead_letter_snapshots FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON dead_letter_snapshots
    USING (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
           ELSE tenant_id = current_setting('redrive.tenant_id', true) END)
    WITH CHECK (CASE WHEN current_setting('redrive.tenant_id', true) = '*' THEN true
                ELSE tenant_id = current_setting('redrive.tenant_id', true) END);
