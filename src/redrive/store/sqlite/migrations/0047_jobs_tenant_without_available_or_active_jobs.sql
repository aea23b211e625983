-- redrive schema 47 (SQLite): jobs_tenant holds no available or active job. Its one reader is
-- count_jobs_by_queue_and_state, which now repeats this WHERE (SQLite uses a partial index only
-- for a query whose WHERE repeats the index's own) and counts available jobs along jobs_claim and
-- active ones along jobs_timeout, the partial indexes those states keep anyway. A job's way
-- through a worker moved its jobs_tenant entry twice (available -> active -> completed or
-- discarded), and its enqueue added one: now only its end adds one.
DROP INDEX jobs_tenant;
CREATE INDEX jobs_tenant ON jobs (tenant_id, queue, state) WHERE state NOT IN ('available', 'active');
