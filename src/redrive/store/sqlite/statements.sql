-- Named statements for SQLite. postgres/statements.sql defines the same names and parameters.

-- fragment: insert_job_rows
-- Each job record of :rows (a JSON array), an existing id skipped.
INSERT INTO jobs (
    id, tenant_id, queue, type, state, priority, attempt, max_attempts, envelope, timeout_ms,
    visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, started_at,
    completed_at, cancelled_at, discarded_at, expired_at, next_attempt_at, retry_delay_ms,
    run_at, worker_id, lease_token, lease_expires_at, timeout_at, error, errors, result,
    dead_lettered
) VALUES (
    :rows->>id, :rows->>tenant_id, :rows->>queue, :rows->>type, :rows->>state,
    :rows->>priority, :rows->>attempt, :rows->>max_attempts,
    NULLIF(:rows->envelope, 'null'), :rows->>timeout_ms, :rows->>visibility_timeout_ms,
    :rows->>created_at, :rows->>enqueued_at, :rows->>scheduled_at, :rows->>expires_at,
    :rows->>started_at, :rows->>completed_at, :rows->>cancelled_at, :rows->>discarded_at,
    :rows->>expired_at, :rows->>next_attempt_at, :rows->>retry_delay_ms, :rows->>run_at,
    :rows->>worker_id, :rows->>lease_token, :rows->>lease_expires_at, :rows->>timeout_at,
    NULLIF(:rows->error, 'null'), NULLIF(:rows->errors, 'null'), NULLIF(:rows->result, 'null'),
    :rows->>dead_lettered
)
ON CONFLICT (id) DO NOTHING

-- name: insert_jobs
-- Many jobs (:rows is a JSON array of job records, one statement run per record); existing ids
-- are skipped and the ids actually inserted come back.
{insert_job_rows}
RETURNING :rows->>id AS id;

-- name: enqueue_jobs
-- What an enqueue writes: the jobs' queues (known ones left as they are), the new jobs of :rows
-- (only a new job's columns, the lifecycle ones keep their defaults) and their events, one row
-- for each of :blocks (a run of the jobs whose events are one block, `event_block` of each of
-- :rows; store/codec.py `event_blocks` makes the row as domain/events.py `enqueued_event`
-- makes each member, `event_from_row` expands it). Rows of kind `existing` name the ids of
-- :rows that exist already (the caller reports them and rolls back: what was written goes);
-- rows of kind `listener` are the active webhook subscriptions of the events' tenants (the
-- caller queues their deliveries in the same transaction). With :alone (the statement is its
-- unit's only one), a listener means nothing is written: the caller enqueues again in a
-- transaction (on SQLite the unit is a transaction all the same, and the store wakes queues).
SELECT 'existing' AS kind, id, NULL AS tenant_id, NULL AS events FROM jobs
WHERE id IN (SELECT value ->> '$.id' FROM json_each(:rows));
INSERT INTO queues (name, tenant_id, created_at)
SELECT DISTINCT value ->> '$.queue', value ->> '$.tenant_id', :now FROM json_each(:rows)
WHERE NOT (:alone AND EXISTS (
    SELECT 1 FROM webhook_subscriptions WHERE active AND tenant_id = value ->> '$.tenant_id'
        AND value ->> '$.event_block' IS NOT NULL
))
ON CONFLICT (tenant_id, name) DO NOTHING;
INSERT INTO jobs (
    id, tenant_id, queue, type, state, priority, max_attempts, envelope, timeout_ms,
    visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, run_at
)
SELECT
    :rows->>id, :rows->>tenant_id, :rows->>queue, :rows->>type, :rows->>state,
    :rows->>priority, :rows->>max_attempts, :rows->envelope, :rows->>timeout_ms,
    :rows->>visibility_timeout_ms, :rows->>created_at, :rows->>enqueued_at,
    :rows->>scheduled_at, :rows->>expires_at, :rows->>run_at
WHERE NOT (:alone AND :rows->>event_block IS NOT NULL AND EXISTS (
    SELECT 1 FROM webhook_subscriptions WHERE active AND tenant_id = :rows->>tenant_id
))
ON CONFLICT (id) DO NOTHING;
INSERT INTO events (id, tenant_id, type, queue, job_type, time, data, members, size)
SELECT :blocks->>id, :blocks->>tenant_id, :blocks->>type, :blocks->>queue, :blocks->>job_type,
    :now, :blocks->data, :blocks->members, :blocks->>size
WHERE NOT (:alone AND EXISTS (
    SELECT 1 FROM webhook_subscriptions WHERE active AND tenant_id = :blocks->>tenant_id
));
SELECT 'listener' AS kind, id, tenant_id, events FROM webhook_subscriptions
WHERE active AND tenant_id IN (SELECT value ->> '$.tenant_id' FROM json_each(:rows)
    WHERE value ->> '$.event_block' IS NOT NULL);

-- fragment: enqueue_one_job
-- The one-job enqueue's job row, event row and listeners, shared by enqueue_job and
-- enqueue_job_known_queue. A job not written because its id exists comes back as a row of kind
-- `existing` (as enqueue_jobs names them; `changes()` counts the insert just before). (One held
-- back for a listener, run alone, may come back `existing` too when its id is taken: the caller
-- reads the listeners first and runs it again in a transaction, which reports it the same.)
INSERT INTO jobs (
    id, tenant_id, queue, type, state, priority, max_attempts, envelope, timeout_ms,
    visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, run_at
)
SELECT
    :id, :tenant_id, :queue, :type, :state, :priority, :max_attempts, :envelope, :timeout_ms,
    :visibility_timeout_ms, :created_at, :enqueued_at, :scheduled_at, :expires_at, :run_at
WHERE NOT (:alone AND :event_id IS NOT NULL AND EXISTS (
    SELECT 1 FROM webhook_subscriptions WHERE active AND tenant_id = :tenant_id
))
ON CONFLICT (id) DO NOTHING;
SELECT 'existing' AS kind, :id AS id, NULL AS tenant_id, NULL AS events
WHERE changes() = 0 AND EXISTS (SELECT 1 FROM jobs WHERE id = :id);
INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data)
SELECT :event_id, :tenant_id, :event_type, :queue, :type, :id, :now,
    json_object('job_type', :type, 'queue', :queue, 'priority', :priority)
WHERE :event_id IS NOT NULL AND NOT (:alone AND EXISTS (
    SELECT 1 FROM webhook_subscriptions WHERE active AND tenant_id = :tenant_id
));
SELECT 'listener' AS kind, id, tenant_id, events FROM webhook_subscriptions
WHERE active AND tenant_id = :tenant_id AND :event_id IS NOT NULL;

-- name: enqueue_job
-- enqueue_jobs for one job, its columns (and its event's id and type) parameters of their own:
-- the same rows written and the same rows back, without a JSON array to build and parse. It
-- writes the queue's row; a producer that has seen that row committed runs
-- enqueue_job_known_queue instead (below).
INSERT INTO queues (name, tenant_id, created_at)
SELECT :queue, :tenant_id, :now
WHERE NOT (:alone AND :event_id IS NOT NULL AND EXISTS (
    SELECT 1 FROM webhook_subscriptions WHERE active AND tenant_id = :tenant_id
))
ON CONFLICT (tenant_id, name) DO NOTHING;
{enqueue_one_job}

-- name: enqueue_job_known_queue
-- enqueue_job for a job whose queue row the producer has seen committed
-- (`JobService.known_queues`): the same statements without the queues insert (the rest is
-- the fragment above).
{enqueue_one_job}

-- name: upsert_job
INSERT INTO jobs (
    id, tenant_id, queue, type, state, priority, attempt, max_attempts, envelope, timeout_ms,
    visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, started_at,
    completed_at, cancelled_at, discarded_at, expired_at, next_attempt_at, retry_delay_ms, run_at,
    worker_id, lease_token, lease_expires_at, timeout_at, error, errors, result, dead_lettered
) VALUES (
    :id, :tenant_id, :queue, :type, :state, :priority, :attempt, :max_attempts, :envelope,
    :timeout_ms, :visibility_timeout_ms, :created_at, :enqueued_at, :scheduled_at, :expires_at,
    :started_at, :completed_at, :cancelled_at, :discarded_at, :expired_at, :next_attempt_at,
    :retry_delay_ms, :run_at, :worker_id, :lease_token, :lease_expires_at, :timeout_at, :error,
    :errors, :result, :dead_lettered
) ON CONFLICT (id) DO UPDATE SET
    queue = excluded.queue, state = excluded.state, priority = excluded.priority,
    attempt = excluded.attempt, max_attempts = excluded.max_attempts,
    envelope = excluded.envelope, timeout_ms = excluded.timeout_ms,
    visibility_timeout_ms = excluded.visibility_timeout_ms, enqueued_at = excluded.enqueued_at,
    scheduled_at = excluded.scheduled_at, expires_at = excluded.expires_at,
    started_at = excluded.started_at, completed_at = excluded.completed_at,
    cancelled_at = excluded.cancelled_at, discarded_at = excluded.discarded_at,
    expired_at = excluded.expired_at, next_attempt_at = excluded.next_attempt_at,
    retry_delay_ms = excluded.retry_delay_ms, run_at = excluded.run_at,
    worker_id = excluded.worker_id, lease_token = excluded.lease_token,
    lease_expires_at = excluded.lease_expires_at, timeout_at = excluded.timeout_at,
    error = excluded.error, errors = excluded.errors, result = excluded.result,
    dead_lettered = excluded.dead_lettered;

-- name: update_jobs
-- Many guarded updates, one statement run per record of :rows: a row is written only if it is
-- still in the state and lease its record expects; the ids written come back. Only the lifecycle
-- columns are written (state, attempt, timestamps, lease, errors, result): no transition changes
-- what a job is (queue, priority, envelope, limits), which only insert_jobs and upsert_job write.
-- (:ids, which PostgreSQL's set-based form needs for its plan, is not needed here.)
UPDATE jobs SET
    state = :rows->>state, attempt = :rows->>attempt, enqueued_at = :rows->>enqueued_at,
    started_at = :rows->>started_at, completed_at = :rows->>completed_at,
    cancelled_at = :rows->>cancelled_at, discarded_at = :rows->>discarded_at,
    expired_at = :rows->>expired_at, next_attempt_at = :rows->>next_attempt_at,
    retry_delay_ms = :rows->>retry_delay_ms, run_at = :rows->>run_at,
    worker_id = :rows->>worker_id, lease_token = :rows->>lease_token,
    lease_expires_at = :rows->>lease_expires_at, timeout_at = :rows->>timeout_at,
    error = NULLIF(:rows->error, 'null'), errors = NULLIF(:rows->errors, 'null'),
    result = NULLIF(:rows->result, 'null'), dead_lettered = :rows->>dead_lettered
WHERE id = :rows->>id AND state = :rows->>expected_state
  AND COALESCE(lease_token, '') = COALESCE(:rows->>expected_lease_token, '')
RETURNING :rows->>id AS id;

-- fragment: acked_job_guard
-- Which acked jobs complete_jobs writes (`jobs` joined to its ack in `temp.acks` by id): the
-- caller's tenant's, active, the lease not expired, the ack's lease token and worker the job's
-- (either left out matches). Its event rows, its read of the jobs it writes and its update all
-- ask it.
(:tenant_id IS NULL OR jobs.tenant_id = :tenant_id)
AND jobs.state = 'active' AND (jobs.lease_expires_at IS NULL OR jobs.lease_expires_at > :now)
AND (ack.lease_token IS NULL OR ack.lease_token = jobs.lease_token)
AND (COALESCE(ack.worker_id, '') = '' OR COALESCE(jobs.worker_id, '') = ''
     OR ack.worker_id = jobs.worker_id)

-- fragment: completed_run
-- The columns of the `job.completed` row of a run of acked jobs (a group of rows with id, type,
-- queue, duration, attempt and result): a run of one is a plain row with its subject and all its
-- data; a longer one keeps its members' ids and their own data in `members` (complete_jobs).
CASE WHEN count(*) = 1 THEN id END AS subject,
CASE WHEN count(*) > 1
    THEN json_object('job_type', type, 'queue', queue)
    WHEN result IS NULL
    THEN json_object('job_type', type, 'queue', queue, 'duration_ms', duration,
                     'attempt', attempt)
    ELSE json_object('job_type', type, 'queue', queue, 'duration_ms', duration,
                     'attempt', attempt, 'result', json(result))
END AS data,
CASE WHEN count(*) = 1 THEN NULL
    WHEN count(result) = 0
    THEN json_object('subjects', json_group_array(id), 'data', json_object(
        'duration_ms', json_group_array(duration), 'attempt', json_group_array(attempt)))
    ELSE json_object('subjects', json_group_array(id), 'data', json_object(
        'duration_ms', json_group_array(duration), 'attempt', json_group_array(attempt),
        'result', json_group_array(json(result))))
END AS members,
CASE WHEN count(*) > 1 THEN count(*) END AS size

-- name: complete_jobs
-- Acks ({id, worker_id, lease_token, result, event_id} each record of :rows, the ids distinct),
-- kept in a temporary table (one run per record, in ack order), then written set-based: each job
-- only while the lease the ack names still holds, as domain/lifecycle.py `check_lease` accepts
-- it (active, the lease unexpired, the token and the worker the ack names, when it names them,
-- the job's own). Its `job.completed` event first, made from the job's columns as
-- domain/events.py `completed_event` makes it, under the same guard, in ack order (nothing runs
-- between the two in the transaction): a row a run of consecutive alike jobs (tenant, queue,
-- job type; at most 4,096), named by its first job's ack's `event_id` (a block head), its
-- members' ids (`subjects`) and their own data (`data`: `duration_ms`, `attempt`, `result`, an
-- array each) in `members`, as select_events reads them back (a run of one is a plain row; a
-- job of a subscribed tenant is always one, named by its own ack's id, by which the caller
-- delivers it). Then the columns the domain decided (`completion`:
-- :state, :completed_at, ...) and its result. No other column is read or written. Rows of kind
-- `job` are the jobs completed, rows of kind `listener` the active webhook subscriptions of the
-- tenants of the jobs named (the caller queues their deliveries in the same transaction), both
-- with the same columns, as PostgreSQL's union gives them (read by position: Executor.table). (A
-- statement per ack cost ~30 us a job, two thirds of it binding, stepping and reading each run;
-- :ids, which PostgreSQL's set-based form needs for its plan, is not needed here.)
CREATE TEMP TABLE IF NOT EXISTS acks (
    id TEXT NOT NULL, worker_id TEXT, lease_token TEXT, result TEXT, event_id TEXT NOT NULL,
    sequence INTEGER
);
DELETE FROM temp.acks;
INSERT INTO temp.acks (id, worker_id, lease_token, result, event_id, sequence)
VALUES (:rows->>id, :rows->>worker_id, :rows->>lease_token, :rows->result, :rows->>event_id,
    (SELECT sequence FROM jobs WHERE id = :rows->>id));
-- The usual ack, every job written alike (one tenant, queue and job type, none subscribed to, at
-- most a block): one row, named by its first job's ack's head, its members in ack order. Alike
-- is told job by job against one job of the batch, the first ack's (`reference`): no job set
-- apart from it by its tenant, queue, type or a subscription. (A max() and a min() of each of
-- the three cost ~3.9k instructions a job of a batch of 150, in a store thread's ~155k; when the
-- first ack's job is not written, or is not there, its batch goes to the row a run below, which
-- writes what this one would have.)
INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
SELECT (SELECT event_id FROM temp.acks WHERE rowid = run.first), tenant_id, 'job.completed',
    queue, type, subject, :now, data, members, size
FROM (
    SELECT min(place) AS first, tenant_id, queue, type,
        {completed_run},
        max(apart) AS apart
    FROM (
        SELECT ack.rowid AS place, ack.result, jobs.id, jobs.tenant_id, jobs.queue, jobs.type,
            jobs.attempt,
            CASE WHEN COALESCE(jobs.started_at, 0) = 0 THEN 0
                 ELSE :completed_at - jobs.started_at END AS duration,
            jobs.tenant_id IN (SELECT tenant_id FROM webhook_subscriptions WHERE active)
                OR jobs.tenant_id IS NOT reference.tenant_id OR jobs.queue IS NOT reference.queue
                OR jobs.type IS NOT reference.type AS apart
        FROM (
            SELECT tenant_id, queue, type FROM jobs
            WHERE sequence = (SELECT sequence FROM temp.acks ORDER BY rowid LIMIT 1)
        ) AS reference
        CROSS JOIN temp.acks AS ack
        JOIN jobs ON jobs.sequence = ack.sequence
        WHERE {acked_job_guard}
        ORDER BY ack.rowid
    )
) AS run
WHERE run.first IS NOT NULL AND (run.size IS NULL OR (NOT run.apart AND run.size <= 4096));
-- Else (the row above not written: changes() = 0), a row a run of consecutive alike jobs, each
-- named by its first job's ack's head, and a row of its own for each job of a subscribed tenant
-- (the caller delivers it by that id).
INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
SELECT event_id, tenant_id, 'job.completed', queue, type, subject, :now, data, members, size
FROM (
    -- (event_id, id, duration, attempt and result: the first member's, the row min() takes its
    -- other bare columns from.)
    SELECT min(place) AS first, event_id, tenant_id, queue, type,
        {completed_run}
    FROM (
        SELECT *, sum(starts) OVER (ORDER BY place ROWS UNBOUNDED PRECEDING) AS run
        FROM (
            SELECT *,
                COALESCE(
                    listened OR lag(listened) OVER ack_order
                    OR tenant_id <> lag(tenant_id) OVER ack_order
                    OR queue <> lag(queue) OVER ack_order
                    OR type <> lag(type) OVER ack_order
                    OR (row_number() OVER ack_order) % 4096 = 1,
                    1
                ) AS starts
            FROM (
                SELECT ack.rowid AS place, ack.event_id, ack.result, jobs.id, jobs.tenant_id,
                    jobs.queue, jobs.type, jobs.attempt,
                    CASE WHEN COALESCE(jobs.started_at, 0) = 0 THEN 0
                         ELSE :completed_at - jobs.started_at END AS duration,
                    jobs.tenant_id IN (
                        SELECT tenant_id FROM webhook_subscriptions WHERE active
                    ) AS listened
                FROM (SELECT 1 WHERE changes() = 0) AS pending
                CROSS JOIN temp.acks AS ack
                JOIN jobs ON jobs.sequence = ack.sequence
                WHERE {acked_job_guard}
            )
            WINDOW ack_order AS (ORDER BY place)
        )
    )
    GROUP BY run
)
ORDER BY first;
-- The jobs the update below writes, read first under its guard (nothing runs between the two in
-- the transaction, and it writes none of these columns): a RETURNING clause kept its rows in a
-- scratch b-tree until the update's end (~1.3k instructions a job of a batch of 150).
SELECT 'job' AS kind, jobs.id, jobs.tenant_id, jobs.queue, jobs.type, jobs.attempt,
    jobs.max_attempts, jobs.started_at, jobs.redrive_task_id, jobs.redrive_dead_letter_id,
    NULL AS events
FROM temp.acks AS ack
JOIN jobs ON jobs.sequence = ack.sequence
WHERE {acked_job_guard}
ORDER BY ack.rowid;
UPDATE jobs SET
    state = :state, completed_at = :completed_at, error = :error,
    next_attempt_at = :next_attempt_at, lease_token = :lease_token,
    lease_expires_at = :lease_expires_at, timeout_at = :timeout_at,
    result = NULLIF(ack.result, 'null')
FROM temp.acks AS ack
WHERE jobs.sequence = ack.sequence AND {acked_job_guard};
-- The acked jobs' tenants are listed (each job found by its ack's id) only while a subscription
-- is active: SQLite built that list, and the list of the ack ids it was read through, before it
-- looked for a subscription (0.59 -> 0.06 us a job of 145 acks with none active, 0.63 -> 0.38
-- with one: the statement alone, on 20,000 jobs).
SELECT 'listener' AS kind, id, tenant_id, NULL AS queue, NULL AS type, NULL AS attempt,
    NULL AS max_attempts, NULL AS started_at, NULL AS redrive_task_id,
    NULL AS redrive_dead_letter_id, events
FROM webhook_subscriptions
WHERE active AND tenant_id IN (
    SELECT jobs.tenant_id FROM temp.acks AS ack CROSS JOIN jobs ON jobs.sequence = ack.sequence
    WHERE EXISTS (SELECT 1 FROM webhook_subscriptions WHERE active)
);

-- name: select_job
SELECT * FROM jobs WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: select_job_for_update
SELECT * FROM jobs WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: select_existing_job_ids
SELECT id FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: select_jobs_for_update
-- Locked in id order, so two batches over overlapping jobs cannot deadlock.
SELECT * FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY id;

-- name: select_jobs
SELECT * FROM jobs
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:queue IS NULL OR queue = :queue)
  AND (:state IS NULL OR state = :state)
  AND (:type IS NULL OR type = :type)
ORDER BY sequence DESC
LIMIT :limit OFFSET :offset;

-- name: count_jobs
SELECT COUNT(*) AS count FROM jobs
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:queue IS NULL OR queue = :queue)
  AND (:state IS NULL OR state = :state)
  AND (:type IS NULL OR type = :type);

-- fragment: started_run
-- The data, members and size of the `job.started` row of a run of claimed jobs (a group of rows
-- with id, type, queue and attempt): a run of one is a plain row with all its data; a longer one
-- keeps its members' ids and attempts in `members` (claim_jobs).
CASE WHEN count(*) > 1 AND :worker_id IS NULL
    THEN json_object('job_type', type, 'queue', queue)
    WHEN count(*) > 1
    THEN json_object('job_type', type, 'queue', queue, 'worker_id', :worker_id)
    WHEN :worker_id IS NULL
    THEN json_object('job_type', type, 'queue', queue, 'attempt', attempt)
    ELSE json_object('job_type', type, 'queue', queue, 'worker_id', :worker_id, 'attempt', attempt)
END,
CASE WHEN count(*) > 1 THEN json_object(
    'subjects', json_group_array(id), 'data', json_object('attempt', json_group_array(attempt))
) END,
CASE WHEN count(*) > 1 THEN count(*) END

-- name: claim_jobs
-- Up to :limit available jobs of :queue, by priority, then age, kept in a temporary table (their
-- sequences) that the events, the update and the rows returned read: nothing is claimed from a
-- queue the caller's tenant paused (a caller spanning every tenant, :tenant_id NULL: one any
-- tenant paused, as its claim would take that tenant's jobs too). Each job claimed gets its
-- `job.started` event, made from its columns as domain/events.py `started_event` makes it, in
-- the order of the claim, unless its tenant has an active webhook subscription (`listened`): the
-- caller emits those (and queues their deliveries). A row keeps a run of consecutive alike jobs
-- (tenant and job type; at most 4,096), named by the block head at its first job's place (built
-- from :head_prefix and :head_randoms, a blob, as PostgreSQL's statement builds it), its
-- members' ids (`subjects`) and attempts (`data`) in
-- `members`, as select_events reads them back (a run of one is a plain row). The events are
-- written first (nothing runs between them and the update in the
-- transaction), as the jobs will be once claimed. The claimed rows are read back after the
-- update, not by a RETURNING clause, which SQLite collects in a scratch b-tree before it gives
-- the first: the whole claim of 200 jobs, events included, 24.6 -> 20.6 us a job.
CREATE TEMP TABLE IF NOT EXISTS claimed (sequence INTEGER PRIMARY KEY);
DELETE FROM temp.claimed;
INSERT INTO temp.claimed (sequence)
SELECT sequence FROM jobs
WHERE queue = :queue AND state = 'available'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (expires_at IS NULL OR expires_at > :now)
  AND NOT EXISTS (
      SELECT 1 FROM queues
      WHERE queues.name = :queue AND queues.paused
        AND (:tenant_id IS NULL OR queues.tenant_id = :tenant_id)
  )
ORDER BY priority DESC, sequence
LIMIT :limit;
-- The usual claim, every job alike (one tenant and job type, at most a block): one row, named
-- by the first head, its members in claim order. Alike is told job by job against one claimed
-- job (`reference`), as the ack's usual row tells it (complete_jobs); when that job's tenant is
-- subscribed to, the batch goes to the row a run below.
INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
SELECT
    :head_prefix || lower(hex(substr(:head_randoms, 1, 2))) || '-'
        || lower(hex(substr(:head_randoms, 3, 6))),
    tenant_id, 'job.started', queue, type,
    CASE WHEN count(*) = 1 THEN id END, :now,
    {started_run}
FROM (
    SELECT jobs.id, jobs.tenant_id, jobs.queue, jobs.type, jobs.attempt + 1 AS attempt,
        jobs.tenant_id IS NOT reference.tenant_id OR jobs.type IS NOT reference.type AS apart
    FROM (
        SELECT tenant_id, type FROM jobs
        WHERE sequence = (SELECT sequence FROM temp.claimed LIMIT 1)
    ) AS reference
    CROSS JOIN jobs
    WHERE jobs.sequence IN (SELECT sequence FROM temp.claimed)
      AND jobs.tenant_id NOT IN (SELECT tenant_id FROM webhook_subscriptions WHERE active)
    ORDER BY jobs.priority DESC, jobs.sequence
)
HAVING count(*) > 0 AND NOT max(apart) AND count(*) <= 4096;
-- Else (the row above not written: changes() = 0), a row a run of consecutive alike jobs, each
-- named by the head at its first job's place. (Its windows and groups cost ~4 us a job of 100
-- over the ~1.6 of the usual claim's row: read only when the jobs differ.)
INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
SELECT
    :head_prefix || lower(hex(substr(:head_randoms, min(place) * 8 - 7, 2))) || '-'
        || lower(hex(substr(:head_randoms, min(place) * 8 - 5, 6))),
    tenant_id, 'job.started', queue, type, CASE WHEN count(*) = 1 THEN id END, :now,
    {started_run}
FROM (
    SELECT place, id, tenant_id, queue, type, attempt,
        sum(first) OVER (ORDER BY place ROWS UNBOUNDED PRECEDING) AS run
    FROM (
        SELECT row_number() OVER claim_order AS place, id, tenant_id, queue, type,
            attempt + 1 AS attempt,
            COALESCE(
                tenant_id <> lag(tenant_id) OVER claim_order
                OR type <> lag(type) OVER claim_order
                OR (row_number() OVER claim_order) % 4096 = 1,
                1
            ) AS first
        FROM (SELECT 1 WHERE changes() = 0) AS pending
        CROSS JOIN jobs
        WHERE sequence IN (SELECT sequence FROM temp.claimed)
          AND tenant_id NOT IN (SELECT tenant_id FROM webhook_subscriptions WHERE active)
        WINDOW claim_order AS (ORDER BY priority DESC, sequence)
    )
)
GROUP BY run
ORDER BY run;
UPDATE jobs SET
    state = 'active', attempt = attempt + 1, started_at = :now, worker_id = :worker_id,
    lease_token = :lease_token,
    lease_expires_at = :now + COALESCE(:visibility_timeout_ms, visibility_timeout_ms),
    timeout_at = CASE WHEN timeout_ms IS NULL THEN NULL ELSE :now + timeout_ms END,
    run_at = NULL, next_attempt_at = NULL
WHERE sequence IN (SELECT sequence FROM temp.claimed);
-- Each claimed job as codec.claimed_jobs reads it: its envelope, then its other JSON columns (as
-- their texts) and the columns the claim did not set in one array (CLAIMED_JOB_COLUMNS' order),
-- not 35 columns (see there).
SELECT envelope, json_array(
    errors, error, result, id, tenant_id, queue, type, priority, attempt, timeout_ms,
    visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, completed_at,
    cancelled_at, discarded_at, expired_at, retry_delay_ms, sequence, dead_lettered,
    redrive_task_id, redrive_dead_letter_id,
    tenant_id IN (SELECT tenant_id FROM webhook_subscriptions WHERE active)
) AS job
FROM jobs WHERE sequence IN (SELECT sequence FROM temp.claimed);

-- name: promote_due_jobs
-- Due jobs of :queues (a JSON array; every queue when NULL) become available.
UPDATE jobs SET state = 'available', enqueued_at = :now, run_at = NULL
WHERE state IN ('scheduled', 'retryable') AND run_at <= :now
  AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
  AND (expires_at IS NULL OR expires_at > :now)
RETURNING queue;

-- name: select_expired_jobs
-- In expiry order, as on PostgreSQL (along jobs_expiry).
SELECT * FROM jobs
WHERE expires_at <= :now AND state IN ('scheduled', 'available', 'retryable', 'pending')
ORDER BY expires_at
LIMIT :limit;

-- name: select_due_work
-- Which of the sweep's every-tick tasks have work at :now (one row of 0/1), as on PostgreSQL.
SELECT
    (SELECT run_at FROM jobs WHERE state IN ('scheduled', 'retryable') AND run_at <= :now
     ORDER BY run_at LIMIT 1) IS NOT NULL AS promote,
    (SELECT expires_at FROM jobs
     WHERE expires_at <= :now AND state IN ('scheduled', 'available', 'retryable', 'pending')
     ORDER BY expires_at LIMIT 1) IS NOT NULL AS expire,
    (SELECT lease_expires_at FROM jobs WHERE state = 'active' AND lease_expires_at <= :now
     ORDER BY lease_expires_at LIMIT 1) IS NOT NULL
    OR (SELECT timeout_at FROM jobs WHERE state = 'active' AND timeout_at <= :now
        ORDER BY timeout_at LIMIT 1) IS NOT NULL AS reap,
    EXISTS (SELECT 1 FROM crons WHERE enabled AND next_run_at <= :now) AS crons,
    EXISTS (SELECT 1 FROM redrive_tasks WHERE state = 'running') AS redrives,
    EXISTS (SELECT 1 FROM replay_rules WHERE enabled) AS replay;

-- name: select_expired_leases
SELECT * FROM jobs
WHERE state = 'active' AND (lease_expires_at <= :now OR timeout_at <= :now)
LIMIT :limit;

-- name: count_jobs_by_queue_and_state
-- Each state along the index that holds it (migration 0047): jobs_tenant, partial on the WHERE
-- repeated here, as a covering index; available jobs along jobs_claim, active ones along
-- jobs_timeout (a job's row is read only to test its tenant when :tenant_id names one).
SELECT queue, state, COUNT(*) AS count FROM jobs
WHERE state NOT IN ('available', 'active')
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id) AND (:queue IS NULL OR queue = :queue)
GROUP BY queue, state
UNION ALL
SELECT queue, 'available', COUNT(*) FROM jobs
WHERE state = 'available'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id) AND (:queue IS NULL OR queue = :queue)
GROUP BY queue
UNION ALL
SELECT queue, 'active', COUNT(*) FROM jobs
WHERE state = 'active'
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id) AND (:queue IS NULL OR queue = :queue)
GROUP BY queue;

-- name: count_finished_since
SELECT state, COUNT(*) AS count FROM jobs
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND ((state = 'completed' AND completed_at >= :since)
       OR (state = 'discarded' AND discarded_at >= :since))
GROUP BY state;

-- name: prune_finished_jobs
DELETE FROM jobs WHERE sequence IN (
    SELECT sequence FROM jobs
    WHERE (state = 'completed' AND completed_at < :before)
       OR (state = 'cancelled' AND cancelled_at < :before)
       OR (state = 'discarded' AND discarded_at < :before)
    LIMIT :limit
);

-- name: select_oldest_finished_at
-- When the longest-finished job still kept finished (NULL when none is): the sweeper's finished
-- prune sleeps until then plus the retention, as nothing can be due before.
SELECT min(CASE state WHEN 'completed' THEN completed_at WHEN 'cancelled' THEN cancelled_at
                      ELSE discarded_at END) AS oldest
FROM jobs WHERE state IN ('completed', 'cancelled', 'discarded');

-- name: ensure_queue
INSERT INTO queues (name, tenant_id, created_at) VALUES (:name, :tenant_id, :now)
ON CONFLICT (tenant_id, name) DO NOTHING;

-- name: set_queue_paused
INSERT INTO queues (name, tenant_id, created_at, paused, paused_at, resumed_at)
VALUES (:name, :tenant_id, :now, :paused,
        CASE WHEN :paused THEN :now END, CASE WHEN :paused THEN NULL ELSE :now END)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    paused = excluded.paused,
    paused_at = CASE WHEN excluded.paused THEN :now ELSE queues.paused_at END,
    resumed_at = CASE WHEN excluded.paused THEN queues.resumed_at ELSE :now END
RETURNING *;

-- name: select_queues
-- One tenant's queues; every tenant's when :tenant_id is NULL.
SELECT * FROM queues WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY name, tenant_id;

-- name: select_paused_queue_names
-- One tenant's paused queues; those any tenant paused when :tenant_id is NULL.
SELECT DISTINCT name FROM queues
WHERE paused AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: enter_dead_letters
-- Many episodes (:rows, one insert per episode) and what they add to their incidents
-- (:incidents): run in one call (the executor returns the last one's rows, the incidents as they
-- are after it). Each episode's job snapshot goes to dead_letter_snapshots (migration 0025), with
-- the columns its arrival indexes read (migration 0028).
INSERT INTO dead_letters (
    id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status,
    moved_at, moved_by, args, replay_count, fingerprint, fingerprint_version, incident_id,
    aggregate_key
)
VALUES (
    :rows->>id, :rows->>job_id, :rows->>tenant_id, :rows->>queue, :rows->>type,
    :rows->>error_type, :rows->>reason, :rows->>discarded_at, :rows->>status,
    :rows->>moved_at, :rows->>moved_by, :rows->>args, :rows->>replay_count, :rows->>fingerprint,
    :rows->>fingerprint_version, :rows->>incident_id, :rows->>aggregate_key
);
INSERT INTO dead_letter_snapshots (
    id, tenant_id, job, job_id, queue, discarded_at, incident_id, aggregate_key
)
VALUES (
    :rows->>id, :rows->>tenant_id, :rows->job, :rows->>job_id, :rows->>queue,
    :rows->>discarded_at, :rows->>incident_id, :rows->>aggregate_key
);
{incident_upsert};

-- fragment: dead_letter_filter
-- Which dead letters a list, count or bulk move means (every filter field; NULL is any).
(:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:queue IS NULL OR queue = :queue)
  AND (:type IS NULL OR type = :type)
  AND (:type_prefix IS NULL OR substr(type, 1, length(:type_prefix)) = :type_prefix)
  AND (:error_type IS NULL OR error_type = :error_type)
  AND (:since IS NULL OR discarded_at >= :since)
  AND (:until IS NULL OR discarded_at <= :until)
  AND (:args_contains IS NULL OR instr(args, :args_contains) > 0)
  AND (:args_path IS NULL OR EXISTS (
      SELECT 1 FROM json_each(dead_letters.args) AS element
      WHERE CASE WHEN element.type IN ('object', 'array') THEN
          (CASE WHEN json_type(element.value, :args_path) IN ('integer', 'real') THEN 'number'
                ELSE json_type(element.value, :args_path) END)
          = (CASE WHEN json_type(:args_value) IN ('integer', 'real') THEN 'number'
                  ELSE json_type(:args_value) END)
          AND (json_type(:args_value) = 'null'
               OR json_extract(element.value, :args_path) = json_extract(:args_value, '$'))
      ELSE 0 END))
  AND (:replay_count_below IS NULL OR replay_count < :replay_count_below)
  AND (:incident_id IS NULL OR incident_id = :incident_id)
  AND (:fingerprint IS NULL OR fingerprint = :fingerprint)
  AND (:automatic_only IS NULL OR incident_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM incidents WHERE incidents.id = dead_letters.incident_id
        AND incidents.classification IN ('business', 'poison_pill')))

-- fragment: snapshot
-- The job snapshot of the dead_letters row at hand, from its table (migration 0025: a move out
-- of `dead` rewrites the dead_letters row, which no longer carries it), as the column `job`.
(SELECT snapshot.job FROM dead_letter_snapshots AS snapshot WHERE snapshot.id = dead_letters.id)
    AS job

-- name: select_dead_letters
SELECT *, {snapshot} FROM dead_letters
WHERE status = :status AND {dead_letter_filter}
  AND (:cursor_at IS NULL OR (discarded_at, id) < (:cursor_at, :cursor_id))
ORDER BY discarded_at DESC, id DESC
LIMIT :limit OFFSET :offset;

-- name: count_dead_letters
SELECT COUNT(*) AS count FROM dead_letters
WHERE status = :status AND {dead_letter_filter};

-- name: count_dead_letters_by_queue
SELECT queue, COUNT(*) AS count FROM dead_letters
WHERE status = :status AND {dead_letter_filter}
GROUP BY queue;

-- name: select_dead_letter_tombstones
-- The tombstones (:status pruned or archived, migration 0023) as select_dead_letters lists dead
-- letters; the alias lets the filter fragment name the row it tests.
SELECT * FROM dead_letter_tombstones AS dead_letters
WHERE status = :status AND {dead_letter_filter}
  AND (:cursor_at IS NULL OR (discarded_at, id) < (:cursor_at, :cursor_id))
ORDER BY discarded_at DESC, id DESC
LIMIT :limit OFFSET :offset;

-- name: count_dead_letter_tombstones
SELECT COUNT(*) AS count FROM dead_letter_tombstones AS dead_letters
WHERE status = :status AND {dead_letter_filter};

-- name: count_dead_letter_tombstones_by_queue
SELECT queue, COUNT(*) AS count FROM dead_letter_tombstones AS dead_letters
WHERE status = :status AND {dead_letter_filter}
GROUP BY queue;

-- name: select_dead_letter
SELECT *, {snapshot} FROM dead_letters
WHERE job_id = :job_id AND status = 'dead' AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: move_dead_letter
UPDATE dead_letters SET status = :status, moved_at = :now, moved_by = :moved_by
WHERE id = :id AND status = 'dead';

-- name: adjust_dead_letter_tallies
-- Dead letters that entered or left `dead`, in one statement: :rows holds {tenant_id, queue, type,
-- error_type, delta} per tally (each key once).
INSERT INTO dead_letter_tallies (tenant_id, queue, type, error_type, count)
SELECT value ->> '$.tenant_id', value ->> '$.queue', value ->> '$.type',
    value ->> '$.error_type', value ->> '$.delta'
FROM json_each(:rows) WHERE true
ON CONFLICT (tenant_id, queue, type, error_type)
DO UPDATE SET count = dead_letter_tallies.count + excluded.count;

-- name: select_dead_letter_tallies
SELECT queue, type, error_type, SUM(count) AS count FROM dead_letter_tallies
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id) AND count <> 0
GROUP BY queue, type, error_type;

-- name: count_dead_letter_tallies_by_queue
-- As on PostgreSQL: the tallied live dead letters per queue for a filter of the tallied fields.
SELECT queue, SUM(count) AS count FROM dead_letter_tallies
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id) AND count <> 0
  AND (:queue IS NULL OR queue = :queue)
  AND (:type IS NULL OR type = :type)
  AND (:type_prefix IS NULL OR substr(type, 1, length(:type_prefix)) = :type_prefix)
  AND (:error_type IS NULL OR error_type = :error_type)
GROUP BY queue;

-- name: dead_letter_time_range
SELECT MIN(discarded_at) AS oldest_at, MAX(discarded_at) AS newest_at
FROM dead_letters WHERE status = 'dead' AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: select_dead_letter_episodes
-- Every episode of the job: its dead letters and history (found by their snapshots' index:
-- migration 0028), and the tombstones of those pruned.
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, {snapshot},
       moved_at, moved_by, replay_count, fingerprint, fingerprint_version, incident_id,
       aggregate_key
FROM dead_letters
WHERE id IN (SELECT id FROM dead_letter_snapshots WHERE job_id = :job_id)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
UNION ALL
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, job,
       moved_at, moved_by, replay_count, fingerprint, fingerprint_version, incident_id,
       aggregate_key
FROM dead_letter_tombstones WHERE job_id = :job_id AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY discarded_at, id;

-- fragment: not_held
-- No active legal hold covers the dead_letters row: none on its job, its incident, or a filter
-- of exact queue, type and error type it matches (the holds are few: a probe per row is cheap).
NOT EXISTS (
    SELECT 1 FROM legal_holds AS hold
    WHERE hold.released_at IS NULL AND hold.tenant_id = dead_letters.tenant_id
      AND (hold.job_id = dead_letters.job_id
           OR hold.incident_id = dead_letters.incident_id
           OR (hold.scope = 'filter'
               AND (hold.queue IS NULL OR hold.queue = dead_letters.queue)
               AND (hold.type IS NULL OR hold.type = dead_letters.type)
               AND (hold.error_type IS NULL OR hold.error_type = dead_letters.error_type)))
)

-- name: prune_dead_letters_by_age
-- Pruning keeps a tombstone of each dead letter it removes: the row is deleted and its
-- tombstone (migration 0023) written with status :status (pruned, or archived once the archive
-- file holds it), who pruned it and when, and the job without its args, meta, errors and result
-- (`redrive dlq ls --status pruned` lists them). The batch is picked by one query, run twice in
-- the one writer's transaction (the same rows both times): the tombstones are written, then the
-- dead letters that have one deleted. Returns the tally columns as they were (status dead).
{insert_tombstones}
WHERE id IN (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND discarded_at < :before AND {not_held}
      AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
    LIMIT :limit
);
DELETE FROM dead_letters
WHERE id IN (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND discarded_at < :before AND {not_held}
      AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
    LIMIT :limit
) AND {tombstoned}
RETURNING id, tenant_id, queue, type, error_type, 'dead' AS status, incident_id;

-- fragment: insert_tombstones
-- The tombstones of the dead letters the statement's WHERE picks (from dead_letters).
INSERT INTO dead_letter_tombstones (
    id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, job, moved_at,
    moved_by, replay_count, fingerprint, fingerprint_version, incident_id, aggregate_key
)
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, :status,
       json_set((SELECT snapshot.job FROM dead_letter_snapshots AS snapshot
                 WHERE snapshot.id = dead_letters.id), '$.args', json('[]'), '$.meta', json('{}'), '$.errors', json('[]'),
           '$.error', NULL, '$.extra', json('{}'), '$.result', NULL),
       :now, :moved_by, replay_count, fingerprint, fingerprint_version, incident_id, aggregate_key
FROM dead_letters

-- fragment: tombstoned
-- The dead letter has its tombstone (nothing is pruned without one).
EXISTS (SELECT 1 FROM dead_letter_tombstones AS tombstone
        WHERE tombstone.id = dead_letters.id AND tombstone.moved_at = :now)

-- name: archive_dead_letters_by_age
-- The whole rows an age prune archives: dead letters and their history (the tombstones live
-- in a table of their own).
SELECT *, {snapshot} FROM dead_letters
WHERE discarded_at < :before AND {not_held}
  AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
LIMIT :limit;

-- name: prune_oldest_dead_letters
-- The oldest dead letters past the floor (:before; NULL: any), tombstoned as above.
{insert_tombstones}
WHERE id IN (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND (:before IS NULL OR discarded_at < :before) AND {not_held}
      AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
    ORDER BY discarded_at, id
    LIMIT :limit
);
DELETE FROM dead_letters
WHERE id IN (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND (:before IS NULL OR discarded_at < :before) AND {not_held}
      AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
    ORDER BY discarded_at, id
    LIMIT :limit
) AND {tombstoned}
RETURNING id, tenant_id, queue, type, error_type, 'dead' AS status, incident_id;

-- name: archive_oldest_dead_letters
SELECT *, {snapshot} FROM dead_letters
WHERE status = 'dead' AND (:before IS NULL OR discarded_at < :before) AND {not_held}
  AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
ORDER BY discarded_at, id
LIMIT :limit;

-- name: tombstone_dead_letters
-- The archived dead letters (:ids) leave their tombstones; their history rows go.
{insert_tombstones}
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'dead';
DELETE FROM dead_letters WHERE id IN (SELECT value FROM json_each(:ids));

-- name: delete_old_episodes
-- What an age prune deletes outright: history episodes (retried, replayed, deleted) that died
-- before :before, and tombstones pruned before it (kept as long as the policy keeps dead
-- letters); up to :limit of each.
DELETE FROM dead_letters WHERE id IN (
    SELECT id FROM dead_letters
    WHERE status <> 'dead' AND discarded_at < :before AND {not_held}
      AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
    LIMIT :limit
)
RETURNING id, tenant_id, queue, type, error_type, status, incident_id;
DELETE FROM dead_letter_tombstones WHERE id IN (
    SELECT id FROM dead_letter_tombstones AS dead_letters
    WHERE moved_at < :before AND {not_held}
      AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
    LIMIT :limit
)
RETURNING id, tenant_id, queue, type, error_type, status, incident_id;

-- name: delete_archived_tombstone
-- Restoring an archived dead letter replaces its tombstone.
DELETE FROM dead_letter_tombstones WHERE id = :id AND status = 'archived';

-- name: restore_dead_letter
-- The dead letter and its snapshot, unless the dead letter is there already (with its own).
INSERT INTO dead_letters (
    id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status,
    moved_at, moved_by, args, replay_count, fingerprint, fingerprint_version, incident_id,
    aggregate_key
) VALUES (
    :id, :job_id, :tenant_id, :queue, :type, :error_type, :reason, :discarded_at, :status,
    :moved_at, :moved_by, :args, :replay_count, :fingerprint, :fingerprint_version,
    :incident_id, :aggregate_key
) ON CONFLICT DO NOTHING
RETURNING id;
INSERT INTO dead_letter_snapshots (
    id, tenant_id, job, job_id, queue, discarded_at, incident_id, aggregate_key
) VALUES (
    :id, :tenant_id, :job, :job_id, :queue, :discarded_at, :incident_id, :aggregate_key
) ON CONFLICT DO NOTHING;

-- name: select_dead_letter_policies
SELECT * FROM dead_letter_policies WHERE tenant_id = :tenant_id ORDER BY queue;

-- name: upsert_dead_letter_policy
INSERT INTO dead_letter_policies (
    tenant_id, queue, max_age_ms, max_count, pruning_policy, min_age_ms, updated_at, updated_by
) VALUES (
    :tenant_id, :queue, :max_age_ms, :max_count, :pruning_policy, :min_age_ms, :updated_at,
    :updated_by
)
ON CONFLICT (tenant_id, queue) DO UPDATE SET
    max_age_ms = excluded.max_age_ms, max_count = excluded.max_count,
    pruning_policy = excluded.pruning_policy, min_age_ms = excluded.min_age_ms,
    updated_at = excluded.updated_at, updated_by = excluded.updated_by;

-- name: delete_dead_letter_policy
DELETE FROM dead_letter_policies WHERE tenant_id = :tenant_id AND queue = :queue;

-- name: upsert_replay_rule
INSERT INTO replay_rules (
    id, tenant_id, name, filter, delay_ms, max_replays, enabled, replayed_total, created_at,
    updated_at
) VALUES (
    :id, :tenant_id, :name, :filter, :delay_ms, :max_replays, :enabled,
    :replayed_total, :created_at, :updated_at
) ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, filter = excluded.filter, delay_ms = excluded.delay_ms,
    max_replays = excluded.max_replays, enabled = excluded.enabled,
    updated_at = excluded.updated_at;

-- name: select_replay_rules
SELECT * FROM replay_rules WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id) ORDER BY name;

-- name: delete_replay_rule
DELETE FROM replay_rules WHERE id = :id;

-- name: count_replays
UPDATE replay_rules SET replayed_total = replayed_total + :count WHERE id = :id;

-- name: insert_dead_letter_archive
INSERT INTO dead_letter_archives (name, tenant_id, path, entries, created_at)
VALUES (:name, :tenant_id, :path, :entries, :created_at);

-- name: select_dead_letter_archives
SELECT * FROM dead_letter_archives ORDER BY created_at DESC, name DESC;

-- name: mark_archive_restored
UPDATE dead_letter_archives SET restored_at = :now WHERE name = :name;

-- name: move_dead_letters
-- Up to :limit dead episodes matching the filter, newest first, leave `dead` for :moved_to in one
-- statement: the status flip is the exactly-once guard of bulk retry and purge.
-- Returns what tallies, events and requeueing need, never the snapshot. The pick is
-- materialised once, so no more than :limit move.
WITH picked AS MATERIALIZED (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND {dead_letter_filter}
      AND (:moved_to <> 'deleted' OR {not_held})
    ORDER BY discarded_at DESC, id DESC
    LIMIT :limit
)
UPDATE dead_letters SET status = :moved_to, moved_at = :now, moved_by = :moved_by
WHERE status = 'dead' AND id IN (SELECT id FROM picked)
RETURNING id, job_id, tenant_id, queue, type, error_type, incident_id, discarded_at;

-- name: select_dead_letters_by_id
SELECT *, {snapshot} FROM dead_letters WHERE id IN (SELECT value FROM json_each(:ids));

-- fragment: redriven_job
-- The set-based form of domain.dead_letter.redrive(): what a dead job's row becomes when it goes
-- back to its queue; a test keeps the two in step.
state = 'available', attempt = 0, enqueued_at = :now, error = NULL, completed_at = NULL,
discarded_at = NULL, started_at = NULL, next_attempt_at = NULL, retry_delay_ms = NULL,
worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, timeout_at = NULL,
result = NULL, dead_lettered = 0, run_at = NULL

-- fragment: redriven_by_task
-- A job the task :task_id requeued carries its id and its item's dead letter (the episode the
-- task just moved: its snapshot names the job, and it names the task as its mover, as
-- service.redrives.moved_by writes it; a task pins one episode of a job at most), so that its end
-- finds its item by the items' key; a job redriven without a task keeps those it had.
redrive_task_id = COALESCE(:task_id, jobs.redrive_task_id),
redrive_dead_letter_id = CASE WHEN :task_id IS NULL THEN jobs.redrive_dead_letter_id
    ELSE (SELECT dead.id FROM dead_letter_snapshots AS snapshot
          JOIN dead_letters AS dead ON dead.id = snapshot.id
          WHERE snapshot.job_id = jobs.id AND dead.status = 'retried'
            AND dead.moved_by = 'redrive:' || :task_id
          LIMIT 1) END

-- name: redrive_jobs
-- Dead jobs whose rows are still in the jobs table back in their queues; a redrive task's
-- (:task_id) carry its id and their item's dead letter, in the same write (a job redriven
-- without a task keeps those it had).
UPDATE jobs SET {redriven_job}, {redriven_by_task}
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'discarded' AND dead_lettered
RETURNING id;

-- name: select_dead_letter_ids
-- The ids of the dead episodes matching the filter, newest first, up to :limit, but for those
-- :excluded (a bulk retry's earlier rounds skipped them): the set a bulk retry's round moves.
-- A row an id, as `ids` (PostgreSQL's statement returns them all in one row, comma-separated).
SELECT id AS ids FROM dead_letters
WHERE status = 'dead' AND {dead_letter_filter}
  AND id NOT IN (SELECT value FROM json_each(:excluded))
ORDER BY discarded_at DESC, id DESC
LIMIT :limit;

-- name: retry_dead_letters
-- A chunk of a retry in one call: the chosen episodes (:ids) still dead leave `dead` for
-- `retried` (the exactly-once guard; BEGIN IMMEDIATE makes this the only writer), their jobs go
-- back to their queues in place where the job's row is still in the jobs table (types in
-- :upcast_types excepted: the caller upcasts those), carrying the redrive task :task_id if one
-- moves them, their queues exist, and the moved episodes' `dead_letter.retried` events are
-- written, a row a block (each named by its first member's block head, built from :head_prefix
-- and :head_randoms as PostgreSQL's statement builds it; see there). A task (:task_id) passes
-- the dead letters whose items claim_pending_redrive_items took in this transaction (the claim
-- is the pending check, as on PostgreSQL). Returns one by one the moved episodes whose job this
-- call did not put back and every moved episode of a tenant with an active webhook
-- subscription (`requeued` saying whose job it put back; never the snapshot), the others
-- counted by tenant, queue, type, error type and incident (`requeued` rows), the active webhook
-- subscriptions of the moved episodes' tenants, and the chosen episodes no longer dead
-- (`skipped`: a task's, skip_redrive_items sets right). The pick is kept in a temporary table,
-- read by each statement after it.
CREATE TEMP TABLE IF NOT EXISTS retried_chunk (
    id TEXT PRIMARY KEY, job_id TEXT, tenant_id TEXT, queue TEXT, type TEXT, error_type TEXT,
    incident_id TEXT, requeued INTEGER, discarded_at INTEGER, place INTEGER
);
-- (The moved episodes in runs of alike events, each in the chosen order: the events' blocks.)
CREATE INDEX IF NOT EXISTS temp.retried_chunk_runs ON retried_chunk (tenant_id, queue, type, place);
DELETE FROM temp.retried_chunk;
INSERT INTO temp.retried_chunk
SELECT dead_letters.id, dead_letters.job_id, dead_letters.tenant_id, dead_letters.queue,
    dead_letters.type, dead_letters.error_type, dead_letters.incident_id,
    EXISTS (SELECT 1 FROM jobs WHERE jobs.id = dead_letters.job_id
            AND jobs.state = 'discarded' AND jobs.dead_lettered)
    AND dead_letters.type NOT IN (SELECT value FROM json_each(:upcast_types)),
    dead_letters.discarded_at, chosen.key
FROM json_each(:ids) AS chosen
JOIN dead_letters ON dead_letters.id = chosen.value
WHERE dead_letters.status = 'dead';
UPDATE dead_letters SET status = 'retried', moved_at = :now, moved_by = :moved_by
WHERE id IN (SELECT id FROM temp.retried_chunk) AND status = 'dead';
UPDATE jobs SET {redriven_job}, redrive_task_id = COALESCE(:task_id, redrive_task_id),
    redrive_dead_letter_id = CASE WHEN :task_id IS NULL THEN redrive_dead_letter_id
        ELSE (SELECT id FROM temp.retried_chunk AS moved WHERE moved.job_id = jobs.id) END
WHERE id IN (SELECT job_id FROM temp.retried_chunk WHERE requeued);
INSERT INTO queues (name, tenant_id, created_at)
SELECT DISTINCT queue, tenant_id, :now FROM temp.retried_chunk WHERE 1
ON CONFLICT (tenant_id, name) DO NOTHING;
-- A row a block of the moved episodes' events alike in tenant, queue and job type, among the
-- same 4,096 chosen, named by its first member's block head, as PostgreSQL's statement writes
-- them (see there): each block's members read in order along the index of runs. (As window
-- aggregates, each member's row carried a copy of its block's arrays: a chunk of 5,000 took
-- 0.1 s more of CPU.)
INSERT INTO events (id, tenant_id, type, queue, job_type, time, data, members, size)
SELECT :head_prefix || lower(hex(substr(:head_randoms, first * 8 + 1, 2))) || '-'
        || lower(hex(substr(:head_randoms, first * 8 + 3, 6))),
    tenant_id, 'dead_letter.retried', queue, type, :now,
    json_object('job_type', type, 'queue', queue, 'moved_by', :moved_by),
    json((
        SELECT json_object('subjects', json_group_array(job_id), 'episodes', json_group_array(id))
        FROM (
            SELECT member.job_id, member.id FROM temp.retried_chunk AS member
            WHERE member.tenant_id = head.tenant_id AND member.queue = head.queue
              AND member.type = head.type AND member.place >= head.first
              AND member.place / 4096 = head.first / 4096
            ORDER BY member.place))),
    size
FROM (
    SELECT tenant_id, queue, type, min(place) AS first, count(*) AS size
    FROM temp.retried_chunk
    GROUP BY tenant_id, queue, type, place / 4096
) AS head
ORDER BY first;
WITH listening AS (
    SELECT id, tenant_id, events FROM webhook_subscriptions
    WHERE active AND tenant_id IN (SELECT tenant_id FROM temp.retried_chunk)
)
SELECT 'moved' AS kind, id, job_id, tenant_id, queue, type, error_type, incident_id, requeued,
    discarded_at, NULL AS events, 1 AS count
FROM temp.retried_chunk
WHERE NOT requeued OR tenant_id IN (SELECT tenant_id FROM listening)
UNION ALL
SELECT 'requeued', NULL, NULL, tenant_id, queue, type, error_type, incident_id, 1, NULL, NULL,
    COUNT(*)
FROM temp.retried_chunk
WHERE requeued AND tenant_id NOT IN (SELECT tenant_id FROM listening)
GROUP BY tenant_id, queue, type, error_type, incident_id
UNION ALL
SELECT 'listener', id, NULL, tenant_id, NULL, NULL, NULL, NULL, NULL, NULL, events, NULL
FROM listening
UNION ALL
SELECT 'skipped', value, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM json_each(:ids)
WHERE value NOT IN (SELECT id FROM temp.retried_chunk);

-- name: skip_redrive_items
-- A task's items that claim_pending_redrive_items took but whose dead letters retry_dead_letters
-- skipped (an age prune may have deleted one): skipped, in a row of their own, as their pin
-- blocks name them (an item moved before migration 0046 has its row already, `moved`).
INSERT INTO redrive_task_items AS item (
    task_id, tenant_id, dead_letter_id, job_id, queue, incident_id, state
)
SELECT :task_id, pin.tenant_id, skipped.value, pin.job_ids ->> skipped.key, pin.queue,
    pin.incident_id, 'skipped'
FROM redrive_task_pins AS pin JOIN json_each(pin.dead_letter_ids) AS skipped
WHERE pin.task_id = :task_id AND skipped.value IN (SELECT value FROM json_each(:ids))
ON CONFLICT (task_id, dead_letter_id) DO UPDATE SET state = 'skipped'
WHERE item.state = 'moved';

-- name: delete_dead_jobs
DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'discarded' AND dead_lettered;

-- fragment: incident_upsert
-- What a batch of dead letters adds to their incidents (:incidents, one per incident, in id
-- order). A new incident is created open; an existing one adds the counts, widens first and
-- last seen and its queues and takes the newest sample; with :regress (dead letters arriving
-- now, not a backfill) a resolved one regresses. When this statement opened or regressed an
-- incident, `state_changed_by` names the batch's arrival. (WHERE true: SQLite's upsert after a
-- SELECT.)
INSERT INTO incidents (
    id, tenant_id, type, fingerprint, fingerprint_version, error_type, message, state,
    dead_count, total_count, first_seen_at, last_seen_at, queues, sample_dead_letter_id,
    state_changed_at, state_changed_by, classification
)
SELECT
    value ->> '$.id', value ->> '$.tenant_id', value ->> '$.type', value ->> '$.fingerprint',
    value ->> '$.fingerprint_version', value ->> '$.error_type', value ->> '$.message', 'open',
    value ->> '$.dead_count', value ->> '$.total_count', value ->> '$.first_seen_at',
    value ->> '$.last_seen_at', value -> '$.queues', value ->> '$.sample_dead_letter_id',
    value ->> '$.first_seen_at', value ->> '$.arrival', value ->> '$.classification'
FROM json_each(:incidents) WHERE true
ORDER BY value ->> '$.id'
ON CONFLICT (id) DO UPDATE SET
    dead_count = incidents.dead_count + excluded.dead_count,
    total_count = incidents.total_count + excluded.total_count,
    first_seen_at = MIN(incidents.first_seen_at, excluded.first_seen_at),
    last_seen_at = MAX(incidents.last_seen_at, excluded.last_seen_at),
    queues = CASE WHEN excluded.queues = incidents.queues THEN incidents.queues
        WHEN NOT EXISTS (
            SELECT 1 FROM json_each(excluded.queues) AS added
            WHERE added.value NOT IN (SELECT value FROM json_each(incidents.queues)))
        THEN incidents.queues ELSE (
            SELECT json_group_array(queue) FROM (
                SELECT value AS queue FROM json_each(incidents.queues)
                UNION SELECT value FROM json_each(excluded.queues) ORDER BY 1)) END,
    sample_dead_letter_id = CASE WHEN excluded.last_seen_at >= incidents.last_seen_at
        THEN excluded.sample_dead_letter_id ELSE incidents.sample_dead_letter_id END,
    state = CASE WHEN incidents.state = 'resolved' AND :regress
        THEN 'regressed' ELSE incidents.state END,
    state_changed_at = CASE WHEN incidents.state = 'resolved' AND :regress
        THEN excluded.last_seen_at ELSE incidents.state_changed_at END,
    state_changed_by = CASE WHEN incidents.state = 'resolved' AND :regress
        THEN excluded.state_changed_by ELSE incidents.state_changed_by END
RETURNING *

-- name: upsert_incidents
-- Dead letters from before incidents, counted in their incidents (the backfill).
{incident_upsert};

-- name: adjust_incident_counts
-- Dead letters that left `dead` (or came back to it): :rows holds {id, delta} per incident.
UPDATE incidents SET dead_count = incidents.dead_count + changes.delta
FROM (SELECT value ->> '$.id' AS id, value ->> '$.delta' AS delta FROM json_each(:rows)) AS changes
WHERE incidents.id = changes.id;

-- fragment: incident_filter
-- Which incidents a list means (NULL is any).
(:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
  AND (:type IS NULL OR type = :type)
  AND (:type_prefix IS NULL OR substr(type, 1, length(:type_prefix)) = :type_prefix)
  AND (:queue IS NULL OR EXISTS (SELECT 1 FROM json_each(incidents.queues) WHERE value = :queue))
  AND (:error_type IS NULL OR error_type = :error_type)

-- name: select_incidents_recent
SELECT * FROM incidents
WHERE {incident_filter}
  AND (:cursor_value IS NULL OR (last_seen_at, id) < (:cursor_value, :cursor_id))
ORDER BY last_seen_at DESC, id DESC
LIMIT :limit;

-- name: select_incidents_by_count
SELECT * FROM incidents
WHERE {incident_filter}
  AND (:cursor_value IS NULL OR (dead_count, id) < (:cursor_value, :cursor_id))
ORDER BY dead_count DESC, id DESC
LIMIT :limit;

-- name: select_incident
SELECT * FROM incidents WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: count_incident_arrivals
-- The dead letters (in any status now) that arrived at each incident of :ids in [:start, :end),
-- per bucket of :width ms (0 the oldest); empty buckets are absent. One index-only range scan
-- per incident on dead_letter_snapshots_incident_arrivals (a snapshot per dead letter, whatever
-- its status), and the tombstones of the range (a range scan per status: few are that young).
SELECT incident_id, (discarded_at - :start) / :width AS bucket, COUNT(*) AS count
FROM (
    SELECT incident_id, discarded_at FROM dead_letter_snapshots
    WHERE incident_id IN (SELECT value FROM json_each(:ids))
      AND discarded_at >= :start AND discarded_at < :end
      AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
    UNION ALL
    SELECT incident_id, discarded_at FROM dead_letter_tombstones
    WHERE status IN ('pruned', 'archived') AND incident_id IN (SELECT value FROM json_each(:ids))
      AND discarded_at >= :start AND discarded_at < :end
      AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
) AS arrived
GROUP BY incident_id, bucket;

-- name: change_incident_state
-- Guarded by the state the change was decided from: no row means someone changed it meanwhile.
UPDATE incidents SET
    state = :state, fix_reference = :fix_reference, state_changed_at = :changed_at,
    state_changed_by = :changed_by
WHERE id = :id AND state = :expected_state AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: classify_incident
UPDATE incidents SET classification = :classification, classified_by = :classified_by
WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: count_dead_by_incident_class
-- Dead letters held now per incident class, across tenants (one row per incident read).
SELECT classification, SUM(dead_count) AS count FROM incidents GROUP BY classification;

-- name: select_root_cause
SELECT * FROM root_causes
WHERE incident_id = :incident_id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: save_root_cause
-- Guarded by the revision read (0: none yet): no row means someone wrote it meanwhile.
INSERT INTO root_causes (
    incident_id, tenant_id, category, root_cause, fix_reference, created_by, created_at,
    updated_by, updated_at, revision
) VALUES (
    :incident_id, :tenant_id, :category, :root_cause, :fix_reference, :created_by, :created_at,
    :updated_by, :updated_at, :revision
)
ON CONFLICT (incident_id) DO UPDATE SET
    category = excluded.category, root_cause = excluded.root_cause,
    fix_reference = excluded.fix_reference, updated_by = excluded.updated_by,
    updated_at = excluded.updated_at, revision = excluded.revision
WHERE root_causes.revision = excluded.revision - 1
RETURNING *;

-- name: select_unexplained_incidents
-- The incidents a redrive by filter would touch that lack a root cause with a fix reference or
-- are poison pills, and (id NULL) whether it touches dead letters in no incident. Set-based:
-- one probe of the incident index per incident left to explain, whatever the dead letters.
SELECT * FROM (
    SELECT incidents.id AS id, incidents.message AS message,
           incidents.classification AS classification
    FROM incidents
    WHERE (:tenant_id IS NULL OR incidents.tenant_id = :tenant_id)
      AND incidents.dead_count > 0
      -- What the incident row alone rules out (its queues only ever widen), before any probe.
      AND (:incident_id IS NULL OR incidents.id = :incident_id)
      AND (:type IS NULL OR incidents.type = :type)
      AND (:type_prefix IS NULL OR substr(incidents.type, 1, length(:type_prefix)) = :type_prefix)
      AND (:queue IS NULL OR EXISTS (
          SELECT 1 FROM json_each(incidents.queues) WHERE value = :queue))
      AND (:fingerprint IS NULL OR incidents.fingerprint = :fingerprint)
      AND (incidents.classification = 'poison_pill' OR NOT EXISTS (
          SELECT 1 FROM root_causes
          WHERE root_causes.incident_id = incidents.id AND root_causes.fix_reference IS NOT NULL))
      AND EXISTS (
          SELECT 1 FROM dead_letters
          WHERE dead_letters.incident_id = incidents.id AND status = :status
            AND {dead_letter_filter})
    ORDER BY incidents.dead_count DESC, incidents.id
    LIMIT :limit
)
UNION ALL
SELECT NULL, NULL, NULL WHERE EXISTS (
    SELECT 1 FROM dead_letters
    WHERE status = :status AND dead_letters.incident_id IS NULL AND {dead_letter_filter});

-- name: select_unexplained_incidents_by_error
-- The same for a filter that names an error type and nothing an incident row could rule out:
-- the incidents its dead letters belong to are read from those dead letters (the error-type
-- index), then the ones left to explain kept; probing every incident would read them all.
WITH touched AS MATERIALIZED (
    SELECT DISTINCT incident_id FROM dead_letters WHERE status = :status AND {dead_letter_filter}
)
SELECT * FROM (
    SELECT incidents.id AS id, incidents.message AS message,
           incidents.classification AS classification
    FROM incidents JOIN touched ON touched.incident_id = incidents.id
    WHERE (:tenant_id IS NULL OR incidents.tenant_id = :tenant_id)
      AND (incidents.classification = 'poison_pill' OR NOT EXISTS (
          SELECT 1 FROM root_causes
          WHERE root_causes.incident_id = incidents.id AND root_causes.fix_reference IS NOT NULL))
    ORDER BY incidents.dead_count DESC, incidents.id
    LIMIT :limit
)
UNION ALL
SELECT NULL, NULL, NULL WHERE EXISTS (SELECT 1 FROM touched WHERE incident_id IS NULL);

-- name: select_unexplained_among
-- Of these incidents (:ids), those that lack a root cause with a fix reference or are poison
-- pills (an id with no incident row is left out: the caller names it).
SELECT incidents.id AS id, incidents.message AS message,
       incidents.classification AS classification
FROM incidents
WHERE incidents.id IN (SELECT value FROM json_each(:ids))
  AND (:tenant_id IS NULL OR incidents.tenant_id = :tenant_id)
  AND (incidents.classification = 'poison_pill' OR NOT EXISTS (
      SELECT 1 FROM root_causes
      WHERE root_causes.incident_id = incidents.id AND root_causes.fix_reference IS NOT NULL))
ORDER BY incidents.id;

-- name: select_unfingerprinted_dead_letters
-- Episodes from before incidents (a partial index holds exactly these), oldest id first.
SELECT *, {snapshot} FROM dead_letters WHERE fingerprint IS NULL
ORDER BY id
LIMIT :limit;

-- name: fingerprint_dead_letters
-- Those episodes fingerprinted and named to their incidents (their snapshots first, whose
-- arrival index reads it); returns the ids written.
UPDATE dead_letter_snapshots SET incident_id = changes.incident_id
FROM (
    SELECT value ->> '$.id' AS id, value ->> '$.incident_id' AS incident_id FROM json_each(:rows)
) AS changes
WHERE dead_letter_snapshots.id = changes.id AND EXISTS (
    SELECT 1 FROM dead_letters
    WHERE dead_letters.id = changes.id AND dead_letters.fingerprint IS NULL);
UPDATE dead_letters SET
    fingerprint = changes.fingerprint, fingerprint_version = changes.fingerprint_version,
    incident_id = changes.incident_id
FROM (
    SELECT value ->> '$.id' AS id, value ->> '$.fingerprint' AS fingerprint,
        value ->> '$.fingerprint_version' AS fingerprint_version,
        value ->> '$.incident_id' AS incident_id
    FROM json_each(:rows)
) AS changes
WHERE dead_letters.id = changes.id AND dead_letters.fingerprint IS NULL
RETURNING id;

-- name: upsert_worker
INSERT INTO workers (
    id, tenant_id, state, queues, active_jobs, first_seen_at, last_heartbeat_at
) VALUES (:id, :tenant_id, 'running', :queues, :active_jobs, :now, :now)
ON CONFLICT (tenant_id, id) DO UPDATE SET
    last_heartbeat_at = :now,
    active_jobs = excluded.active_jobs,
    queues = CASE WHEN excluded.queues = '[]' THEN workers.queues ELSE excluded.queues END
RETURNING *;

-- name: set_worker_directive
UPDATE workers SET directive = :directive, state = :state
WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: select_workers
SELECT * FROM workers WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY id, tenant_id;

-- name: upsert_cron
INSERT INTO crons (
    name, tenant_id, definition, enabled, next_run_at, last_run_at, last_job_id, run_count,
    created_at
) VALUES (
    :name, :tenant_id, :definition, :enabled, :next_run_at, :last_run_at, :last_job_id,
    :run_count, :created_at
) ON CONFLICT (tenant_id, name) DO UPDATE SET
    definition = excluded.definition, enabled = excluded.enabled,
    next_run_at = excluded.next_run_at, last_run_at = excluded.last_run_at,
    last_job_id = excluded.last_job_id, run_count = excluded.run_count;

-- name: select_crons
SELECT * FROM crons WHERE tenant_id = :tenant_id ORDER BY name;

-- name: select_cron
SELECT * FROM crons WHERE tenant_id = :tenant_id AND name = :name;

-- name: delete_cron
DELETE FROM crons WHERE tenant_id = :tenant_id AND name = :name;

-- name: select_due_crons
SELECT * FROM crons WHERE enabled AND next_run_at <= :now
ORDER BY next_run_at, tenant_id, name LIMIT :limit;

-- name: insert_events
-- The events, then the active webhook subscriptions of their tenants (:tenant_ids, each once;
-- the caller queues their deliveries in the same transaction). The tenants are a parameter of
-- their own: the records reach SQLite one run each, and writing them out as JSON text to read
-- their tenants back took a nack's events ~2 us an event. A record of a run of alike events
-- (store/codec.py `event_rows`) is a block's row: its `members` and `size` (else both null).
INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
VALUES (:rows->>id, :rows->>tenant_id, :rows->>type, :rows->>queue, :rows->>job_type, :rows->>subject,
    :rows->>time, :rows->data, :rows->members, :rows->>size);
SELECT id, tenant_id, events FROM webhook_subscriptions
WHERE active AND tenant_id IN (SELECT value FROM json_each(:tenant_ids));

-- name: select_events
-- The events after :after_sequence (and, in that row, after the member at :after_position), in
-- order: a row that keeps a block of alike events (`members`) is one event a member, each
-- with its `position` and `subject` (and `priority`, when the members' differ, and
-- `episode_id`, a retried dead letter's, and a claim's or an ack's member's own `duration_ms`,
-- `attempt` and `result`, merged into its data by store/codec.py `event_from_row`); a row
-- without is one event (its position null). Ordered by the row only: SQLite's nested loop reads a row's members (json_each) in their
-- order, where ordering by `m.key` too would sort the whole table first (a temporary b-tree)
-- rather than stop at :limit.
SELECT
    e.sequence, e.id, e.tenant_id, e.type, e.queue, e.job_type, e.time, e.data,
    COALESCE(m.value, e.subject) AS subject, m.key AS position,
    e.members -> '$.priorities' ->> m.key AS priority,
    e.members -> '$.episodes' ->> m.key AS episode_id,
    e.members -> '$.data.duration_ms' ->> m.key AS duration_ms,
    e.members -> '$.data.attempt' ->> m.key AS attempt,
    e.members -> '$.data.result' -> m.key AS result
FROM events AS e
LEFT JOIN json_each(e.members, '$.subjects') AS m
WHERE (:tenant_id IS NULL OR e.tenant_id = :tenant_id)
  AND (:after_sequence IS NULL OR e.sequence >= :after_sequence)
  AND (:after_sequence IS NULL OR e.sequence > :after_sequence OR m.key > :after_position)
  AND (:types IS NULL OR e.type IN (SELECT value FROM json_each(:types)))
  AND (:queues IS NULL OR e.queue IN (SELECT value FROM json_each(:queues)))
  AND (:job_types IS NULL OR e.job_type IN (SELECT value FROM json_each(:job_types)))
ORDER BY e.sequence
LIMIT :limit;

-- name: select_event_sequence
-- Where the event :id is: its own row, or (:block, when the id has a block's shape) the row
-- keeping the block it would be a member of; `size` says how many members that row has.
SELECT sequence, id, size FROM events WHERE id = :id OR id = :block;

-- name: delete_events_before
-- The events before the first one (in sequence order) at or after :before: found from the
-- oldest along the primary key, reading no more than those it deletes (no index on time to
-- keep up for every event written). Never one at or after :before; one written with an
-- earlier time after a later one (another replica's clock) goes with a later trim. Returns how
-- many events went (a row keeping a block is `size` of them).
DELETE FROM events
WHERE time < :before AND sequence < COALESCE(
    (SELECT sequence FROM events WHERE time >= :before ORDER BY sequence LIMIT 1),
    9223372036854775807
)
RETURNING COALESCE(size, 1) AS size;

-- name: savepoint
-- A part of a transaction that can be undone alone (a redrive task's batch).
SAVEPOINT batch;

-- name: rollback_to_savepoint
ROLLBACK TO SAVEPOINT batch;

-- name: release_savepoint
RELEASE SAVEPOINT batch;

-- name: try_lock
SELECT CAST(:key AS INTEGER) IS NOT NULL AS locked;

-- name: reset_all
-- The audit log and its chain heads survive a reset: they are append-only for everyone.
DELETE FROM jobs;
DELETE FROM dead_letters;
DELETE FROM dead_letter_tombstones;
DELETE FROM queues;
DELETE FROM workers;
DELETE FROM crons;
DELETE FROM events;
DELETE FROM dead_letter_tallies;
DELETE FROM dead_letter_policies;
DELETE FROM replay_rules;
DELETE FROM job_schemas;
DELETE FROM dead_letter_archives;
DELETE FROM incidents;
DELETE FROM webhook_deliveries;
DELETE FROM webhook_subscriptions;
DELETE FROM redrive_task_items;
DELETE FROM redrive_task_pins;
DELETE FROM redrive_task_claims;
DELETE FROM redrive_task_queues;
DELETE FROM redrive_tasks;
DELETE FROM alerts;
DELETE FROM legal_holds;

-- name: insert_api_key
INSERT INTO api_keys (
    id, tenant_id, name, role, all_tenants, key_hash, created_at, created_by, expires_at
) VALUES (
    :id, :tenant_id, :name, :role, :all_tenants, :key_hash, :created_at, :created_by, :expires_at
)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: select_api_key
SELECT * FROM api_keys WHERE id = :id;

-- name: select_api_keys
SELECT * FROM api_keys
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:include_revoked OR revoked_at IS NULL)
ORDER BY tenant_id, created_at, id;

-- name: revoke_api_key
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, :now)
WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: count_live_api_keys
SELECT COUNT(*) AS count FROM api_keys
WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > :now);

-- name: lock_audit_head
-- The tenant's chain head, made at seq 0 on its first record; locked until commit (SQLite
-- writers are serialised by the store anyway).
INSERT INTO audit_chain_heads (tenant_id, seq, hash) VALUES (:tenant_id, 0, :genesis)
ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_chain_heads.seq
RETURNING tenant_id, seq, hash;

-- name: append_audit_record
INSERT INTO audit_log (
    id, tenant_id, seq, time, key_id, actor, role, action, target, affected, request_id,
    outcome, previous_hash, hash
) VALUES (
    :id, :tenant_id, :seq, :time, :key_id, :actor, :role, :action, :target, :affected,
    :request_id, :outcome, :previous_hash, :hash
);
UPDATE audit_chain_heads SET seq = :seq, hash = :hash WHERE tenant_id = :tenant_id;

-- name: select_audit_records
SELECT * FROM audit_log
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:action IS NULL OR action = :action)
  AND (:actor IS NULL OR actor = :actor)
  AND (:key_id IS NULL OR key_id = :key_id)
  AND (:outcome IS NULL OR outcome = :outcome)
  AND (:request_id IS NULL OR request_id = :request_id)
  AND (:since IS NULL OR time >= :since)
  AND (:until IS NULL OR time <= :until)
  AND (:target IS NULL OR instr(target, :target) > 0)
  AND (:cursor_at IS NULL OR time < :cursor_at OR (time = :cursor_at AND (seq < :cursor_seq
       OR (seq = :cursor_seq AND id < :cursor_id))))
ORDER BY time DESC, seq DESC, id DESC
LIMIT :limit;

-- name: select_audit_chain
SELECT * FROM audit_log
WHERE tenant_id = :tenant_id AND seq > :after_seq
ORDER BY seq
LIMIT :limit;

-- name: select_audit_heads
SELECT tenant_id, seq, hash FROM audit_chain_heads
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY tenant_id;

-- name: select_audit_tenants
SELECT DISTINCT tenant_id FROM audit_log
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY tenant_id;

-- name: insert_dashboard_session
INSERT INTO dashboard_sessions (token_hash, tenant_id, key_id, created_at, expires_at)
VALUES (:token_hash, :tenant_id, :key_id, :created_at, :expires_at);

-- name: select_dashboard_session
-- The session with its key as the key is now: a revoked or expired key ends it at once.
SELECT api_keys.*, dashboard_sessions.created_at AS session_created_at,
    dashboard_sessions.expires_at AS session_expires_at
FROM dashboard_sessions JOIN api_keys ON api_keys.id = dashboard_sessions.key_id
WHERE dashboard_sessions.token_hash = :token_hash;

-- name: delete_dashboard_session
DELETE FROM dashboard_sessions WHERE token_hash = :token_hash;

-- name: delete_ended_dashboard_sessions
DELETE FROM dashboard_sessions
WHERE expires_at <= :now
    OR key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NOT NULL OR expires_at <= :now);

-- name: insert_webhook_subscription
INSERT INTO webhook_subscriptions (
    id, tenant_id, url, events, active, description, secret_sealed, previous_secret_sealed,
    previous_secret_until, created_at, created_by, updated_at
) VALUES (
    :id, :tenant_id, :url, :events, :active, :description, :secret_sealed,
    :previous_secret_sealed, :previous_secret_until, :created_at, :created_by, :updated_at
);

-- name: update_webhook_subscription
UPDATE webhook_subscriptions SET
    url = :url, events = :events, active = :active, description = :description,
    secret_sealed = :secret_sealed, previous_secret_sealed = :previous_secret_sealed,
    previous_secret_until = :previous_secret_until, updated_at = :updated_at
WHERE id = :id AND tenant_id = :tenant_id
RETURNING id;

-- name: select_webhook_subscription
SELECT * FROM webhook_subscriptions
WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: select_webhook_subscriptions
SELECT * FROM webhook_subscriptions WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY tenant_id, created_at, id;

-- name: any_active_webhook_subscription
SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE active) AS active;

-- name: delete_webhook_subscription
-- The subscription and its delivery log; its id comes back if it was there.
DELETE FROM webhook_deliveries
WHERE subscription_id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);
DELETE FROM webhook_subscriptions WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING id;

-- name: insert_webhook_delivery
INSERT INTO webhook_deliveries (
    id, tenant_id, subscription_id, job_id, event_id, event_type, attempt, status,
    response_status, duration_ms, error, time
) VALUES (
    :id, :tenant_id, :subscription_id, :job_id, :event_id, :event_type, :attempt, :status,
    :response_status, :duration_ms, :error, :time
);

-- name: select_webhook_deliveries
SELECT * FROM webhook_deliveries
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:subscription_id IS NULL OR subscription_id = :subscription_id)
  AND (:status IS NULL OR status = :status)
  AND (:cursor_at IS NULL OR time < :cursor_at OR (time = :cursor_at AND id < :cursor_id))
ORDER BY time DESC, id DESC
LIMIT :limit;

-- name: delete_webhook_deliveries_before
-- Oldest first, as PostgreSQL's (walking webhook_deliveries_time backwards): a trim cut short by
-- its LIMIT leaves the newest of the records before its cut-off.
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT id FROM webhook_deliveries WHERE time < :before ORDER BY time LIMIT :limit
);

-- Redrive tasks (migration 0012) ------------------------------------------------------------

-- name: select_dead_letter_arrivals
-- Dead letters (in any status now) that arrived since :since, per queue: how many within the
-- quiet period and how many within the spike window (covered by
-- dead_letter_snapshots_arrivals, a snapshot per dead letter; the tombstones of those pruned
-- since, by a range scan per status).
SELECT tenant_id, queue,
       SUM(CASE WHEN discarded_at >= :quiet_start THEN 1 ELSE 0 END) AS in_quiet_period,
       SUM(CASE WHEN discarded_at >= :window_start THEN 1 ELSE 0 END) AS in_window
FROM (
    SELECT tenant_id, queue, discarded_at
    FROM dead_letter_snapshots INDEXED BY dead_letter_snapshots_arrivals
    WHERE discarded_at >= :since
    UNION ALL
    SELECT tenant_id, queue, discarded_at FROM dead_letter_tombstones
    WHERE status IN ('pruned', 'archived') AND discarded_at >= :since
) AS arrived
GROUP BY tenant_id, queue;

-- name: count_queue_arrivals
-- For each {tenant_id, queue} of :queues, the dead letters that arrived in [:start, :end)
-- (covered by dead_letter_snapshots_queue_arrivals, a snapshot per dead letter).
SELECT wanted.value ->> '$.tenant_id' AS tenant_id, wanted.value ->> '$.queue' AS queue,
       (SELECT COUNT(*)
        FROM dead_letter_snapshots AS snapshot INDEXED BY dead_letter_snapshots_queue_arrivals
        WHERE snapshot.tenant_id = wanted.value ->> '$.tenant_id'
          AND snapshot.queue = wanted.value ->> '$.queue'
          AND snapshot.discarded_at >= :start AND snapshot.discarded_at < :end)
       + (SELECT COUNT(*) FROM dead_letter_tombstones AS tombstones
          WHERE tombstones.status IN ('pruned', 'archived')
            AND tombstones.discarded_at >= :start AND tombstones.discarded_at < :end
            AND tombstones.tenant_id = wanted.value ->> '$.tenant_id'
            AND tombstones.queue = wanted.value ->> '$.queue')
       AS count
FROM json_each(:queues) AS wanted;

-- name: select_dead_type_counts
-- Dead letters dead now per (tenant, queue, job type), from the tallies, above :above.
SELECT tenant_id, queue, type AS key, SUM(count) AS count FROM dead_letter_tallies
GROUP BY tenant_id, queue, type
HAVING SUM(count) > :above;

-- name: select_aggregate_counts
-- Dead letters dead now per (tenant, queue, aggregate key), for the keys of those that arrived
-- since :since and those of open aggregate alerts, where at least :at_least share the key
-- (recent arrivals by dead_letter_snapshots_arrivals, each key counted on
-- dead_letters_by_aggregate_key).
WITH candidates AS (
    SELECT DISTINCT tenant_id, queue, aggregate_key FROM dead_letter_snapshots
    WHERE discarded_at >= :since AND aggregate_key IS NOT NULL
    UNION
    SELECT tenant_id, queue, key FROM alerts WHERE rule = 'aggregate' AND state <> 'resolved'
), counted AS (
    SELECT candidates.tenant_id, candidates.queue, candidates.aggregate_key AS key,
           (SELECT COUNT(*) FROM dead_letters
            WHERE dead_letters.status = 'dead' AND dead_letters.aggregate_key IS NOT NULL
              AND dead_letters.tenant_id = candidates.tenant_id
              AND dead_letters.queue = candidates.queue
              AND dead_letters.aggregate_key = candidates.aggregate_key) AS count
    FROM candidates
)
SELECT tenant_id, queue, key, count FROM counted WHERE count >= :at_least;

-- name: select_open_alerts
SELECT * FROM alerts WHERE state <> 'resolved' ORDER BY id;

-- name: insert_alert
INSERT INTO alerts (
    id, tenant_id, rule, severity, queue, key, state, message, count, first_fired_at,
    last_fired_at, updated_at, acknowledged_at, acknowledged_by, resolved_at
) VALUES (
    :id, :tenant_id, :rule, :severity, :queue, :key, :state, :message, :count, :first_fired_at,
    :last_fired_at, :updated_at, :acknowledged_at, :acknowledged_by, :resolved_at
)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: update_alert
-- Guarded by the state it was decided from: no row means it changed meanwhile.
UPDATE alerts SET
    state = :state, message = :message, count = :count, last_fired_at = :last_fired_at,
    updated_at = :updated_at, acknowledged_at = :acknowledged_at,
    acknowledged_by = :acknowledged_by, resolved_at = :resolved_at
WHERE id = :id AND state = :expected_state AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: select_alerts
SELECT * FROM alerts
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
ORDER BY first_fired_at DESC, id DESC
LIMIT :limit;

-- name: select_alert
SELECT * FROM alerts WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: count_open_alerts
-- Open alerts per (rule, severity, state): the gauges and the dashboard's banner.
SELECT rule, severity, state, COUNT(*) AS count FROM alerts
WHERE state <> 'resolved' AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
GROUP BY rule, severity, state;

-- name: upsert_job_schema
INSERT INTO job_schemas (tenant_id, type, version, schema, registered_at, registered_by)
VALUES (:tenant_id, :type, :version, :schema, :registered_at, :registered_by)
ON CONFLICT (tenant_id, type, version) DO UPDATE SET
    schema = excluded.schema, registered_at = excluded.registered_at,
    registered_by = excluded.registered_by;

-- name: select_job_schema
SELECT * FROM job_schemas WHERE tenant_id = :tenant_id AND type = :type AND version = :version;

-- name: count_prunable_dead_letters
-- The dead letters a count prune of the scope may remove: older than the floor (:before; NULL
-- when they are archived) and under no legal hold; counting stops at :limit.
SELECT COUNT(*) AS count FROM (
    SELECT 1 FROM dead_letters
    WHERE status = 'dead' AND (:before IS NULL OR discarded_at < :before) AND {not_held}
      AND (:queue IS NULL OR queue = :queue) AND (:excluded_queues IS NULL OR queue NOT IN (SELECT value FROM json_each(:excluded_queues)))
    LIMIT :limit
) AS prunable;

-- name: count_held_dead_letters
-- How many dead letters matching the filter legal holds keep (what a purge skipped).
SELECT COUNT(*) AS count FROM dead_letters
WHERE status = :status AND {dead_letter_filter} AND NOT {not_held};

-- name: insert_legal_hold
INSERT INTO legal_holds (
    id, tenant_id, scope, job_id, incident_id, queue, type, error_type, reason, created_at,
    created_by
) VALUES (
    :id, :tenant_id, :scope, :job_id, :incident_id, :queue, :type, :error_type, :reason,
    :created_at, :created_by
);

-- name: select_legal_holds
-- A tenant's holds (every tenant's for NULL), newest first; only the active ones unless :all.
SELECT * FROM legal_holds
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id) AND (:all OR released_at IS NULL)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: select_legal_hold
SELECT * FROM legal_holds WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: release_legal_hold
UPDATE legal_holds SET released_at = :now, released_by = :released_by
WHERE id = :id AND released_at IS NULL AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: insert_redrive_task
INSERT INTO redrive_tasks (
    id, tenant_id, state, filter, incident_id, rate_per_minute, critical, reason, created_by,
    created_at, updated_at, updated_by, finished_at, paced_until, to_move, moved, skipped,
    succeeded, dead_again, queues
) VALUES (
    :id, :tenant_id, :state, :filter, :incident_id, :rate_per_minute, :critical,
    :reason, :created_by, :created_at, :updated_at, :updated_by, :finished_at, :paced_until,
    :to_move, :moved, :skipped, :succeeded, :dead_again, :queues
);

-- name: lock_redrive_pins
-- One writer at a time already (BEGIN IMMEDIATE): nothing to lock.
SELECT 1 AS locked;

-- fragment: redrive_pin_chosen
-- The dead letters a pin chose, a row each in id order (their rowids count from the first:
-- redrive_pin_counts reads each block's members as a range of them, in order).
CREATE TEMP TABLE IF NOT EXISTS pinned_now (
    id TEXT, tenant_id TEXT, job_id TEXT, queue TEXT, incident_id TEXT
);
DELETE FROM temp.pinned_now;
INSERT INTO temp.pinned_now (id, tenant_id, job_id, queue, incident_id)
SELECT id, tenant_id, job_id, queue, incident_id FROM dead_letters

-- fragment: redrive_pin_taken
-- The dead letters pinned already: the unfinished tasks' pending blocks' ids but those a claim
-- took.
SELECT pinned.value FROM redrive_tasks AS task
JOIN redrive_task_pins AS pin ON pin.task_id = task.id AND pin.state = 'pending'
JOIN json_each(pin.dead_letter_ids) AS pinned
WHERE task.state IN ('running', 'paused')
EXCEPT
SELECT claimed.value FROM redrive_tasks AS task
JOIN redrive_task_claims AS claim ON claim.task_id = task.id
JOIN json_each(claim.dead_letter_ids) AS claimed
WHERE task.state IN ('running', 'paused')

-- fragment: redrive_pin_counts
-- The chosen dead letters pinned to the task :task_id in blocks (migration 0046): a row for each
-- thousand in id order and tenant, queue and incident, the ids and their jobs' ids as two JSON
-- arrays in step, in id order: each block's members read as a range of rowids, in order (grouped and aggregated over
-- a sort of the 20,000 chosen, the pin took 72 ms of CPU, 14 ms so); how many, per tenant and
-- queue.
WITH RECURSIVE first(rowid) AS (
    SELECT min(rowid) FROM temp.pinned_now
), places(place) AS (
    SELECT 0 WHERE EXISTS (SELECT 1 FROM temp.pinned_now)
    UNION ALL
    SELECT place + 1 FROM places
    WHERE (place + 1) * 1000 + (SELECT rowid FROM first) <= (SELECT max(rowid) FROM temp.pinned_now)
), blocks AS (
    SELECT DISTINCT places.place, pinned.tenant_id, pinned.queue, pinned.incident_id,
        places.place * 1000 + (SELECT rowid FROM first) AS low
    FROM places
    JOIN temp.pinned_now AS pinned
        ON pinned.rowid BETWEEN places.place * 1000 + (SELECT rowid FROM first)
                            AND places.place * 1000 + (SELECT rowid FROM first) + 999
)
INSERT INTO redrive_task_pins (
    task_id, place, first_id, tenant_id, queue, incident_id, last_id, state, dead_letter_ids,
    job_ids
)
SELECT :task_id, place,
    (SELECT min(id) FROM temp.pinned_now AS member
     WHERE member.rowid BETWEEN low AND low + 999 AND member.tenant_id = blocks.tenant_id
       AND member.queue = blocks.queue AND member.incident_id IS blocks.incident_id),
    tenant_id, queue, incident_id,
    (SELECT max(id) FROM temp.pinned_now AS member
     WHERE member.rowid BETWEEN low AND low + 999 AND member.tenant_id = blocks.tenant_id
       AND member.queue = blocks.queue AND member.incident_id IS blocks.incident_id),
    'pending',
    (SELECT json_group_array(id) FROM temp.pinned_now AS member
     WHERE member.rowid BETWEEN low AND low + 999 AND member.tenant_id = blocks.tenant_id
       AND member.queue = blocks.queue AND member.incident_id IS blocks.incident_id),
    (SELECT json_group_array(job_id) FROM temp.pinned_now AS member
     WHERE member.rowid BETWEEN low AND low + 999 AND member.tenant_id = blocks.tenant_id
       AND member.queue = blocks.queue AND member.incident_id IS blocks.incident_id)
FROM blocks;
SELECT tenant_id, queue, COUNT(*) AS count FROM temp.pinned_now GROUP BY tenant_id, queue

-- name: pin_redrive_items
-- The dead letters matching the filter now, newest first, up to :limit, pinned to the task; one
-- pinned by another unfinished task is left out (the store has one writer, so the pins take
-- turns): the unfinished tasks' pending blocks. Per queue and tenant, how many were pinned.
{redrive_pin_chosen}
WHERE id IN (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND {dead_letter_filter} AND id NOT IN ({redrive_pin_taken})
    ORDER BY discarded_at DESC, id DESC
    LIMIT :limit
)
ORDER BY id;
{redrive_pin_counts};

-- name: pin_every_redrive_item
-- As pin_redrive_items with no limit: every match.
{redrive_pin_chosen}
WHERE status = 'dead' AND {dead_letter_filter} AND id NOT IN ({redrive_pin_taken})
ORDER BY id;
{redrive_pin_counts};

-- name: claim_redrive_queues
-- The task's queues (:queues, the (tenant, queue) pairs its pin counted: read from its items,
-- each of these two statements scanned all of them) become its own until it ends; a queue
-- another unfinished task holds stays that task's (select_redrive_queue_holders names it).
INSERT INTO redrive_task_queues (tenant_id, queue, task_id)
SELECT value ->> '$.tenant_id', value ->> '$.queue', :task_id FROM json_each(:queues)
WHERE true
ON CONFLICT DO NOTHING;

-- name: select_redrive_queue_holders
SELECT held.queue, held.task_id FROM redrive_task_queues AS held
JOIN (SELECT value ->> '$.tenant_id' AS tenant_id, value ->> '$.queue' AS queue
      FROM json_each(:queues)) AS mine
    ON mine.tenant_id = held.tenant_id AND mine.queue = held.queue
WHERE held.task_id <> :task_id
ORDER BY held.queue;

-- name: release_redrive_queues
DELETE FROM redrive_task_queues WHERE task_id = :task_id;

-- name: unpin_redrive_items
-- A task that ended before moving them all lets go of the rest: its pending blocks (what a claim
-- took stays moved); one whose counts leave none pending (completed) changes none.
UPDATE redrive_task_pins SET state = 'skipped' WHERE task_id = :task_id AND state = 'pending'
AND EXISTS (
    SELECT 1 FROM redrive_tasks AS task
    WHERE task.id = :task_id AND task.moved + task.skipped + task.failed < task.to_move
);

-- name: set_redrive_task_pins
UPDATE redrive_tasks SET to_move = :to_move, queues = :queues WHERE id = :id;

-- name: select_redrive_task
SELECT * FROM redrive_tasks WHERE id = :id AND (:tenant_id IS NULL OR tenant_id = :tenant_id);

-- name: select_redrive_tasks
SELECT * FROM redrive_tasks
WHERE (:tenant_id IS NULL OR tenant_id = :tenant_id) AND (:state IS NULL OR state = :state)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: select_running_redrive_tasks
SELECT * FROM redrive_tasks WHERE state = 'running' ORDER BY id LIMIT :limit;

-- name: change_redrive_task
-- Guarded by the state the change was decided from: no row means someone changed it meanwhile.
UPDATE redrive_tasks SET state = :state, updated_at = :now, updated_by = :changed_by,
    paced_until = :paced_until, finished_at = :finished_at
WHERE id = :id AND state = :expected_state AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- fragment: pending_redrive_items
-- The task's next :limit pending items (`next`: tenant, dead letter and job), as PostgreSQL's
-- (see redrive_next_pending there): its pending blocks' ids after :after and after the task's
-- `moved_through`, less those a committed claim took, or, when none is left there, after :after
-- alone. The job ids are the chosen blocks' arrays' elements at the chosen places (`->>` each,
-- SQLite 3.40 compared the whole array's text with its JSON cache at each call: a claim of
-- 20,000 took 140 ms of CPU, 31 as items).
WITH bound AS MATERIALIZED (
    SELECT MAX(:after, (SELECT moved_through FROM redrive_tasks WHERE id = :task_id)) AS after
), claimed_above AS MATERIALIZED (
    SELECT taken.value AS id FROM redrive_task_claims AS claim
    JOIN json_each(claim.dead_letter_ids) AS taken
    WHERE claim.task_id = :task_id AND claim.last_id > (SELECT after FROM bound)
), above AS MATERIALIZED (
    SELECT pin.place, pin.first_id, pin.tenant_id, pinned.key AS at, pinned.value AS id
    FROM redrive_task_pins AS pin JOIN json_each(pin.dead_letter_ids) AS pinned
    WHERE pin.task_id = :task_id AND pin.state = 'pending'
      AND pin.last_id > (SELECT after FROM bound) AND pinned.value > (SELECT after FROM bound)
      AND pinned.value NOT IN (SELECT id FROM claimed_above)
    ORDER BY pin.place, pinned.value
    LIMIT :limit
), claimed_after AS MATERIALIZED (
    SELECT taken.value AS id FROM redrive_task_claims AS claim
    JOIN json_each(claim.dead_letter_ids) AS taken
    WHERE claim.task_id = :task_id AND claim.last_id > :after
), chosen AS (
    SELECT * FROM above
    UNION ALL
    SELECT * FROM (
        SELECT pin.place, pin.first_id, pin.tenant_id, pinned.key AS at, pinned.value AS id
        FROM redrive_task_pins AS pin JOIN json_each(pin.dead_letter_ids) AS pinned
        WHERE pin.task_id = :task_id AND pin.state = 'pending'
          AND pin.last_id > :after AND pinned.value > :after
          AND pinned.value NOT IN (SELECT id FROM claimed_after)
          AND NOT EXISTS (SELECT 1 FROM above)
        ORDER BY pin.place, pinned.value
        LIMIT :limit
    )
), jobs AS MATERIALIZED (
    SELECT pin.place, pin.first_id, job.key AS at, job.value AS job_id
    FROM redrive_task_pins AS pin JOIN json_each(pin.job_ids) AS job
    WHERE pin.task_id = :task_id AND pin.place IN (SELECT place FROM chosen)
), next AS (
    SELECT chosen.tenant_id, chosen.id, jobs.job_id
    FROM chosen
    JOIN jobs ON jobs.place = chosen.place AND jobs.first_id = chosen.first_id
        AND jobs.at = chosen.at
)

-- name: select_pending_redrive_items
-- One row: their ids and their jobs' ids, two JSON arrays in step, in id order, as PostgreSQL's.
{pending_redrive_items}
SELECT json_group_array(id) AS dead_letter_ids, json_group_array(job_id) AS job_ids
FROM (SELECT id, job_id FROM next ORDER BY id);

-- name: select_pending_redrive_dead_letters
-- The dead letters a task pins of these types, by id after :after (a dry run of their upcasts
-- when it starts, before any claim).
SELECT dead_letters.*, {snapshot} FROM redrive_task_pins AS pin
JOIN json_each(pin.dead_letter_ids) AS pinned
JOIN dead_letters ON dead_letters.id = pinned.value
WHERE pin.task_id = :task_id AND pin.state = 'pending' AND pin.last_id > :after
  AND pinned.value > :after AND dead_letters.type IN (SELECT value FROM json_each(:types))
ORDER BY pinned.value
LIMIT :limit;

-- name: claim_pending_redrive_items
-- A chunk's items, taken to move in this transaction: read as select_pending_redrive_items reads
-- them, claimed in one row per tenant of their ids, as on PostgreSQL (see there).
CREATE TEMP TABLE IF NOT EXISTS claimed_now (id TEXT PRIMARY KEY, tenant_id TEXT, job_id TEXT);
DELETE FROM temp.claimed_now;
{pending_redrive_items}
INSERT INTO temp.claimed_now (id, tenant_id, job_id) SELECT id, tenant_id, job_id FROM next;
INSERT INTO redrive_task_claims (task_id, first_id, tenant_id, last_id, dead_letter_ids)
SELECT :task_id, min(id), tenant_id, max(id), json_group_array(id)
FROM (SELECT id, tenant_id FROM temp.claimed_now ORDER BY tenant_id, id)
GROUP BY tenant_id;
SELECT json_group_array(id) AS dead_letter_ids, json_group_array(job_id) AS job_ids
FROM (SELECT id, job_id FROM temp.claimed_now ORDER BY id);

-- name: fail_redrive_item
-- A pinned dead letter an upcaster refused, claimed by this transaction's chunk: its item is
-- `failed` with the error, in a row of its own (and the dead letter stays dead).
INSERT INTO redrive_task_items AS item (
    task_id, tenant_id, dead_letter_id, job_id, queue, incident_id, state, error_code,
    error_message
)
SELECT :task_id, tenant_id, id, job_id, queue, incident_id, 'failed', :code, :message
FROM dead_letters WHERE id = :dead_letter_id
ON CONFLICT (task_id, dead_letter_id) DO UPDATE
SET state = 'failed', error_code = excluded.error_code, error_message = excluded.error_message
WHERE item.state = 'moved';

-- name: fail_redrive_task
-- Guarded like change_redrive_task: the task ends `failed` with the reason.
UPDATE redrive_tasks SET state = 'failed', updated_at = :now, updated_by = 'system',
    finished_at = :now, failure_code = :code, failure_message = :message,
    failure_job_id = :job_id
WHERE id = :id AND state = :expected_state
RETURNING *;

-- name: count_redrive_batch
-- A batch's counts, and its pace: a task's pace only moves on (chunks of one batch moved over the
-- write lanes commit in any order, each with the pace after every chunk taken before it), and the
-- last item it took (:through), as on PostgreSQL (SQLite reads pending items by its partial index).
UPDATE redrive_tasks SET moved = moved + :moved, skipped = skipped + :skipped,
    failed = failed + :failed,
    paced_until = MAX(paced_until, :paced_until), updated_at = :now,
    moved_through = MAX(moved_through, :through)
WHERE id = :id
RETURNING *;

-- name: mark_redriven_jobs
-- The jobs a task requeued other than in place (upcast, or from the snapshot) carry its id and
-- their item's, so that their end updates the task.
UPDATE jobs SET {redriven_by_task} WHERE id IN (SELECT value FROM json_each(:ids));

-- name: record_redrive_outcomes
-- Redriven jobs that ended (:rows): their items, found by the key (task, dead letter: the job
-- names both, see redriven_by_task), succeed or die again, once: a moved item has no row of its
-- own (migration 0046) and gets one, its tenant and queue the job's, its incident the dead
-- letter's; one that has a row changes only from `moved` (moved before 0046).
INSERT INTO redrive_task_items AS item (
    task_id, tenant_id, dead_letter_id, job_id, queue, incident_id, state, died_fingerprint,
    died_incident_id
)
SELECT r.task_id, jobs.tenant_id, r.dead_letter_id, jobs.id, jobs.queue,
    (SELECT dead.incident_id FROM dead_letters AS dead WHERE dead.id = r.dead_letter_id),
    r.state, r.fingerprint, r.incident_id
FROM (
    SELECT value ->> '$.task_id' AS task_id, value ->> '$.dead_letter_id' AS dead_letter_id,
           value ->> '$.job_id' AS job_id, value ->> '$.state' AS state,
           value ->> '$.fingerprint' AS fingerprint, value ->> '$.incident_id' AS incident_id
    FROM json_each(:rows)
) AS r
JOIN jobs ON jobs.id = r.job_id
WHERE true
ON CONFLICT (task_id, dead_letter_id) DO UPDATE
SET state = excluded.state, died_fingerprint = excluded.died_fingerprint,
    died_incident_id = excluded.died_incident_id
WHERE item.state = 'moved'
RETURNING task_id, state, incident_id, died_incident_id;

-- name: count_redrive_outcomes
UPDATE redrive_tasks
SET succeeded = redrive_tasks.succeeded + r.succeeded, dead_again = redrive_tasks.dead_again + r.dead_again
FROM (
    SELECT value ->> '$.id' AS id, value ->> '$.succeeded' AS succeeded,
           value ->> '$.dead_again' AS dead_again
    FROM json_each(:rows)
) AS r
WHERE redrive_tasks.id = r.id
RETURNING *;

-- name: select_redrive_items
-- A task's items in id order, up to :limit, of the state :state (any for NULL), as PostgreSQL's
-- (see there); a pinned item's job read from its block by its place in it, for the page only
-- (see pending_redrive_items).
WITH recorded AS MATERIALIZED (
    SELECT * FROM redrive_task_items WHERE task_id = :task_id
), claimed AS MATERIALIZED (
    SELECT taken.value AS id FROM redrive_task_claims AS claim
    JOIN json_each(claim.dead_letter_ids) AS taken
    WHERE claim.task_id = :task_id
), page AS MATERIALIZED (
    SELECT task_id, tenant_id, dead_letter_id, job_id, queue, incident_id, state,
        died_fingerprint, died_incident_id, error_code, error_message, 1 AS own, NULL AS place,
        NULL AS first_id, NULL AS at
    FROM recorded
    WHERE :state IS NULL OR state = :state
    UNION ALL
    SELECT * FROM (
        SELECT :task_id, pin.tenant_id, pinned.value, NULL, pin.queue, pin.incident_id,
            CASE WHEN pinned.value IN (SELECT id FROM claimed) THEN 'moved' ELSE pin.state END
                AS state,
            NULL, NULL, NULL, NULL, 0, pin.place, pin.first_id, pinned.key
        FROM redrive_task_pins AS pin JOIN json_each(pin.dead_letter_ids) AS pinned
        WHERE pin.task_id = :task_id
          AND pinned.value NOT IN (SELECT dead_letter_id FROM recorded)
    )
    WHERE :state IS NULL OR state = :state
    ORDER BY dead_letter_id
    LIMIT :limit
)
SELECT page.task_id, page.tenant_id, page.dead_letter_id,
    CASE WHEN page.own THEN page.job_id ELSE (
        SELECT pin.job_ids ->> page.at FROM redrive_task_pins AS pin
        WHERE pin.task_id = page.task_id AND pin.place = page.place
          AND pin.first_id = page.first_id) END AS job_id,
    page.queue, page.incident_id, page.state, page.died_fingerprint, page.died_incident_id,
    page.error_code, page.error_message
FROM page
ORDER BY page.dead_letter_id;

-- name: select_queue_redrive_holders
SELECT queue, task_id FROM redrive_task_queues
WHERE queue IN (SELECT value FROM json_each(:queues)) AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
ORDER BY queue;
