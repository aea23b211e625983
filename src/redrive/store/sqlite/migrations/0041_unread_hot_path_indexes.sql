-- redrive schema 41 (SQLite): drop two indexes no SQLite plan reads, which every job paid for.
-- Every statement's EXPLAIN QUERY PLAN, as served (no statistics) and after ANALYZE, never
-- reaches jobs through jobs_lease (select_expired_leases, the only reader of lease_expires_at,
-- is planned as a scan of jobs_timeout, partial on the same `state = 'active'`), nor
-- dead_letters through dead_letters_by_tenant (a page of dead letters is read through
-- dead_letters_by_time or the key, see 0032). Yet every claim added a jobs_lease entry and
-- every ack or nack removed it, and every dead letter added a dead_letters_by_tenant entry:
-- b-tree work and WAL pages in each commit on both worker paths. PostgreSQL keeps them
-- (tests/behaviour/test_schema_parity.py lists the difference).
DROP INDEX jobs_lease;
DROP INDEX dead_letters_by_tenant;
