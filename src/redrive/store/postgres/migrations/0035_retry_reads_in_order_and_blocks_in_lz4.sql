-- redrive schema 35 (PostgreSQL): two costs of a bulk retry.
-- dead_letters_by_tenant holds the live dead letters of a tenant in the order every search, pick
-- and pin reads them (newest first, then by id), as the other search indexes do. Planned
-- without statistics, a retry's read of the ids it moves and a redrive task's pin reach the dead
-- letters through this index, which lacked the id: they read every match and sorted it (20,000
-- ids by type: 29 -> 15 ms of execution, medians of 6 interleaved runs).
DROP INDEX dead_letters_by_tenant;
CREATE INDEX dead_letters_by_tenant ON dead_letters (tenant_id, discarded_at DESC, id DESC) WHERE status = 'dead';
-- An events row's `members` (a block's ids: up to 4,096 job ids and as many episode ids, some
-- 300 kB of JSON) is compressed with lz4 where the server has it, not pglz: the insert of a
-- retry chunk's two blocks of 5,000 took 22.7 -> 15.5 ms (medians of 5 interleaved runs), for
-- as many WAL bytes. Rows written before keep pglz (each is read as it was written).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) THEN
        ALTER TABLE events ALTER COLUMN members SET COMPRESSION lz4;
    END IF;
END
$$;
