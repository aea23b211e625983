-- redrive schema 45 (PostgreSQL): jobs_tenant holds no available job. A job's state change is a
-- non-HOT update (state is in the indexes' keys and predicates), which adds an entry to every
-- index of jobs whose predicate the new row meets: a dead letter's job going back to its queue
-- wrote three (the key, jobs_claim, jobs_tenant), and so did every enqueued job. The reads of
-- available jobs by tenant, queue and state (the job list and count of select_jobs and
-- count_jobs) are served by jobs_claim, partial on the same state, or a scan, as the planner
-- chooses; every other state keeps this index (the sweep's reads of finished jobs use it;
-- count_jobs_by_queue_and_state and count_finished_since scan the table either way). Four retry
-- chunks of 5,000 (retry_dead_letters on copies of 20,000 dead letters made by the fail path,
-- after a CHECKPOINT, backend CPU, 8 interleaved pairs): 603.6 -> 569.8 ms, lower in 7 of 8;
-- WAL records a chunk 50,993 -> 45,953. SQLite's 0045 keeps its index whole: its
-- count_jobs_by_queue_and_state reads it as a covering index, and its planner cannot use a
-- partial index whose predicate a query's `state = ...` only implies.
DROP INDEX jobs_tenant;
CREATE INDEX jobs_tenant ON jobs (tenant_id, queue, state) WHERE state <> 'available';
