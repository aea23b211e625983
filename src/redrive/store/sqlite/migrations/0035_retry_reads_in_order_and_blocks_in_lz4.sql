-- redrive schema 35 (SQLite): as on PostgreSQL, dead_letters_by_tenant ends with the id, the
-- order a page of dead letters is read in (newest first, then by id), as dead_letters_by_time.
-- (PostgreSQL's 0035 also compresses events' `members` with lz4; SQLite never compresses.)
DROP INDEX dead_letters_by_tenant;
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, discarded_at DESC, id DESC) WHERE status = 'dead';
