-- redrive schema 32 (SQLite): drop the four dead-letter search indexes no SQLite plan reads.
-- Every dead-letter statement's EXPLAIN QUERY PLAN, as served (no statistics) and after ANALYZE,
-- reaches dead_letters through its key, dead_letters_one_dead_per_job, _unfingerprinted,
-- _by_aggregate_key, _by_time, _by_tenant (count_prunable_dead_letters, dead_letter_time_range,
-- as served) or _history, never through these: their filters are written `(:queue IS NULL OR
-- queue = :queue)`, which SQLite plans once for any value, so it scans dead_letters_by_time (the
-- order of a page) or the table instead. Each still cost every dead letter four more b-tree
-- entries when it entered (and moved), and their pages in each commit's WAL. PostgreSQL, whose
-- plans use them, keeps them (tests/behaviour/test_schema_parity.py lists the difference).
DROP INDEX dead_letters_by_queue;
DROP INDEX dead_letters_by_type;
DROP INDEX dead_letters_by_error;
DROP INDEX dead_letters_by_incident;
