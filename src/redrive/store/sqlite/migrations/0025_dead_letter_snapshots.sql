-- redrive schema 25 (SQLite): each dead letter's job snapshot in a table of its own, written once
-- when the dead letter enters and read by id, so a move out of `dead` (retry, replay, purge)
-- rewrites a row of about 300 bytes instead of one carrying the snapshot (about 1.2 KB). A
-- snapshot goes with its dead letter (the foreign key; PostgreSQL's statements delete both in
-- one statement, which SQLite's, one statement a call, cannot).
CREATE TABLE dead_letter_snapshots (
    id TEXT PRIMARY KEY REFERENCES dead_letters (id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    job TEXT NOT NULL
);

INSERT INTO dead_letter_snapshots (id, tenant_id, job) SELECT id, tenant_id, job FROM dead_letters;
ALTER TABLE dead_letters DROP COLUMN job;
