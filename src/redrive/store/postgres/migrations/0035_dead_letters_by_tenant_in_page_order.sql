-- redrive schema 35 (PostgreSQL): dead_letters_by_tenant holds the live dead letters of a tenant
-- in the order every search, pick and pin reads them (newest first, then by id), as the other
-- search indexes do. Planned without statistics, a retry's read of the ids it moves and a redrive
-- task's pin reach the dead letters through this index, which lacked the id: they read every
-- match and sorted it (20,000 ids by type: 29 -> 15 ms of execution, 6 interleaved runs).
DROP INDEX dead_letters_by_tenant;
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, discarded_at DESC, id DESC) WHERE status = 'dead';
