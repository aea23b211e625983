-- redrive schema 45 (SQLite): nothing to change. PostgreSQL's 0045 leaves available jobs out of
-- jobs_tenant (each enqueue and requeue wrote an entry there); SQLite keeps it whole, as its
-- count_jobs_by_queue_and_state scans it as a covering index and its planner uses a partial
-- index only when a query's WHERE repeats the index's own. This file keeps the numbering in step.
SELECT 1;
