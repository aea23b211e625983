-- Named statements for PostgreSQL. sqlite/statements.sql defines the same names and parameters.

-- fragment: insert_job_rows
-- The job records of :rows (a JSON array), existing ids skipped.
INSERT INTO jobs (
    id, tenant_id, queue, type, state, priority, attempt, max_attempts, envelope, timeout_ms,
    visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, started_at,
    completed_at, cancelled_at, discarded_at, expired_at, next_attempt_at, retry_delay_ms,
    run_at, worker_id, lease_token, lease_expires_at, timeout_at, error, errors, result,
    dead_lettered
)
SELECT
    r.id, r.tenant_id, r.queue, r.type, r.state, r.priority, r.attempt, r.max_attempts,
    r.envelope, r.timeout_ms, r.visibility_timeout_ms, r.created_at, r.enqueued_at,
    r.scheduled_at, r.expires_at, r.started_at, r.completed_at, r.cancelled_at, r.discarded_at,
    r.expired_at, r.next_attempt_at, r.retry_delay_ms, r.run_at, r.worker_id, r.lease_token,
    r.lease_expires_at, r.timeout_at, r.error, r.errors, r.result, r.dead_lettered
FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
        id text, tenant_id text, queue text, type text, state text, priority integer,
        attempt integer, max_attempts integer, envelope jsonb, timeout_ms bigint,
        visibility_timeout_ms bigint, created_at bigint, enqueued_at bigint,
        scheduled_at bigint, expires_at bigint, started_at bigint, completed_at bigint,
        cancelled_at bigint, discarded_at bigint, expired_at bigint, next_attempt_at bigint,
        retry_delay_ms bigint, run_at bigint, worker_id text, lease_token text,
        lease_expires_at bigint, timeout_at bigint, error jsonb, errors jsonb, result jsonb,
        dead_lettered boolean
)
ON CONFLICT (id) DO NOTHING

-- name: insert_jobs
-- Many jobs in one statement (:rows is a JSON array of job records); existing ids are skipped and
-- the ids actually inserted come back.
{insert_job_rows}
RETURNING id;

-- name: enqueue_jobs
-- What an enqueue writes, in one statement (one round trip): the jobs' queues (known ones left
-- as they are), the new jobs of :rows (only a new job's columns, the lifecycle ones keep their
-- defaults) and their events: one row for each block of them (`event_block`, the run's first
-- event's id; `event_type`), its members the jobs of the block in order (`subjects`, and their
-- `priorities` when they differ), each event as domain/events.py `enqueued_event` makes it
-- (store/codec.py `event_from_row` expands the row). :rows is `{"shared": ..., "rows":
-- [...]}`, parsed once: a column a record of `rows` leaves out is the one `shared` holds (the
-- columns the whole batch has alike, sent once: a batch of one kind of job names its one block
-- once). All or nothing: an id that exists already fails the statement (unique_violation on
-- jobs_pkey; the store raises Duplicate, and the transaction cannot go on). A plain insert,
-- not ON CONFLICT DO NOTHING: its speculative insertion (a second index probe, a lock and a
-- confirmation record a row) was a sixth of the server's CPU for a batch of 1,000; and a check
-- of the ids before the insert has no plan that holds (prepared on an empty table, its generic
-- plan scans the whole table for them). Rows of kind `listener` are the active webhook
-- subscriptions of the events' tenants (the caller queues their deliveries in the same
-- transaction). With :alone (the statement is its unit's only one and commits by itself), a
-- listener means nothing is written (the caller enqueues again in a transaction) and the
-- statement sends the wake-ups of the available jobs it inserted itself (rows of kind `woken`).
-- A block's rows are grouped by the block alone (its jobs are alike in tenant, event type,
-- queue and job type: `enqueued_runs`), and its arrays made as arrays, then JSON: grouping on
-- the five columns sorted every row by all five first, and jsonb_agg costs more than
-- array_agg and one to_jsonb; the same rows (backend CPU of a statement of 1,000, perf
-- task-clock, 5 interleaved runs of 60: 13.5 -> 12.2 ms).
WITH shared AS MATERIALIZED (
    SELECT s.* FROM jsonb_to_record(CAST(:rows AS jsonb) -> 'shared') AS s(
        tenant_id text, queue text, type text, state text, priority integer,
        max_attempts integer, timeout_ms bigint, visibility_timeout_ms bigint,
        created_at bigint, enqueued_at bigint, scheduled_at bigint, expires_at bigint,
        run_at bigint, event_type text, event_block text
    )
), r AS MATERIALIZED (
    SELECT
        r.id, COALESCE(r.tenant_id, s.tenant_id) AS tenant_id, COALESCE(r.queue, s.queue) AS queue,
        COALESCE(r.type, s.type) AS type, COALESCE(r.state, s.state) AS state,
        COALESCE(r.priority, s.priority) AS priority,
        COALESCE(r.max_attempts, s.max_attempts) AS max_attempts, r.envelope,
        COALESCE(r.timeout_ms, s.timeout_ms) AS timeout_ms,
        COALESCE(r.visibility_timeout_ms, s.visibility_timeout_ms) AS visibility_timeout_ms,
        COALESCE(r.created_at, s.created_at) AS created_at,
        COALESCE(r.enqueued_at, s.enqueued_at) AS enqueued_at,
        COALESCE(r.scheduled_at, s.scheduled_at) AS scheduled_at,
        COALESCE(r.expires_at, s.expires_at) AS expires_at, COALESCE(r.run_at, s.run_at) AS run_at,
        COALESCE(r.event_type, s.event_type) AS event_type,
        COALESCE(r.event_block, s.event_block) AS event_block, r.position
    FROM shared AS s, ROWS FROM (jsonb_to_recordset(CAST(:rows AS jsonb) -> 'rows') AS (
        id text, tenant_id text, queue text, type text, state text, priority integer,
        max_attempts integer, envelope jsonb, timeout_ms bigint, visibility_timeout_ms bigint,
        created_at bigint, enqueued_at bigint, scheduled_at bigint, expires_at bigint,
        run_at bigint, event_type text, event_block text
    )) WITH ORDINALITY AS r(
        id, tenant_id, queue, type, state, priority, max_attempts, envelope, timeout_ms,
        visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, run_at,
        event_type, event_block, position
    )
), listening AS MATERIALIZED (
    SELECT id, tenant_id, events FROM webhook_subscriptions
    WHERE active AND tenant_id IN (SELECT tenant_id FROM r WHERE r.event_block IS NOT NULL)
), inserted AS (
    INSERT INTO jobs (
        id, tenant_id, queue, type, state, priority, max_attempts, envelope, timeout_ms,
        visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, run_at
    )
    SELECT
        r.id, r.tenant_id, r.queue, r.type, r.state, r.priority, r.max_attempts, r.envelope,
        r.timeout_ms, r.visibility_timeout_ms, r.created_at, r.enqueued_at, r.scheduled_at,
        r.expires_at, r.run_at
    FROM r
    WHERE NOT (CAST(:alone AS boolean) AND EXISTS (SELECT FROM listening))
    RETURNING tenant_id, queue, state
), known AS (
    INSERT INTO queues (name, tenant_id, created_at)
    SELECT DISTINCT queue, tenant_id, CAST(:now AS bigint) FROM inserted
    ON CONFLICT (tenant_id, name) DO NOTHING
), added AS (
    INSERT INTO events (id, tenant_id, type, queue, job_type, time, data, members, size)
    SELECT
        event_block, min(tenant_id), min(event_type), min(queue), min(type),
        CAST(:now AS bigint),
        jsonb_build_object('job_type', min(type), 'queue', min(queue)) || CASE
            WHEN min(priority) = max(priority) THEN jsonb_build_object('priority', min(priority))
            ELSE CAST('{}' AS jsonb)
        END,
        jsonb_build_object('subjects', to_jsonb(array_agg(id ORDER BY position))) || CASE
            WHEN min(priority) = max(priority) THEN CAST('{}' AS jsonb)
            ELSE jsonb_build_object('priorities', to_jsonb(array_agg(priority ORDER BY position)))
        END,
        count(*)
    FROM r
    WHERE event_block IS NOT NULL AND EXISTS (SELECT FROM inserted)
    GROUP BY event_block
    ORDER BY min(position)
), woken AS (
    SELECT queue, pg_notify('redrive_jobs', queue) FROM (
        SELECT DISTINCT queue FROM inserted
        WHERE CAST(:alone AS boolean) AND state = 'available'
    ) AS available
)
SELECT 'listener' AS kind, id, tenant_id, events FROM listening
UNION ALL
SELECT 'woken', queue, NULL, NULL FROM woken;

-- fragment: enqueue_one_job
-- The one-job enqueue's first CTEs, shared by enqueue_job and enqueue_job_known_queue: the
-- subscriptions listening, and the job row.
listening AS MATERIALIZED (
    SELECT id, tenant_id, events FROM webhook_subscriptions
    WHERE active AND tenant_id = CAST(:tenant_id AS text)
        AND CAST(:event_id AS text) IS NOT NULL
), inserted AS (
    INSERT INTO jobs (
        id, tenant_id, queue, type, state, priority, max_attempts, envelope, timeout_ms,
        visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, run_at
    )
    SELECT
        CAST(:id AS text), :tenant_id, CAST(:queue AS text), CAST(:type AS text),
        CAST(:state AS text), CAST(:priority AS integer), CAST(:max_attempts AS integer),
        CAST(:envelope AS jsonb), CAST(:timeout_ms AS bigint),
        CAST(:visibility_timeout_ms AS bigint), CAST(:created_at AS bigint),
        CAST(:enqueued_at AS bigint), CAST(:scheduled_at AS bigint),
        CAST(:expires_at AS bigint), CAST(:run_at AS bigint)
    WHERE NOT (CAST(:alone AS boolean) AND EXISTS (SELECT FROM listening))
    -- The wake-up of a statement run alone (no COMMIT to send it with) from the insert's own
    -- RETURNING, once a row: a CTE of its own, run only when the result reads it, cost a scan
    -- node and a row back per call (~3 % of the server's CPU per call).
    RETURNING id, queue, state, CASE WHEN CAST(:alone AS boolean) AND state = 'available'
        THEN pg_notify('redrive_jobs', queue) END AS woke
)

-- fragment: enqueue_one_event
-- The one-job enqueue's event row and its result, shared as enqueue_one_job is. The result is
-- the listeners alone: the job's row is written or the statement fails (an id that exists:
-- unique_violation, the store's Duplicate), or, run alone with a listener, nothing is written,
-- which the listeners tell. A row naming the job told nothing more, and its scan of `inserted`
-- under an Append cost ~4 % of the backend's CPU per call (without the commit's flush; the
-- CTEs still run whole, as PostgreSQL runs every data-modifying CTE, read or not).
added AS (
    INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data)
    SELECT
        :event_id, :tenant_id, CAST(:event_type AS text), queue, :type, id, :now,
        jsonb_build_object('job_type', :type, 'queue', queue, 'priority', :priority)
    FROM inserted
    WHERE :event_id IS NOT NULL
)
SELECT 'listener' AS kind, id, tenant_id, events FROM listening;

-- name: enqueue_job
-- enqueue_jobs for one job, its columns (and its event's id and type) parameters of their own:
-- the same rows written and the same rows back, without a JSON array to build and parse. The
-- statement producers run once per call (jobs.enqueue): prepared once per connection, planned
-- once (a generic plan), it costs the server a tenth to a fifth less than enqueue_jobs with
-- one row (no recordset function, materialised CTE or semi-joins to run). A plain insert, as
-- enqueue_jobs': an id that exists already fails the statement (unique_violation on jobs_pkey,
-- the store's Duplicate), and the job row needs no speculative insertion (a second probe of
-- jobs_pkey and a confirmation record in the WAL). It writes the queue's row; a producer that
-- has seen that row committed runs enqueue_job_known_queue instead (below).
WITH {enqueue_one_job}, known AS (
    INSERT INTO queues (name, tenant_id, created_at)
    SELECT queue, :tenant_id, CAST(:now AS bigint) FROM inserted
    ON CONFLICT (tenant_id, name) DO NOTHING
), {enqueue_one_event}

-- name: enqueue_job_known_queue
-- enqueue_job for a job whose queue row the producer has seen committed (a queue row is never
-- deleted, but by the test hooks' reset: `JobService.known_queues`): the same statement without
-- the queues insert. Left in with a flag that made it write nothing, that insert still cost
-- every call its executor set-up and tear-down (the ON CONFLICT insert's node, the queues table
-- and its index opened and closed, its row-security check prepared): ~3 % of the server's CPU
-- per call. The two share their other parts (the fragments above).
WITH {enqueue_one_job}, {enqueue_one_event}

-- name: upsert_job
INSERT INTO jobs (
    id, tenant_id, queue, type, state, priority, attempt, max_attempts, envelope, timeout_ms,
    visibility_timeout_ms, created_at, enqueued_at, scheduled_at, expires_at, started_at,
    completed_at, cancelled_at, discarded_at, expired_at, next_attempt_at, retry_delay_ms, run_at,
    worker_id, lease_token, lease_expires_at, timeout_at, error, errors, result, dead_lettered
) VALUES (
    :id, :tenant_id, :queue, :type, :state, :priority, :attempt, :max_attempts, CAST(:envelope AS jsonb),
    :timeout_ms, :visibility_timeout_ms, :created_at, :enqueued_at, :scheduled_at, :expires_at,
    :started_at, :completed_at, :cancelled_at, :discarded_at, :expired_at, :next_attempt_at,
    :retry_delay_ms, :run_at, :worker_id, :lease_token, :lease_expires_at, :timeout_at, CAST(:error AS jsonb),
    CAST(:errors AS jsonb), CAST(:result AS jsonb), :dead_lettered
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
-- Many guarded updates in one statement: a row is written only if it is still in the state and
-- lease its record expects; the ids written come back. Only the lifecycle columns are written
-- (state, attempt, timestamps, lease, errors, result): no transition changes what a job is
-- (queue, priority, envelope, limits), which only insert_jobs and upsert_job write. :ids repeats
-- the records' ids so the planner reaches the rows by primary key whatever it guesses of the
-- JSON's size.
UPDATE jobs SET
    state = r.state, attempt = r.attempt, enqueued_at = r.enqueued_at,
    started_at = r.started_at, completed_at = r.completed_at, cancelled_at = r.cancelled_at,
    discarded_at = r.discarded_at, expired_at = r.expired_at,
    next_attempt_at = r.next_attempt_at, retry_delay_ms = r.retry_delay_ms, run_at = r.run_at,
    worker_id = r.worker_id, lease_token = r.lease_token,
    lease_expires_at = r.lease_expires_at, timeout_at = r.timeout_at, error = r.error,
    errors = r.errors, result = r.result, dead_lettered = r.dead_lettered
FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
        id text, state text, attempt integer, enqueued_at bigint, started_at bigint,
        completed_at bigint, cancelled_at bigint, discarded_at bigint, expired_at bigint,
        next_attempt_at bigint, retry_delay_ms bigint, run_at bigint, worker_id text,
        lease_token text, lease_expires_at bigint, timeout_at bigint, error jsonb,
        errors jsonb, result jsonb, dead_lettered boolean, expected_state text,
        expected_lease_token text
)
WHERE jobs.id = ANY(CAST(:ids AS text[])) AND jobs.id = r.id
  AND jobs.state = r.expected_state
  AND COALESCE(jobs.lease_token, '') = COALESCE(r.expected_lease_token, '')
RETURNING jobs.id;

-- fragment: completed_run
-- The subject, time, data, members and size of the `job.completed` row of a run of acked jobs
-- (a group of rows with place, id, type, queue, duration, attempt and result, one tenant, queue
-- and job type): a run of one is a plain row with its subject and all its data; a longer one
-- keeps its members' ids and their own data in `members`, in ack order (complete_jobs).
CASE WHEN count(*) = 1 THEN min(id) END, :now,
CASE WHEN count(*) > 1 THEN jsonb_build_object('job_type', min(type), 'queue', min(queue))
     ELSE jsonb_build_object(
         'job_type', min(type), 'queue', min(queue), 'duration_ms', min(duration),
         'attempt', min(attempt)
     ) || CASE WHEN count(result) = 0 THEN '{}'
               ELSE jsonb_build_object('result', (array_agg(result))[1]) END
END,
CASE WHEN count(*) > 1 THEN jsonb_build_object(
    'subjects', jsonb_agg(id ORDER BY place),
    'data', jsonb_build_object(
        'duration_ms', jsonb_agg(duration ORDER BY place),
        'attempt', jsonb_agg(attempt ORDER BY place)
    ) || CASE WHEN count(result) = 0 THEN '{}'
              ELSE jsonb_build_object('result', jsonb_agg(result ORDER BY place)) END
) END,
CASE WHEN count(*) > 1 THEN count(*) END

-- name: complete_jobs
-- Acks in one statement (:rows is a JSON array of {id, worker_id, lease_token, result,
-- event_id}): each job is written only while the lease the ack names still holds, as
-- domain/lifecycle.py `check_lease` accepts it (active, the lease unexpired, the token and the
-- worker the ack names, when it names them, the job's own), locked in id order first (two
-- batches over overlapping jobs cannot deadlock). The columns written are the domain's
-- (`completion`: :state, :completed_at, ...) and each ack's result; each job written gets its
-- `job.completed` event, made from the job's columns as domain/events.py `completed_event`
-- makes it, in the order of the acks (`place`): a row a run of consecutive alike jobs (tenant,
-- queue, job type; at most 4,096), named by its first job's ack's `event_id` (a block head), its
-- members' ids (`subjects`) and their own data (`data`: `duration_ms`, `attempt`, `result`, an
-- array each) in `members`, as select_events reads them back (a run of one is a plain row; a job
-- of a subscribed tenant is always one, named by its own ack's id, by which the caller delivers
-- it). No other column is read or
-- written. Rows of kind `job` are the jobs completed, rows of kind `listener` the active
-- webhook subscriptions of their tenants (the caller queues their deliveries in the same
-- transaction). :ids repeats the records' ids for the plan.
WITH r AS MATERIALIZED (
    SELECT * FROM ROWS FROM (jsonb_to_recordset(CAST(:rows AS jsonb)) AS (
        id text, worker_id text, lease_token text, result jsonb, event_id text
    )) WITH ORDINALITY AS r(id, worker_id, lease_token, result, event_id, place)
), held AS MATERIALIZED (
    SELECT jobs.id FROM jobs JOIN r ON r.id = jobs.id
    WHERE jobs.id = ANY(CAST(:ids AS text[]))
      AND (CAST(:tenant_id AS text) IS NULL OR jobs.tenant_id = :tenant_id)
      AND jobs.state = 'active'
      AND (jobs.lease_expires_at IS NULL OR jobs.lease_expires_at > :now)
      AND (r.lease_token IS NULL OR r.lease_token = jobs.lease_token)
      AND (COALESCE(r.worker_id, '') = '' OR COALESCE(jobs.worker_id, '') = ''
           OR r.worker_id = jobs.worker_id)
    ORDER BY jobs.id
    FOR UPDATE OF jobs
), done AS (
    UPDATE jobs SET
        state = :state, completed_at = :completed_at, error = CAST(:error AS jsonb),
        next_attempt_at = :next_attempt_at, lease_token = :lease_token,
        lease_expires_at = :lease_expires_at, timeout_at = :timeout_at, result = r.result
    FROM held, r
    WHERE jobs.id = held.id AND r.id = held.id
    RETURNING jobs.id, jobs.tenant_id, jobs.queue, jobs.type, jobs.attempt, jobs.max_attempts,
        jobs.started_at, jobs.redrive_task_id, jobs.redrive_dead_letter_id, r.result, r.event_id,
        r.place
), listening AS (
    SELECT id, tenant_id, events FROM webhook_subscriptions
    WHERE active AND tenant_id IN (SELECT tenant_id FROM done)
), ordered AS (
    SELECT place, event_id, result, id, tenant_id, queue, type, attempt,
        CASE WHEN COALESCE(started_at, 0) = 0 THEN 0 ELSE :completed_at - started_at END
            AS duration,
        CASE WHEN listened OR lag(listened) OVER ack_order
                  OR tenant_id IS DISTINCT FROM lag(tenant_id) OVER ack_order
                  OR queue IS DISTINCT FROM lag(queue) OVER ack_order
                  OR type IS DISTINCT FROM lag(type) OVER ack_order
                  OR (row_number() OVER ack_order) % 4096 = 1
             THEN 1 ELSE 0 END AS starts
    FROM (
        SELECT done.*, tenant_id IN (SELECT tenant_id FROM listening) AS listened FROM done
    ) AS done
    WINDOW ack_order AS (ORDER BY place)
), runs AS (
    SELECT *, sum(starts) OVER (ORDER BY place ROWS UNBOUNDED PRECEDING) AS run FROM ordered
), shape AS (
    -- The usual ack: every job written alike (one tenant, queue and job type, none of a
    -- subscribed tenant, at most a block), one row made without the windows that split runs.
    SELECT count(*) <= 4096 AND min(tenant_id) = max(tenant_id) AND min(queue) = max(queue)
        AND min(type) = max(type) AND NOT EXISTS (SELECT 1 FROM listening) AS alike
    FROM done
), added AS (
    INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
    SELECT
        (array_agg(event_id ORDER BY place))[1], min(tenant_id), 'job.completed', min(queue),
        min(type), {completed_run}
    FROM (
        SELECT place, event_id, result, id, tenant_id, queue, type, attempt,
            CASE WHEN COALESCE(started_at, 0) = 0 THEN 0 ELSE :completed_at - started_at END
                AS duration
        FROM done
    ) AS done
    WHERE (SELECT alike FROM shape)
    HAVING count(*) > 0
    UNION ALL (
        -- Else a row a run.
        SELECT
            (array_agg(event_id ORDER BY place))[1], tenant_id, 'job.completed', queue, type,
            {completed_run}
        FROM runs
        WHERE NOT (SELECT alike FROM shape)
        GROUP BY run, tenant_id, queue, type
        ORDER BY min(place)
    )
)
SELECT 'job' AS kind, id, tenant_id, queue, type, attempt, max_attempts, started_at,
    redrive_task_id, redrive_dead_letter_id, NULL AS events
FROM done
UNION ALL
SELECT 'listener', id, tenant_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, events
FROM listening;

-- name: select_job
SELECT * FROM jobs WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: select_job_for_update
SELECT * FROM jobs WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
FOR UPDATE;

-- name: select_existing_job_ids
SELECT id FROM jobs
WHERE id = ANY(CAST(:ids AS text[])) AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: select_jobs_for_update
-- Locked in id order, so two batches over overlapping jobs cannot deadlock.
SELECT * FROM jobs
WHERE id = ANY(CAST(:ids AS text[])) AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
ORDER BY id
FOR UPDATE;

-- name: select_jobs
SELECT * FROM jobs
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:queue AS text) IS NULL OR queue = :queue)
  AND (CAST(:state AS text) IS NULL OR state = :state)
  AND (CAST(:type AS text) IS NULL OR type = :type)
ORDER BY sequence DESC
LIMIT :limit OFFSET :offset;

-- name: count_jobs
SELECT COUNT(*) AS count FROM jobs
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:queue AS text) IS NULL OR queue = :queue)
  AND (CAST(:state AS text) IS NULL OR state = :state)
  AND (CAST(:type AS text) IS NULL OR type = :type);

-- name: claim_jobs
-- MATERIALIZED: the pick runs once, so no more than :limit are claimed whatever the plan. Nothing
-- is claimed from a queue the caller's tenant paused (a caller spanning every tenant, :tenant_id
-- NULL: one any tenant paused, as its claim would take that tenant's jobs too). Each job claimed
-- gets its `job.started` event, made from its columns as domain/events.py `started_event` makes
-- it, in the order of the claim, unless its tenant has an active webhook subscription
-- (`listened`): the caller emits those (and queues their deliveries). A row keeps a run of
-- consecutive alike jobs (tenant and job type; at most 4,096), named by the block head at its
-- first job's place (built from :head_prefix and :head_randoms, as retry_dead_letters builds
-- its heads: domain.events.BlockHeads, which holds :limit), its members' ids (`subjects`) and
-- attempts (`data`) in `members`, as select_events reads them back (a run of one is a plain row).
WITH candidates AS MATERIALIZED (
    SELECT id FROM jobs
    WHERE queue = :queue AND state = 'available'
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
      AND (expires_at IS NULL OR expires_at > :now)
      AND NOT EXISTS (
          SELECT 1 FROM queues
          WHERE queues.name = :queue AND queues.paused
            AND (CAST(:tenant_id AS text) IS NULL OR queues.tenant_id = :tenant_id)
      )
    ORDER BY priority DESC, sequence
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs SET
        state = 'active', attempt = attempt + 1, started_at = :now, worker_id = :worker_id,
        lease_token = :lease_token,
        lease_expires_at = :now + COALESCE(CAST(:visibility_timeout_ms AS bigint), visibility_timeout_ms),
        timeout_at = CASE WHEN timeout_ms IS NULL THEN NULL ELSE :now + timeout_ms END,
        run_at = NULL, next_attempt_at = NULL
    FROM candidates WHERE jobs.id = candidates.id
    RETURNING jobs.*, jobs.tenant_id IN (
        SELECT tenant_id FROM webhook_subscriptions WHERE active
    ) AS listened
), ordered AS (
    SELECT id, tenant_id, queue, type, attempt, row_number() OVER claim_order AS place,
        CASE WHEN tenant_id IS DISTINCT FROM lag(tenant_id) OVER claim_order
                  OR type IS DISTINCT FROM lag(type) OVER claim_order
                  OR (row_number() OVER claim_order) % 4096 = 1
             THEN 1 ELSE 0 END AS starts
    FROM claimed
    WHERE NOT listened
    WINDOW claim_order AS (ORDER BY priority DESC, sequence)
), runs AS (
    SELECT *, sum(starts) OVER (ORDER BY place ROWS UNBOUNDED PRECEDING) AS run FROM ordered
), added AS (
    INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
    SELECT
        CAST(:head_prefix AS text)
        || encode(substr(CAST(:head_randoms AS bytea), CAST(min(place) AS integer) * 8 - 7, 2),
                  'hex')
        || '-'
        || encode(substr(CAST(:head_randoms AS bytea), CAST(min(place) AS integer) * 8 - 5, 6),
                  'hex'),
        tenant_id, 'job.started', queue, type,
        CASE WHEN count(*) = 1 THEN min(id) END, :now,
        jsonb_strip_nulls(jsonb_build_object(
            'job_type', type, 'queue', queue, 'worker_id', CAST(:worker_id AS text)
        )) || CASE WHEN count(*) = 1 THEN jsonb_build_object('attempt', min(attempt))
                   ELSE '{}' END,
        CASE WHEN count(*) > 1 THEN jsonb_build_object(
            'subjects', jsonb_agg(id ORDER BY place),
            'data', jsonb_build_object('attempt', jsonb_agg(attempt ORDER BY place))
        ) END,
        CASE WHEN count(*) > 1 THEN count(*) END
    FROM runs
    GROUP BY run, tenant_id, queue, type
    ORDER BY min(place)
)
-- Each claimed job as codec.claimed_jobs reads it: its JSON columns, then the columns the claim
-- did not set (CLAIMED_JOB_COLUMNS), not all 35. Columns, not SQLite's one JSON array: asyncpg
-- decodes a column in C, and json_build_array cost the backend more than it saved the worker.
SELECT envelope, errors, error, result,
    id, tenant_id, queue, type, priority, attempt, timeout_ms, visibility_timeout_ms,
    created_at, enqueued_at, scheduled_at, expires_at, completed_at, cancelled_at, discarded_at,
    expired_at, retry_delay_ms, sequence, dead_lettered, redrive_task_id, redrive_dead_letter_id,
    listened
FROM claimed;

-- name: promote_due_jobs
-- Due jobs of :queues (of every queue when NULL) become available. This WAITS for rows another
-- transaction holds (a sweeper or a fetch promoting them): with SKIP LOCKED a fetch would miss a
-- job that was due before it. Locks are taken in id order, so promoters cannot deadlock.
WITH due AS MATERIALIZED (
    SELECT id FROM jobs
    WHERE state IN ('scheduled', 'retryable') AND run_at <= :now
      AND (CAST(:queues AS text[]) IS NULL OR queue = ANY(CAST(:queues AS text[])))
      AND (expires_at IS NULL OR expires_at > :now)
    ORDER BY id
    FOR UPDATE
)
UPDATE jobs SET state = 'available', enqueued_at = :now, run_at = NULL
FROM due WHERE jobs.id = due.id
RETURNING jobs.queue;

-- name: select_expired_jobs
-- In expiry order, so it walks jobs_expiry and stops at its LIMIT: unordered, a table not yet
-- analysed since a burst was read whole (the planner expects 1 % of rows to match and a
-- sequential scan to find :limit of them first) on every sweep, 5 times a second: 30 ms a tick
-- idle after the peer benchmark's paths (40,000 jobs, 140,000 dead rows), 0.06 in order.
SELECT * FROM jobs
WHERE expires_at <= :now AND state IN ('scheduled', 'available', 'retryable', 'pending')
ORDER BY expires_at
LIMIT :limit FOR UPDATE SKIP LOCKED;

-- name: select_due_work
-- Which of the sweep's every-tick tasks have work at :now (one row of booleans): an idle sweep
-- reads this and nothing else, one statement instead of six transactions. Each jobs probe walks
-- its index in order to its first entry (an EXISTS would be planned like the unordered
-- select_expired_jobs was: a sequential scan on a table not analysed since a burst).
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
LIMIT :limit FOR UPDATE SKIP LOCKED;

-- name: count_jobs_by_queue_and_state
SELECT queue, state, COUNT(*) AS count FROM jobs
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id) AND (CAST(:queue AS text) IS NULL OR queue = :queue)
GROUP BY queue, state;

-- name: count_finished_since
SELECT state, COUNT(*) AS count FROM jobs
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND ((state = 'completed' AND completed_at >= :since)
       OR (state = 'discarded' AND discarded_at >= :since))
GROUP BY state;

-- name: prune_finished_jobs
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
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
        CASE WHEN CAST(:paused AS boolean) THEN CAST(:now AS bigint) END,
        CASE WHEN CAST(:paused AS boolean) THEN NULL ELSE CAST(:now AS bigint) END)
ON CONFLICT (tenant_id, name) DO UPDATE SET
    paused = excluded.paused,
    paused_at = CASE WHEN excluded.paused THEN :now ELSE queues.paused_at END,
    resumed_at = CASE WHEN excluded.paused THEN queues.resumed_at ELSE :now END
RETURNING *;

-- name: select_queues
-- One tenant's queues; every tenant's when :tenant_id is NULL.
SELECT * FROM queues WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
ORDER BY name, tenant_id;

-- name: select_paused_queue_names
-- One tenant's paused queues; those any tenant paused when :tenant_id is NULL.
SELECT DISTINCT name FROM queues
WHERE paused AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: enter_dead_letters
-- Many episodes (:rows) and what they add to their incidents (:incidents) in one statement: the
-- way into the dead-letter queue costs one round trip. The incidents come back as they are after
-- it (the incident id is derived from its key, so the inserts do not depend on each other). Each
-- episode's job snapshot goes to dead_letter_snapshots (migration 0025), with the columns its
-- arrival indexes read (migration 0028).
WITH entered AS (
    INSERT INTO dead_letters (
        id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status,
        moved_at, moved_by, args, replay_count, fingerprint, fingerprint_version, incident_id,
        aggregate_key
    )
    SELECT
        r.id, r.job_id, r.tenant_id, r.queue, r.type, r.error_type, r.reason, r.discarded_at,
        r.status, r.moved_at, r.moved_by, r.args, r.replay_count, r.fingerprint,
        r.fingerprint_version, r.incident_id, r.aggregate_key
    FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
        id text, job_id text, tenant_id text, queue text, type text, error_type text, reason text,
        discarded_at bigint, status text, moved_at bigint, moved_by text, args text,
        replay_count integer, fingerprint text, fingerprint_version integer, incident_id text,
        aggregate_key text
    )
), snapshots AS (
    INSERT INTO dead_letter_snapshots (
        id, tenant_id, job, job_id, queue, discarded_at, incident_id, aggregate_key
    )
    SELECT r.id, r.tenant_id, r.job, r.job_id, r.queue, r.discarded_at, r.incident_id,
        r.aggregate_key
    FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
        id text, tenant_id text, job jsonb, job_id text, queue text, discarded_at bigint,
        incident_id text, aggregate_key text
    )
)
{incident_upsert};

-- fragment: dead_letter_filter
-- Which dead letters a list, count or bulk move means (every filter field; NULL is any).
(CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:queue AS text) IS NULL OR queue = :queue)
  AND (CAST(:type AS text) IS NULL OR type = :type)
  AND (CAST(:type_prefix AS text) IS NULL OR starts_with(type, :type_prefix))
  AND (CAST(:error_type AS text) IS NULL OR error_type = :error_type)
  AND (CAST(:since AS bigint) IS NULL OR discarded_at >= :since)
  AND (CAST(:until AS bigint) IS NULL OR discarded_at <= :until)
  AND (CAST(:args_contains AS text) IS NULL OR strpos(args, :args_contains) > 0)
  AND (CAST(:args_path AS text) IS NULL OR EXISTS (
      SELECT 1 FROM jsonb_array_elements(CAST(args AS jsonb)) AS element
      WHERE jsonb_path_exists(
          element, CAST('strict ' || :args_path || ' ? (@ == $value)' AS jsonpath),
          jsonb_build_object('value', CAST(:args_value AS jsonb)), true)))
  AND (CAST(:replay_count_below AS integer) IS NULL OR replay_count < :replay_count_below)
  AND (CAST(:incident_id AS text) IS NULL OR incident_id = :incident_id)
  AND (CAST(:fingerprint AS text) IS NULL OR fingerprint = :fingerprint)
  AND (CAST(:automatic_only AS boolean) IS NULL OR incident_id IS NULL OR NOT EXISTS (
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
  AND (CAST(:cursor_at AS bigint) IS NULL
       OR (discarded_at, id) < (CAST(:cursor_at AS bigint), CAST(:cursor_id AS text)))
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
  AND (CAST(:cursor_at AS bigint) IS NULL
       OR (discarded_at, id) < (CAST(:cursor_at AS bigint), CAST(:cursor_id AS text)))
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
WHERE job_id = :job_id AND status = 'dead' AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: move_dead_letter
UPDATE dead_letters SET status = :status, moved_at = :now, moved_by = :moved_by
WHERE id = :id AND status = 'dead';

-- name: adjust_dead_letter_tallies
-- Dead letters that entered or left `dead`, in one statement: :rows holds {tenant_id, queue, type,
-- error_type, delta} per tally (each key once), taken in key order so that concurrent
-- transactions lock the tallies in one order.
INSERT INTO dead_letter_tallies (tenant_id, queue, type, error_type, count)
SELECT r.tenant_id, r.queue, r.type, r.error_type, r.delta
FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
    tenant_id text, queue text, type text, error_type text, delta bigint
)
ORDER BY r.tenant_id, r.queue, r.type, r.error_type
ON CONFLICT (tenant_id, queue, type, error_type)
DO UPDATE SET count = dead_letter_tallies.count + excluded.count;

-- name: select_dead_letter_tallies
SELECT queue, type, error_type, SUM(count) AS count FROM dead_letter_tallies
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id) AND count <> 0
GROUP BY queue, type, error_type;

-- name: count_dead_letter_tallies_by_queue
-- The live dead letters the tallies count per queue for a filter of the tallied fields (NULL is
-- any; a tally's error_type is '' where the dead letter has none): ~20 rows where reading every
-- tally (~500 at the bench's 50 types and 10 error types) and filtering them in Python cost a
-- list page ~1 ms.
SELECT queue, CAST(SUM(count) AS bigint) AS count FROM dead_letter_tallies
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id) AND count <> 0
  AND (CAST(:queue AS text) IS NULL OR queue = :queue)
  AND (CAST(:type AS text) IS NULL OR type = :type)
  AND (CAST(:type_prefix AS text) IS NULL OR starts_with(type, :type_prefix))
  AND (CAST(:error_type AS text) IS NULL OR error_type = :error_type)
GROUP BY queue;

-- name: dead_letter_time_range
SELECT MIN(discarded_at) AS oldest_at, MAX(discarded_at) AS newest_at
FROM dead_letters WHERE status = 'dead' AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: select_dead_letter_episodes
-- Every episode of the job: its dead letters and history (found by their snapshots' index:
-- migration 0028), and the tombstones of those pruned.
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, {snapshot},
       moved_at, moved_by, replay_count, fingerprint, fingerprint_version, incident_id,
       aggregate_key
FROM dead_letters
WHERE id IN (SELECT id FROM dead_letter_snapshots WHERE job_id = :job_id)
  AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
UNION ALL
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, job,
       moved_at, moved_by, replay_count, fingerprint, fingerprint_version, incident_id,
       aggregate_key
FROM dead_letter_tombstones WHERE job_id = :job_id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
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
-- (`redrive dlq ls --status pruned` lists them). The batch is picked once (a materialised CTE:
-- see move_dead_letters); rows another transaction holds are skipped. Returns the tally columns
-- as they were (status dead).
WITH picked AS MATERIALIZED (
    SELECT ctid FROM dead_letters
    WHERE status = 'dead' AND discarded_at < :before AND {not_held}
      AND (CAST(:queue AS text) IS NULL OR queue = :queue) AND (CAST(:excluded_queues AS text[]) IS NULL OR queue <> ALL(CAST(:excluded_queues AS text[])))
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
), gone AS (
    -- By the picked rows' places (locked, they stay put): a scan of the whole table otherwise.
    DELETE FROM dead_letters WHERE ctid = ANY(ARRAY(SELECT ctid FROM picked))
    RETURNING id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, replay_count,
        fingerprint, fingerprint_version, incident_id, aggregate_key, {tombstone_snapshot}
), snapshots AS (
    DELETE FROM dead_letter_snapshots WHERE id = ANY(ARRAY(SELECT id FROM gone))
), tombstones AS (
    {insert_pruned_tombstones}
)
SELECT id, tenant_id, queue, type, error_type, CAST('dead' AS text) AS status, incident_id
FROM gone;

-- fragment: insert_tombstones
-- The tombstones of the dead letters in `gone`.
INSERT INTO dead_letter_tombstones (
    id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, job, moved_at,
    moved_by, replay_count, fingerprint, fingerprint_version, incident_id, aggregate_key
)
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, :status,
       job || jsonb_build_object('args', CAST('[]' AS jsonb), 'meta', CAST('{}' AS jsonb),
           'errors', CAST('[]' AS jsonb), 'error', NULL, 'extra', CAST('{}' AS jsonb),
           'result', NULL),
       :now, :moved_by, replay_count, fingerprint, fingerprint_version, incident_id, aggregate_key
FROM gone

-- fragment: tombstone_snapshot
-- The job snapshot of the dead_letters row at hand as its tombstone keeps it (the job without
-- its args, meta, errors and result), as the column `job`. A prune's `gone` carries this, not
-- the whole snapshot: 5,000 whole snapshots (~1.6 kB each) outgrew work_mem and the CTE,
-- read three times, went through a temporary file (9 MB written a batch).
(SELECT snapshot.job || jsonb_build_object('args', CAST('[]' AS jsonb), 'meta', CAST('{}' AS jsonb),
        'errors', CAST('[]' AS jsonb), 'error', NULL, 'extra', CAST('{}' AS jsonb),
        'result', NULL)
    FROM dead_letter_snapshots AS snapshot WHERE snapshot.id = dead_letters.id) AS job

-- fragment: insert_pruned_tombstones
-- The tombstones of the dead letters in `gone`, whose `job` is the tombstone's already.
INSERT INTO dead_letter_tombstones (
    id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status, job, moved_at,
    moved_by, replay_count, fingerprint, fingerprint_version, incident_id, aggregate_key
)
SELECT id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, :status, job,
       :now, :moved_by, replay_count, fingerprint, fingerprint_version, incident_id, aggregate_key
FROM gone

-- name: archive_dead_letters_by_age
-- The whole rows an age prune archives: dead letters and their history (the tombstones live
-- in a table of their own).
SELECT *, {snapshot} FROM dead_letters
WHERE discarded_at < :before AND {not_held}
  AND (CAST(:queue AS text) IS NULL OR queue = :queue) AND (CAST(:excluded_queues AS text[]) IS NULL OR queue <> ALL(CAST(:excluded_queues AS text[])))
LIMIT :limit
    FOR UPDATE SKIP LOCKED;

-- name: prune_oldest_dead_letters
-- The oldest dead letters past the floor (:before; NULL: any), tombstoned as above.
WITH picked AS MATERIALIZED (
    SELECT ctid FROM dead_letters
    WHERE status = 'dead' AND (CAST(:before AS bigint) IS NULL OR discarded_at < :before) AND {not_held}
      AND (CAST(:queue AS text) IS NULL OR queue = :queue) AND (CAST(:excluded_queues AS text[]) IS NULL OR queue <> ALL(CAST(:excluded_queues AS text[])))
    ORDER BY discarded_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
), gone AS (
    -- By the picked rows' places (locked, they stay put): a scan of the whole table otherwise.
    DELETE FROM dead_letters WHERE ctid = ANY(ARRAY(SELECT ctid FROM picked))
    RETURNING id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, replay_count,
        fingerprint, fingerprint_version, incident_id, aggregate_key, {tombstone_snapshot}
), snapshots AS (
    DELETE FROM dead_letter_snapshots WHERE id = ANY(ARRAY(SELECT id FROM gone))
), tombstones AS (
    {insert_pruned_tombstones}
)
SELECT id, tenant_id, queue, type, error_type, CAST('dead' AS text) AS status, incident_id
FROM gone;

-- name: archive_oldest_dead_letters
SELECT *, {snapshot} FROM dead_letters
WHERE status = 'dead' AND (CAST(:before AS bigint) IS NULL OR discarded_at < :before) AND {not_held}
  AND (CAST(:queue AS text) IS NULL OR queue = :queue) AND (CAST(:excluded_queues AS text[]) IS NULL OR queue <> ALL(CAST(:excluded_queues AS text[])))
ORDER BY discarded_at, id
LIMIT :limit
    FOR UPDATE SKIP LOCKED;

-- name: tombstone_dead_letters
-- The archived dead letters (:ids) leave their tombstones; their history rows go.
WITH deleted AS (
    DELETE FROM dead_letters WHERE id = ANY(CAST(:ids AS text[])) RETURNING *, {snapshot}
), snapshots AS (
    DELETE FROM dead_letter_snapshots WHERE id = ANY(ARRAY(SELECT id FROM deleted))
), gone AS (
    SELECT * FROM deleted WHERE status = 'dead'
)
{insert_tombstones};

-- name: delete_old_episodes
-- What an age prune deletes outright: history episodes (retried, replayed, deleted) that died
-- before :before, and tombstones pruned before it (kept as long as the policy keeps dead
-- letters); up to :limit of each.
WITH episodes AS (
    DELETE FROM dead_letters WHERE id IN (
        SELECT id FROM dead_letters
        WHERE status <> 'dead' AND discarded_at < :before AND {not_held}
          AND (CAST(:queue AS text) IS NULL OR queue = :queue) AND (CAST(:excluded_queues AS text[]) IS NULL OR queue <> ALL(CAST(:excluded_queues AS text[])))
        LIMIT :limit
    )
    RETURNING id, tenant_id, queue, type, error_type, status, incident_id
), snapshots AS (
    DELETE FROM dead_letter_snapshots WHERE id = ANY(ARRAY(SELECT id FROM episodes))
), tombstones AS (
    DELETE FROM dead_letter_tombstones WHERE id IN (
        SELECT id FROM dead_letter_tombstones AS dead_letters
        WHERE moved_at < :before AND {not_held}
          AND (CAST(:queue AS text) IS NULL OR queue = :queue) AND (CAST(:excluded_queues AS text[]) IS NULL OR queue <> ALL(CAST(:excluded_queues AS text[])))
        LIMIT :limit
    )
    RETURNING id, tenant_id, queue, type, error_type, status, incident_id
)
SELECT * FROM episodes UNION ALL SELECT * FROM tombstones;

-- name: delete_archived_tombstone
-- Restoring an archived dead letter replaces its tombstone.
DELETE FROM dead_letter_tombstones WHERE id = :id AND status = 'archived';

-- name: restore_dead_letter
-- The dead letter and its snapshot, unless the dead letter is there already.
WITH restored AS (
    INSERT INTO dead_letters (
        id, job_id, tenant_id, queue, type, error_type, reason, discarded_at, status,
        moved_at, moved_by, args, replay_count, fingerprint, fingerprint_version, incident_id,
        aggregate_key
    ) VALUES (
        :id, :job_id, :tenant_id, :queue, :type, :error_type, :reason, :discarded_at, :status,
        :moved_at, :moved_by, :args, :replay_count, :fingerprint, :fingerprint_version,
        :incident_id, :aggregate_key
    ) ON CONFLICT DO NOTHING
    RETURNING id, tenant_id, job_id, queue, discarded_at, incident_id, aggregate_key
), snapshot AS (
    INSERT INTO dead_letter_snapshots (
        id, tenant_id, job, job_id, queue, discarded_at, incident_id, aggregate_key
    )
    SELECT id, tenant_id, CAST(:job AS jsonb), job_id, queue, discarded_at, incident_id,
        aggregate_key
    FROM restored
)
SELECT id FROM restored;

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
    :id, :tenant_id, :name, CAST(:filter AS jsonb), :delay_ms, :max_replays, :enabled,
    :replayed_total, :created_at, :updated_at
) ON CONFLICT (id) DO UPDATE SET
    name = excluded.name, filter = excluded.filter, delay_ms = excluded.delay_ms,
    max_replays = excluded.max_replays, enabled = excluded.enabled,
    updated_at = excluded.updated_at;

-- name: select_replay_rules
SELECT * FROM replay_rules WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id) ORDER BY name;

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
-- statement: the status flip is the exactly-once guard of bulk retry and purge. Rows another
-- transaction holds are skipped, never waited for, so bulk operations can run side by side.
-- Returns what tallies, events and requeueing need, never the snapshot. The pick is a
-- materialised CTE: as an IN (subquery) the planner may run it again per row, and each run
-- skips the rows this statement already changed and locks the next ones, past :limit.
WITH picked AS MATERIALIZED (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND {dead_letter_filter}
      AND (CAST(:moved_to AS text) <> 'deleted' OR {not_held})
    ORDER BY discarded_at DESC, id DESC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE dead_letters SET status = :moved_to, moved_at = :now, moved_by = :moved_by
FROM picked WHERE dead_letters.id = picked.id AND dead_letters.status = 'dead'
RETURNING dead_letters.id, job_id, tenant_id, queue, type, error_type, incident_id, discarded_at;

-- name: select_dead_letters_by_id
SELECT *, {snapshot} FROM dead_letters WHERE id = ANY(CAST(:ids AS text[]));

-- fragment: redriven_job
-- The set-based form of domain.dead_letter.redrive(): what a dead job's row becomes when it goes
-- back to its queue; a test keeps the two in step.
state = 'available', attempt = 0, enqueued_at = :now, error = NULL, completed_at = NULL,
discarded_at = NULL, started_at = NULL, next_attempt_at = NULL, retry_delay_ms = NULL,
worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, timeout_at = NULL,
result = NULL, dead_lettered = FALSE, run_at = NULL

-- name: redrive_jobs
-- Dead jobs whose rows are still in the jobs table back in their queues; a redrive task's
-- (:task_id) carry its id and their item's dead letter, in the same write (a job redriven
-- without a task keeps those it had).
UPDATE jobs SET {redriven_job}, {redriven_by_task}
WHERE id = ANY(CAST(:ids AS text[])) AND state = 'discarded' AND dead_lettered
RETURNING id;

-- name: select_dead_letter_ids
-- The ids of the dead episodes matching the filter, newest first, up to :limit, but for those
-- :excluded (a bulk retry's earlier rounds skipped them): the set a bulk retry's round moves,
-- read once. (Picked by filter per chunk instead, each chunk sorted every match left: planned
-- without statistics, the pick read the tenant's index and sorted, so 100,000 took 5 million
-- rows read and sorted.) One row, `ids` their comma-separated text (20,000 ids as rows took
-- 28 ms of the caller's CPU to read, as one text 4), joined by string_agg in the order the
-- sorted subquery hands them over (PostgreSQL's documented way to feed an aggregate in order:
-- nothing but the aggregate sits above the subquery to reorder its rows). array_to_string of an
-- ARRAY() built the array, then the text: 20,000 ids took the backend 7.7 ms, now 5.2. No match
-- gives NULL, as the empty array's '' did nothing: the caller reads either as no id.
SELECT string_agg(id, ',') AS ids FROM (
    SELECT id FROM dead_letters
    WHERE status = 'dead' AND {dead_letter_filter}
      AND id <> ALL(CAST(:excluded AS text[]))
    ORDER BY discarded_at DESC, id DESC
    LIMIT :limit
) AS chosen;

-- name: retry_dead_letters
-- A chunk of a retry in one statement: the chosen episodes (:ids) still dead leave `dead` for
-- `retried` (the exactly-once guard; rows another transaction holds are skipped, never waited
-- for), their jobs go back to their queues in place where the job's row is still in the jobs
-- table (types in :upcast_types excepted: the caller upcasts those), carrying the redrive task
-- :task_id if one moves them (else keeping the id they had), their queues exist, and the moved
-- episodes' `dead_letter.retried` events are written, a row a block (see `added`; the block head
-- of the chosen episode at place p (from 1) is :head_prefix, then in hex the 2 and, after a
-- dash, the 6 bytes from (p - 1) * 8 of :head_randoms, a bytea (domain.events.BlockHeads; a
-- text's substr in a UTF-8 database walks it from its start: ~140 us a call); the events
-- domain.events.episode_event makes, ids as domain.events.retried_event_ids; a test keeps them
-- in step). A task (:task_id) passes the dead letters whose items claim_pending_redrive_items
-- took in this transaction (the claim is the pending check: a cancel let go of the rest); those
-- the pick then skips (no longer dead, or held by another transaction) are
-- returned as `skipped`, for
-- skip_redrive_items to set right in the same transaction. Returns one by one the moved episodes
-- whose job this statement did not put back and every moved episode of a tenant with an active
-- webhook subscription (`requeued` saying whose job it put back; never the snapshot), the others
-- counted by tenant, queue, type, error type and incident (`requeued` rows: their callers only
-- count them, and 20,000 rows one by one took 0.1 s of a producer's CPU to read and count), the
-- active webhook subscriptions of the moved episodes' tenants, and the chosen episodes (a task's:
-- the items claimed) it skipped. The pick is materialised (see move_dead_letters). :ids come as
-- their comma-separated text (the executor's ids_parameter).
WITH chosen AS (
    SELECT id FROM unnest(string_to_array(CAST(:ids AS text), ',')) AS chosen(id)
), picked AS MATERIALIZED (
    -- Each id probed by key (a lateral subquery that locks is never flattened into a join): as
    -- = ANY(:ids), planned without statistics, the pick scanned every dead letter through a
    -- partial index and compared each with every id.
    SELECT dead.id, dead.ctid FROM chosen
    CROSS JOIN LATERAL (
        SELECT id, ctid FROM dead_letters
        WHERE dead_letters.id = chosen.id AND status = 'dead'
        FOR UPDATE SKIP LOCKED
    ) AS dead
), moved AS (
    -- (The picked rows, locked, by their addresses: joined to picked by id, the planner, which
    -- takes it for thousands of rows, scanned every dead letter, and an array of 50,000 ids took
    -- 1.3 s of key lookups. A row another transaction changed since fails the status guard.)
    UPDATE dead_letters SET status = 'retried', moved_at = :now, moved_by = :moved_by
    WHERE ctid = ANY(ARRAY(SELECT ctid FROM picked)) AND status = 'dead'
    RETURNING id, job_id, tenant_id, queue, type, error_type, incident_id, discarded_at
), requeued AS (
    UPDATE jobs SET {redriven_job},
        redrive_task_id = COALESCE(CAST(:task_id AS text), jobs.redrive_task_id),
        redrive_dead_letter_id = CASE WHEN CAST(:task_id AS text) IS NULL
            THEN jobs.redrive_dead_letter_id ELSE moved.id END
    FROM moved
    WHERE jobs.id = moved.job_id AND jobs.state = 'discarded' AND jobs.dead_lettered
      AND moved.type <> ALL(CAST(:upcast_types AS text[]))
    RETURNING moved.*
), queued AS (
    INSERT INTO queues (name, tenant_id, created_at)
    SELECT DISTINCT queue, tenant_id, CAST(:now AS bigint) FROM moved
    ON CONFLICT (tenant_id, name) DO NOTHING
), added AS (
    -- A row a block of the moved episodes' events alike in tenant, queue and job type, among
    -- the same 4,096 chosen (a block's most), as enqueue writes its runs (migration 0031): its
    -- members (`subjects`, and each one's `episodes`) in the chosen order, named by the event
    -- id chosen for its first. (A row of its own each, with its two index entries, was 32 of a
    -- chunk of 5,000's 168 ms of backend time.) Only the blocks' heads are built here: the
    -- caller's list of every chosen episode's took ~9 ms of its CPU to make a chunk of 5,000.
    INSERT INTO events (id, tenant_id, type, queue, job_type, time, data, members, size)
    SELECT
        CAST(:head_prefix AS text)
        || encode(substr(CAST(:head_randoms AS bytea),
                         CAST(min(chosen.place) AS integer) * 8 - 7, 2), 'hex')
        || '-'
        || encode(substr(CAST(:head_randoms AS bytea),
                         CAST(min(chosen.place) AS integer) * 8 - 5, 6), 'hex'),
        moved.tenant_id,
        'dead_letter.retried', moved.queue, moved.type, CAST(:now AS bigint),
        jsonb_build_object('job_type', moved.type, 'queue', moved.queue,
                           'moved_by', CAST(:moved_by AS text)),
        jsonb_build_object('subjects', to_jsonb(array_agg(moved.job_id ORDER BY chosen.place)),
                           'episodes', to_jsonb(array_agg(moved.id ORDER BY chosen.place))),
        count(*)
    FROM moved
    JOIN unnest(string_to_array(CAST(:ids AS text), ',')) WITH ORDINALITY AS chosen(id, place)
        ON chosen.id = moved.id
    GROUP BY moved.tenant_id, moved.queue, moved.type, (chosen.place - 1) / 4096
    ORDER BY min(chosen.place)
), listening AS MATERIALIZED (
    SELECT id, tenant_id, events FROM webhook_subscriptions
    WHERE active AND tenant_id IN (SELECT tenant_id FROM moved)
)
-- What each part needs is read only when it can hold a row: its gate (a count, or whether any
-- subscription listens) is a one-time filter, so the usual chunk, every episode moved and put
-- back in place and no listener, scans requeued once, to group it. (All of them from one
-- materialised `told`, the moved episodes each flagged by two hashed subplans, with `chosen`
-- kept and probed against `moved` for the skipped: 1.5 of a chunk's 18 us of backend CPU an
-- episode, 0.6 of it saved.) A put-back episode's row comes from `requeued` (its RETURNING
-- carries the moved columns): an IN on requeued in a WHERE would be pulled up into a join,
-- planned with the CTEs' one-row guesses as a loop over requeued per row. The ones not put
-- back, by NOT IN (kept a hashed subplan): requeued holds at most one row a moved episode
-- (one dead episode a job), so equal counts mean every one was put back.
SELECT 'moved' AS kind, id, job_id, tenant_id, queue, type, error_type, incident_id,
    discarded_at, FALSE AS requeued, NULL AS events, 1 AS count
FROM moved
WHERE (SELECT count(*) FROM requeued) < (SELECT count(*) FROM moved)
  AND id NOT IN (SELECT id FROM requeued)
UNION ALL
SELECT 'moved', id, job_id, tenant_id, queue, type, error_type, incident_id, discarded_at, TRUE,
    NULL, 1
FROM requeued
WHERE EXISTS (SELECT FROM listening) AND tenant_id IN (SELECT tenant_id FROM listening)
UNION ALL
SELECT 'requeued', NULL, NULL, tenant_id, queue, type, error_type, incident_id, NULL, TRUE,
    NULL, COUNT(*)
FROM requeued WHERE tenant_id NOT IN (SELECT tenant_id FROM listening)
GROUP BY tenant_id, queue, type, error_type, incident_id
UNION ALL
SELECT 'listener', id, NULL, tenant_id, NULL, NULL, NULL, NULL, NULL, NULL, events, NULL
FROM listening
UNION ALL
SELECT 'skipped', id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM unnest(string_to_array(CAST(:ids AS text), ',')) AS chosen(id)
WHERE (SELECT count(*) FROM moved) < cardinality(string_to_array(CAST(:ids AS text), ','))
  AND id NOT IN (SELECT id FROM moved);

-- name: skip_redrive_items
-- A task's items that claim_pending_redrive_items took but whose dead letters retry_dead_letters
-- skipped (see there; an age prune may have deleted one): skipped, in a row of their own, as
-- their pin blocks name them (an item moved before migration 0046 has its row already, `moved`).
INSERT INTO redrive_task_items AS item (
    task_id, tenant_id, dead_letter_id, job_id, queue, incident_id, state
)
SELECT :task_id, pin.tenant_id, skipped.id, pin.job_ids[skipped.at], pin.queue, pin.incident_id,
    'skipped'
FROM redrive_task_pins AS pin
CROSS JOIN unnest(pin.dead_letter_ids) WITH ORDINALITY AS skipped(id, at)
WHERE pin.task_id = :task_id AND skipped.id = ANY(CAST(:ids AS text[]))
ORDER BY skipped.id
ON CONFLICT (task_id, dead_letter_id) DO UPDATE SET state = 'skipped'
WHERE item.state = 'moved';

-- name: delete_dead_jobs
DELETE FROM jobs WHERE id = ANY(CAST(:ids AS text[])) AND state = 'discarded' AND dead_lettered;

-- fragment: incident_upsert
-- What a batch of dead letters adds to their incidents (:incidents, one per incident, in id order,
-- so concurrent batches lock incidents in one order). A new incident is created open; an existing
-- one adds the counts, widens first and last seen and its queues and takes the newest sample;
-- with :regress (dead letters arriving now, not a backfill) a resolved one regresses. When this
-- statement opened or regressed an incident, `state_changed_by` names the batch's arrival.
INSERT INTO incidents (
    id, tenant_id, type, fingerprint, fingerprint_version, error_type, message, state,
    dead_count, total_count, first_seen_at, last_seen_at, queues, sample_dead_letter_id,
    state_changed_at, state_changed_by, classification
)
SELECT
    r.id, r.tenant_id, r.type, r.fingerprint, r.fingerprint_version, r.error_type, r.message,
    'open', r.dead_count, r.total_count, r.first_seen_at, r.last_seen_at, r.queues,
    r.sample_dead_letter_id, r.first_seen_at, r.arrival, r.classification
FROM jsonb_to_recordset(CAST(:incidents AS jsonb)) AS r(
    id text, tenant_id text, type text, fingerprint text, fingerprint_version integer,
    error_type text, message text, dead_count bigint, total_count bigint, first_seen_at bigint,
    last_seen_at bigint, queues jsonb, sample_dead_letter_id text, arrival text,
    classification text
)
ORDER BY r.id
ON CONFLICT (id) DO UPDATE SET
    dead_count = incidents.dead_count + excluded.dead_count,
    total_count = incidents.total_count + excluded.total_count,
    first_seen_at = LEAST(incidents.first_seen_at, excluded.first_seen_at),
    last_seen_at = GREATEST(incidents.last_seen_at, excluded.last_seen_at),
    queues = CASE WHEN incidents.queues @> excluded.queues THEN incidents.queues ELSE (
        SELECT jsonb_agg(DISTINCT queue ORDER BY queue)
        FROM jsonb_array_elements_text(incidents.queues || excluded.queues) AS queue) END,
    sample_dead_letter_id = CASE WHEN excluded.last_seen_at >= incidents.last_seen_at
        THEN excluded.sample_dead_letter_id ELSE incidents.sample_dead_letter_id END,
    state = CASE WHEN incidents.state = 'resolved' AND CAST(:regress AS boolean)
        THEN 'regressed' ELSE incidents.state END,
    state_changed_at = CASE WHEN incidents.state = 'resolved' AND CAST(:regress AS boolean)
        THEN excluded.last_seen_at ELSE incidents.state_changed_at END,
    state_changed_by = CASE WHEN incidents.state = 'resolved' AND CAST(:regress AS boolean)
        THEN excluded.state_changed_by ELSE incidents.state_changed_by END
RETURNING *

-- name: upsert_incidents
-- Dead letters from before incidents, counted in their incidents (the backfill).
{incident_upsert};

-- name: adjust_incident_counts
-- Dead letters that left `dead` (or came back to it): :rows holds {id, delta} per incident. The
-- rows are locked in id order first, the order upsert_incidents takes them in.
WITH changes AS MATERIALIZED (
    SELECT r.id, r.delta FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(id text, delta bigint)
), locked AS MATERIALIZED (
    SELECT incidents.id FROM incidents JOIN changes ON changes.id = incidents.id
    ORDER BY incidents.id
    FOR UPDATE OF incidents
)
UPDATE incidents SET dead_count = incidents.dead_count + changes.delta
FROM changes JOIN locked ON locked.id = changes.id
WHERE incidents.id = changes.id;

-- fragment: incident_filter
-- Which incidents a list means (NULL is any).
(CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:states AS text[]) IS NULL OR state = ANY(CAST(:states AS text[])))
  AND (CAST(:type AS text) IS NULL OR type = :type)
  AND (CAST(:type_prefix AS text) IS NULL OR starts_with(type, :type_prefix))
  AND (CAST(:queue AS text) IS NULL OR queues @> jsonb_build_array(CAST(:queue AS text)))
  AND (CAST(:error_type AS text) IS NULL OR error_type = :error_type)

-- name: select_incidents_recent
SELECT * FROM incidents
WHERE {incident_filter}
  AND (CAST(:cursor_value AS bigint) IS NULL
       OR (last_seen_at, id) < (CAST(:cursor_value AS bigint), CAST(:cursor_id AS text)))
ORDER BY last_seen_at DESC, id DESC
LIMIT :limit;

-- name: select_incidents_by_count
SELECT * FROM incidents
WHERE {incident_filter}
  AND (CAST(:cursor_value AS bigint) IS NULL
       OR (dead_count, id) < (CAST(:cursor_value AS bigint), CAST(:cursor_id AS text)))
ORDER BY dead_count DESC, id DESC
LIMIT :limit;

-- name: select_incident
SELECT * FROM incidents
WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: count_incident_arrivals
-- The dead letters (in any status now) that arrived at each incident of :ids in [:start, :end),
-- per bucket of :width ms (0 the oldest); empty buckets are absent. One index-only range scan
-- per incident on dead_letter_snapshots_incident_arrivals (a snapshot per dead letter, whatever
-- its status), and the tombstones of the range (a range scan per status: few are that young).
SELECT incident_id, (discarded_at - CAST(:start AS bigint)) / CAST(:width AS bigint) AS bucket,
       COUNT(*) AS count
FROM (
    SELECT incident_id, discarded_at FROM dead_letter_snapshots
    WHERE incident_id = ANY(CAST(:ids AS text[]))
      AND discarded_at >= CAST(:start AS bigint) AND discarded_at < CAST(:end AS bigint)
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
    UNION ALL
    SELECT incident_id, discarded_at FROM dead_letter_tombstones
    WHERE status IN ('pruned', 'archived') AND incident_id = ANY(CAST(:ids AS text[]))
      AND discarded_at >= CAST(:start AS bigint) AND discarded_at < CAST(:end AS bigint)
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
) AS arrived
GROUP BY incident_id, bucket;

-- name: change_incident_state
-- Guarded by the state the change was decided from: no row means someone changed it meanwhile.
UPDATE incidents SET
    state = :state, fix_reference = :fix_reference, state_changed_at = :changed_at,
    state_changed_by = :changed_by
WHERE id = :id AND state = :expected_state
  AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: classify_incident
UPDATE incidents SET classification = :classification, classified_by = :classified_by
WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: count_dead_by_incident_class
-- Dead letters held now per incident class, across tenants (one row per incident read).
SELECT classification, SUM(dead_count) AS count FROM incidents GROUP BY classification;

-- name: select_root_cause
SELECT * FROM root_causes
WHERE incident_id = :incident_id
  AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

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
-- one probe of the incident index per incident left to explain, whatever the dead letters, and
-- one of dead_letters_by_incident for those in none (see the last part).
(SELECT incidents.id AS id, incidents.message AS message,
        incidents.classification AS classification
 FROM incidents
 WHERE (CAST(:tenant_id AS text) IS NULL OR incidents.tenant_id = :tenant_id)
   AND incidents.dead_count > 0
   -- What the incident row alone rules out (its queues only ever widen), before any probe.
   AND (CAST(:incident_id AS text) IS NULL OR incidents.id = :incident_id)
   AND (CAST(:type AS text) IS NULL OR incidents.type = :type)
   AND (CAST(:type_prefix AS text) IS NULL OR starts_with(incidents.type, :type_prefix))
   AND (CAST(:queue AS text) IS NULL
        OR incidents.queues @> jsonb_build_array(CAST(:queue AS text)))
   AND (CAST(:fingerprint AS text) IS NULL OR incidents.fingerprint = :fingerprint)
   AND (incidents.classification = 'poison_pill' OR NOT EXISTS (
       SELECT 1 FROM root_causes
       WHERE root_causes.incident_id = incidents.id AND root_causes.fix_reference IS NOT NULL))
   -- The incident's first match, if any (see below).
   AND (SELECT TRUE FROM dead_letters
        WHERE dead_letters.incident_id = incidents.id AND status = :status
          AND {dead_letter_filter}
        ORDER BY dead_letters.incident_id, dead_letters.discarded_at DESC
        LIMIT 1)
 ORDER BY incidents.dead_count DESC, incidents.id
 LIMIT :limit)
UNION ALL
-- (Both probes are subqueries with an ORDER BY and LIMIT 1, where an EXISTS would drop both:
-- planned without statistics, the EXISTS read the matches through the tenant's index, every one
-- of them to find none in no incident (20,000 rows, 2.5-3.7 ms of backend time in a retry of
-- 20,000, which checks twice), and at 100,000 built a bitmap of all of them before taking the
-- incident's first (8.5 ms). Ordered as dead_letters_by_incident keeps them, each plan stops at
-- the first match, and the one for dead letters in no incident reads that index from its NULL
-- entries. Planned for the values: see CUSTOM_PLANS.)
SELECT NULL, NULL, NULL FROM (
    SELECT 1 FROM dead_letters
    WHERE status = :status AND dead_letters.incident_id IS NULL AND {dead_letter_filter}
    ORDER BY dead_letters.incident_id
    LIMIT 1
) AS in_no_incident;

-- name: select_unexplained_incidents_by_error
-- The same for a filter that names an error type and nothing an incident row could rule out:
-- the incidents its dead letters belong to are read from those dead letters (the error-type
-- index), then the ones left to explain kept; probing every incident would read them all.
WITH touched AS MATERIALIZED (
    SELECT DISTINCT incident_id FROM dead_letters WHERE status = :status AND {dead_letter_filter}
)
(SELECT incidents.id AS id, incidents.message AS message,
        incidents.classification AS classification
 FROM incidents JOIN touched ON touched.incident_id = incidents.id
 WHERE (CAST(:tenant_id AS text) IS NULL OR incidents.tenant_id = :tenant_id)
   AND (incidents.classification = 'poison_pill' OR NOT EXISTS (
       SELECT 1 FROM root_causes
       WHERE root_causes.incident_id = incidents.id AND root_causes.fix_reference IS NOT NULL))
 ORDER BY incidents.dead_count DESC, incidents.id
 LIMIT :limit)
UNION ALL
SELECT NULL, NULL, NULL WHERE EXISTS (SELECT 1 FROM touched WHERE incident_id IS NULL);

-- name: select_unexplained_among
-- Of these incidents (:ids), those that lack a root cause with a fix reference or are poison
-- pills (an id with no incident row is left out: the caller names it).
SELECT incidents.id AS id, incidents.message AS message,
       incidents.classification AS classification
FROM incidents
WHERE incidents.id = ANY(CAST(:ids AS text[]))
  AND (CAST(:tenant_id AS text) IS NULL OR incidents.tenant_id = :tenant_id)
  AND (incidents.classification = 'poison_pill' OR NOT EXISTS (
      SELECT 1 FROM root_causes
      WHERE root_causes.incident_id = incidents.id AND root_causes.fix_reference IS NOT NULL))
ORDER BY incidents.id;

-- name: select_unfingerprinted_dead_letters
-- Episodes from before incidents (a partial index holds exactly these), oldest id first; rows
-- another backfill holds are skipped.
SELECT *, {snapshot} FROM dead_letters WHERE fingerprint IS NULL
ORDER BY id
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: fingerprint_dead_letters
-- Those episodes fingerprinted and named to their incidents (their snapshots too, whose
-- arrival index reads it); returns the ids written.
WITH written AS (
    UPDATE dead_letters SET
        fingerprint = r.fingerprint, fingerprint_version = r.fingerprint_version,
        incident_id = r.incident_id
    FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
        id text, fingerprint text, fingerprint_version integer, incident_id text
    )
    WHERE dead_letters.id = r.id AND dead_letters.fingerprint IS NULL
    RETURNING dead_letters.id, dead_letters.incident_id
), snapshots AS (
    UPDATE dead_letter_snapshots AS snapshot SET incident_id = written.incident_id
    FROM written WHERE snapshot.id = written.id
)
SELECT id FROM written;

-- name: upsert_worker
INSERT INTO workers (
    id, tenant_id, state, queues, active_jobs, first_seen_at, last_heartbeat_at
) VALUES (:id, :tenant_id, 'running', CAST(:queues AS jsonb), :active_jobs, :now, :now)
ON CONFLICT (tenant_id, id) DO UPDATE SET
    last_heartbeat_at = :now,
    active_jobs = excluded.active_jobs,
    queues = CASE WHEN excluded.queues = '[]'::jsonb THEN workers.queues ELSE excluded.queues END
RETURNING *;

-- name: set_worker_directive
UPDATE workers SET directive = :directive, state = :state
WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: select_workers
SELECT * FROM workers WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
ORDER BY id, tenant_id;

-- name: upsert_cron
INSERT INTO crons (
    name, tenant_id, definition, enabled, next_run_at, last_run_at, last_job_id, run_count,
    created_at
) VALUES (
    :name, :tenant_id, CAST(:definition AS jsonb), :enabled, :next_run_at, :last_run_at, :last_job_id,
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
-- the caller queues their deliveries in the same transaction): one round trip.
WITH added AS (
    INSERT INTO events (id, tenant_id, type, queue, job_type, subject, time, data, members, size)
    SELECT r.id, r.tenant_id, r.type, r.queue, r.job_type, r.subject, r.time, r.data, r.members,
        r.size
    FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
        id text, tenant_id text, type text, queue text, job_type text, subject text,
        time bigint, data jsonb, members jsonb, size integer
    )
)
SELECT id, tenant_id, events FROM webhook_subscriptions
WHERE active AND tenant_id = ANY(CAST(:tenant_ids AS text[]));

-- name: select_events
-- The events after :after_sequence (and, in that row, after the member at :after_position), in
-- order: a row that keeps a block of alike events (`members`) is one event a member, each
-- with its `position` and `subject` (and `priority`, when the members' differ, and
-- `episode_id`, a retried dead letter's; a claim's or an ack's member's own `duration_ms`,
-- `attempt` and `result` are merged into its data here, in jsonb's order of keys); a row
-- without is one event (its position null). A page reads only the rows it shows.
SELECT
    e.sequence, e.id, e.tenant_id, e.type, e.queue, e.job_type, e.time,
    COALESCE(e.data || m.data, e.data) AS data,
    COALESCE(m.subject, e.subject) AS subject, m.position, m.priority, m.episode_id
FROM events AS e
LEFT JOIN LATERAL (
    -- (Each array read once a row, side by side: a member's own `e.members -> ...` read the
    -- row's members, ~200 kB toasted at 4,096, again for each member: 13 s to page 4,100.)
    -- A claim's or an ack's member keeps its own data (`members.data`, an array a key: the
    -- attempt, the duration, the result), merged into the run's.
    SELECT s.subject, CAST(s.position AS integer) - 1 AS position, s.priority, s.episode_id,
        jsonb_strip_nulls(jsonb_build_object('duration_ms', s.duration_ms, 'attempt', s.attempt))
        || CASE WHEN s.result IS NULL OR s.result = 'null' THEN '{}'
                ELSE jsonb_build_object('result', s.result) END AS data
    FROM ROWS FROM (
        jsonb_array_elements_text(e.members -> 'subjects'),
        jsonb_array_elements(e.members -> 'priorities'),
        jsonb_array_elements_text(e.members -> 'episodes'),
        jsonb_array_elements(e.members -> 'data' -> 'duration_ms'),
        jsonb_array_elements(e.members -> 'data' -> 'attempt'),
        jsonb_array_elements(e.members -> 'data' -> 'result')
    ) WITH ORDINALITY AS s(subject, priority, episode_id, duration_ms, attempt, result, position)
) AS m ON true
WHERE (CAST(:tenant_id AS text) IS NULL OR e.tenant_id = :tenant_id)
  AND (CAST(:after_sequence AS bigint) IS NULL OR e.sequence >= :after_sequence)
  AND (CAST(:after_sequence AS bigint) IS NULL OR e.sequence > :after_sequence
       OR m.position > CAST(:after_position AS integer))
  AND (CAST(:types AS text[]) IS NULL OR e.type = ANY(CAST(:types AS text[])))
  AND (CAST(:queues AS text[]) IS NULL OR e.queue = ANY(CAST(:queues AS text[])))
  AND (CAST(:job_types AS text[]) IS NULL OR e.job_type = ANY(CAST(:job_types AS text[])))
ORDER BY e.sequence, m.position
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
-- many events went (a row keeping a block is `size` of them). Both bounds are on sequence, as
-- subqueries: a range of two unknown bounds is planned as a sliver of events_pkey, where one
-- bound (a third of the table) took a sequential scan, analysed or not: 13-27 ms and every page
-- (3,996 buffers) each trim with nothing to trim after 100,000 events, 0.04 ms and 8 buffers as
-- a range. (The upper bound's COALESCE stays inside its subquery: row-level security keeps an
-- expression it cannot prove leakproof out of the index condition.)
WITH gone AS (
    DELETE FROM events
    WHERE time < :before
      AND sequence >= (SELECT min(sequence) FROM events)
      AND sequence < (SELECT COALESCE(min(sequence), 9223372036854775807) FROM events
                      WHERE time >= :before)
    RETURNING size
)
SELECT COALESCE(sum(COALESCE(size, 1)), 0) AS size FROM gone;

-- name: savepoint
-- A part of a transaction that can be undone alone (a redrive task's batch).
SAVEPOINT batch;

-- name: rollback_to_savepoint
ROLLBACK TO SAVEPOINT batch;

-- name: release_savepoint
RELEASE SAVEPOINT batch;

-- name: try_lock
SELECT pg_try_advisory_xact_lock(CAST(:key AS bigint)) AS locked;

-- name: reset_all
-- The audit log and its chain heads survive a reset: they are append-only for everyone.
-- DELETE, not TRUNCATE: TRUNCATE ignores row-level security, so the application role is not
-- granted it; a SYSTEM transaction (the only one that resets) sees and deletes every row.
DELETE FROM jobs;
DELETE FROM dead_letters;
DELETE FROM dead_letter_snapshots;
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
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:include_revoked AS boolean) OR revoked_at IS NULL)
ORDER BY tenant_id, created_at, id;

-- name: revoke_api_key
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, :now)
WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: count_live_api_keys
SELECT COUNT(*) AS count FROM api_keys
WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > :now);

-- name: lock_audit_head
-- The tenant's chain head, made at seq 0 on its first record. The upsert locks the row until
-- commit and returns its newest committed values (READ COMMITTED re-reads a row it waited for),
-- so concurrent appends to one tenant's chain queue up here instead of forking it.
INSERT INTO audit_chain_heads (tenant_id, seq, hash) VALUES (:tenant_id, 0, :genesis)
ON CONFLICT (tenant_id) DO UPDATE SET seq = audit_chain_heads.seq
RETURNING tenant_id, seq, hash;

-- name: append_audit_record
-- The record and the head moved to it, as one statement: one round trip (two on first use, its
-- parse and its bind) where two statements took two (four), in every audited transaction.
WITH appended AS (
    INSERT INTO audit_log (
        id, tenant_id, seq, time, key_id, actor, role, action, target, affected, request_id,
        outcome, previous_hash, hash
    ) VALUES (
        :id, :tenant_id, :seq, :time, :key_id, :actor, :role, :action, :target, :affected,
        :request_id, :outcome, :previous_hash, :hash
    )
)
UPDATE audit_chain_heads SET seq = :seq, hash = :hash WHERE tenant_id = :tenant_id;

-- name: select_audit_records
SELECT * FROM audit_log
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:action AS text) IS NULL OR action = :action)
  AND (CAST(:actor AS text) IS NULL OR actor = :actor)
  AND (CAST(:key_id AS text) IS NULL OR key_id = :key_id)
  AND (CAST(:outcome AS text) IS NULL OR outcome = :outcome)
  AND (CAST(:request_id AS text) IS NULL OR request_id = :request_id)
  AND (CAST(:since AS bigint) IS NULL OR time >= :since)
  AND (CAST(:until AS bigint) IS NULL OR time <= :until)
  AND (CAST(:target AS text) IS NULL OR strpos(target, :target) > 0)
  AND (CAST(:cursor_at AS bigint) IS NULL OR time < :cursor_at
       OR (time = :cursor_at AND (seq < :cursor_seq OR (seq = :cursor_seq AND id < :cursor_id))))
ORDER BY time DESC, seq DESC, id DESC
LIMIT :limit;

-- name: select_audit_chain
SELECT * FROM audit_log
WHERE tenant_id = :tenant_id AND seq > :after_seq
ORDER BY seq
LIMIT :limit;

-- name: select_audit_heads
SELECT tenant_id, seq, hash FROM audit_chain_heads
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
ORDER BY tenant_id;

-- name: select_audit_tenants
SELECT DISTINCT tenant_id FROM audit_log
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
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
WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: select_webhook_subscriptions
SELECT * FROM webhook_subscriptions
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
ORDER BY tenant_id, created_at, id;

-- name: any_active_webhook_subscription
SELECT EXISTS (SELECT FROM webhook_subscriptions WHERE active) AS active;

-- name: delete_webhook_subscription
-- The subscription and its delivery log; its id comes back if it was there.
WITH gone AS (
    DELETE FROM webhook_subscriptions
    WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
    RETURNING id, tenant_id
), log AS (
    DELETE FROM webhook_deliveries AS d USING gone
    WHERE d.subscription_id = gone.id AND d.tenant_id = gone.tenant_id
)
SELECT id FROM gone;

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
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:subscription_id AS text) IS NULL OR subscription_id = :subscription_id)
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND (CAST(:cursor_at AS bigint) IS NULL OR time < :cursor_at
       OR (time = :cursor_at AND id < :cursor_id))
ORDER BY time DESC, id DESC
LIMIT :limit;

-- name: delete_webhook_deliveries_before
-- Oldest first, so it walks webhook_deliveries_time and stops at its LIMIT: unordered, a table
-- not analysed since a burst was read whole for :limit matches each trim (100,000 records, none
-- due: 8.7 ms, 1,630 buffers; 0.02 ms, 3 in order).
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT id FROM webhook_deliveries WHERE time < :before ORDER BY time LIMIT :limit
);

-- Redrive tasks (migration 0012) ------------------------------------------------------------

-- name: select_dead_letter_arrivals
-- Dead letters (in any status now) that arrived since :since, per queue: how many within the
-- quiet period and how many within the spike window (index-only on
-- dead_letter_snapshots_arrivals, a snapshot per dead letter; the tombstones of those pruned
-- since, by a range scan per status).
SELECT tenant_id, queue,
       SUM(CASE WHEN discarded_at >= :quiet_start THEN 1 ELSE 0 END) AS in_quiet_period,
       SUM(CASE WHEN discarded_at >= :window_start THEN 1 ELSE 0 END) AS in_window
FROM (
    SELECT tenant_id, queue, discarded_at FROM dead_letter_snapshots WHERE discarded_at >= :since
    UNION ALL
    SELECT tenant_id, queue, discarded_at FROM dead_letter_tombstones
    WHERE status IN ('pruned', 'archived') AND discarded_at >= :since
) AS arrived
GROUP BY tenant_id, queue;

-- name: count_queue_arrivals
-- For each {tenant_id, queue} of :queues, the dead letters that arrived in [:start, :end)
-- (index-only on dead_letter_snapshots_queue_arrivals, a snapshot per dead letter).
SELECT wanted.tenant_id, wanted.queue,
       (SELECT COUNT(*) FROM dead_letter_snapshots AS snapshot
        WHERE snapshot.tenant_id = wanted.tenant_id AND snapshot.queue = wanted.queue
          AND snapshot.discarded_at >= :start AND snapshot.discarded_at < :end)
       + (SELECT COUNT(*) FROM dead_letter_tombstones AS tombstones
          WHERE tombstones.status IN ('pruned', 'archived')
            AND tombstones.discarded_at >= :start AND tombstones.discarded_at < :end
            AND tombstones.tenant_id = wanted.tenant_id AND tombstones.queue = wanted.queue)
       AS count
FROM jsonb_to_recordset(CAST(:queues AS jsonb)) AS wanted(tenant_id text, queue text);

-- name: select_dead_type_counts
-- Dead letters dead now per (tenant, queue, job type), from the tallies, above :above.
SELECT tenant_id, queue, type AS key, SUM(count) AS count FROM dead_letter_tallies
GROUP BY tenant_id, queue, type
HAVING SUM(count) > :above;

-- name: select_aggregate_counts
-- Dead letters dead now per (tenant, queue, aggregate key), for the keys of those that arrived
-- since :since and those of open aggregate alerts, where at least :at_least share the key
-- (recent arrivals by dead_letter_snapshots_arrivals, each key counted on
-- dead_letters_by_aggregate_key). The arrivals are a range with two bounds (the upper one any
-- time): one bound on a table not analysed since a burst is guessed a third of its rows, which
-- priced the counts above jit_above_cost and compiled them on every check (12-38 ms with no
-- arrival after 40,000 dead letters, 3 buffers read); a range is guessed 0.5 %: 0.04 ms.
WITH candidates AS (
    SELECT DISTINCT tenant_id, queue, aggregate_key FROM dead_letter_snapshots
    WHERE discarded_at BETWEEN CAST(:since AS bigint) AND 9223372036854775807
      AND aggregate_key IS NOT NULL
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
WHERE id = :id AND state = :expected_state
  AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: select_alerts
SELECT * FROM alerts
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:states AS text[]) IS NULL OR state = ANY(CAST(:states AS text[])))
ORDER BY first_fired_at DESC, id DESC
LIMIT :limit;

-- name: select_alert
SELECT * FROM alerts
WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: count_open_alerts
-- Open alerts per (rule, severity, state): the gauges and the dashboard's banner.
SELECT rule, severity, state, COUNT(*) AS count FROM alerts
WHERE state <> 'resolved' AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
GROUP BY rule, severity, state;

-- name: upsert_job_schema
INSERT INTO job_schemas (tenant_id, type, version, schema, registered_at, registered_by)
VALUES (:tenant_id, :type, :version, CAST(:schema AS jsonb), :registered_at, :registered_by)
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
    WHERE status = 'dead' AND (CAST(:before AS bigint) IS NULL OR discarded_at < :before) AND {not_held}
      AND (CAST(:queue AS text) IS NULL OR queue = :queue) AND (CAST(:excluded_queues AS text[]) IS NULL OR queue <> ALL(CAST(:excluded_queues AS text[])))
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
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id) AND (CAST(:all AS boolean) OR released_at IS NULL)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: select_legal_hold
SELECT * FROM legal_holds WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: release_legal_hold
UPDATE legal_holds SET released_at = :now, released_by = :released_by
WHERE id = :id AND released_at IS NULL AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- name: insert_redrive_task
INSERT INTO redrive_tasks (
    id, tenant_id, state, filter, incident_id, rate_per_minute, critical, reason, created_by,
    created_at, updated_at, updated_by, finished_at, paced_until, to_move, moved, skipped,
    succeeded, dead_again, queues
) VALUES (
    :id, :tenant_id, :state, CAST(:filter AS jsonb), :incident_id, :rate_per_minute, :critical,
    :reason, :created_by, :created_at, :updated_at, :updated_by, :finished_at, :paced_until,
    :to_move, :moved, :skipped, :succeeded, :dead_again, CAST(:queues AS jsonb)
);

-- name: lock_redrive_pins
-- Tasks pin one transaction at a time (an advisory lock held until commit; the key is "rdp"),
-- so a pin's statement sees every pin committed before it and pin_redrive_items can leave out
-- the pinned dead letters with NOT EXISTS: ON CONFLICT DO NOTHING's speculative insertion of
-- every row cost 40 % of pinning 20,000 (2.8 -> 1.6 s on the loaded 2-core machine, same WAL).
SELECT pg_advisory_xact_lock(7496816) AS locked;


-- fragment: redrive_pin_taken
-- The dead letters pinned already: the unfinished tasks' pending blocks' ids but those a claim
-- took (moved, or failed or skipped in a row of their own). Read once and probed as a hashed
-- NOT IN: as NOT EXISTS, planned without statistics under row-level security, each dead letter
-- scanned every pinned entry (20,000 pins took 22 s of CPU).
taken AS MATERIALIZED (
    SELECT pinned.id FROM redrive_tasks AS task
    JOIN redrive_task_pins AS pin ON pin.task_id = task.id AND pin.state = 'pending'
    CROSS JOIN unnest(pin.dead_letter_ids) AS pinned(id)
    WHERE task.state IN ('running', 'paused')
    EXCEPT
    SELECT claimed.id FROM redrive_tasks AS task
    JOIN redrive_task_claims AS claim ON claim.task_id = task.id
    CROSS JOIN unnest(claim.dead_letter_ids) AS claimed(id)
    WHERE task.state IN ('running', 'paused')
)

-- fragment: redrive_pin_insert
-- The chosen dead letters (`chosen`, read once: not materialized, so no copy of 20,000 rows
-- that spilled past work_mem, and the counts come from the blocks, not a second read) pinned to
-- the task :task_id in blocks (migration 0046): a row for each thousand in id order and tenant,
-- queue and incident, the ids and their jobs' ids as two arrays in step (one aggregate row order),
-- in id order as the input sorted once with the groups' keys gives them (`array_agg(... ORDER BY
-- id)` sorted each block's two arrays again; every reader sorts a block's ids itself). Per tenant
-- and queue, how many were pinned. (Pinning 20,000, backend CPU: 55 -> 33 ms.)
placed AS (
    SELECT tenant_id, queue, incident_id, id, job_id,
        CAST((row_number() OVER (ORDER BY id) - 1) / 1000 AS integer) AS place
    FROM chosen
), pinned AS (
    INSERT INTO redrive_task_pins (
        task_id, place, first_id, tenant_id, queue, incident_id, last_id, state,
        dead_letter_ids, job_ids
    )
    SELECT :task_id, place, min(id), tenant_id, queue, incident_id, max(id), 'pending',
        array_agg(id), array_agg(job_id)
    FROM (SELECT * FROM placed ORDER BY place, tenant_id, queue, incident_id, id) AS ordered
    GROUP BY place, tenant_id, queue, incident_id
    RETURNING tenant_id, queue, cardinality(dead_letter_ids) AS count
)
SELECT tenant_id, queue, SUM(count) AS count FROM pinned GROUP BY tenant_id, queue;

-- name: pin_redrive_items
-- The dead letters matching the filter now, newest first, up to :limit, pinned to the task; one
-- pinned by another unfinished task is left out (lock_redrive_pins first, so the pins take turns
-- and each sees those committed before it: the guard; migration 0033 dropped the unique index that
-- doubled it). Per queue and tenant, how many were pinned. (As a row an item, 20,000 pins were
-- 5.9 MB of WAL and ~3 times the backend time of their blocks: migration 0046.)
WITH {redrive_pin_taken}, chosen AS (
    SELECT tenant_id, id, job_id, queue, incident_id
    FROM dead_letters
    WHERE status = 'dead' AND {dead_letter_filter}
      AND id NOT IN (SELECT id FROM taken)
    ORDER BY discarded_at DESC, id DESC
    LIMIT :limit
), {redrive_pin_insert}

-- name: pin_every_redrive_item
-- As pin_redrive_items with no limit: every match (nothing to choose, so nothing sorted but the
-- blocks).
WITH {redrive_pin_taken}, chosen AS (
    SELECT tenant_id, id, job_id, queue, incident_id
    FROM dead_letters
    WHERE status = 'dead' AND {dead_letter_filter}
      AND id NOT IN (SELECT id FROM taken)
), {redrive_pin_insert}

-- name: claim_redrive_queues
-- The task's queues (:queues, the (tenant, queue) pairs its pin counted: read from its items,
-- each of these two statements scanned all of them) become its own until it ends; a queue
-- another unfinished task holds stays that task's (select_redrive_queue_holders names it).
INSERT INTO redrive_task_queues (tenant_id, queue, task_id)
SELECT tenant_id, queue, :task_id
FROM jsonb_to_recordset(CAST(:queues AS jsonb)) AS mine(tenant_id text, queue text)
ON CONFLICT DO NOTHING;

-- name: select_redrive_queue_holders
SELECT held.queue, held.task_id FROM redrive_task_queues AS held
JOIN jsonb_to_recordset(CAST(:queues AS jsonb)) AS mine(tenant_id text, queue text)
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
    SELECT FROM redrive_tasks AS task
    WHERE task.id = :task_id AND task.moved + task.skipped + task.failed < task.to_move
);

-- name: set_redrive_task_pins
UPDATE redrive_tasks SET to_move = :to_move, queues = CAST(:queues AS jsonb) WHERE id = :id;

-- name: select_redrive_task
SELECT * FROM redrive_tasks
WHERE id = :id AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id);

-- name: select_redrive_tasks
SELECT * FROM redrive_tasks
WHERE (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
  AND (CAST(:state AS text) IS NULL OR state = :state)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: select_running_redrive_tasks
SELECT * FROM redrive_tasks WHERE state = 'running' ORDER BY id LIMIT :limit;

-- name: change_redrive_task
-- Guarded by the state the change was decided from: no row means someone changed it meanwhile.
UPDATE redrive_tasks SET state = :state, updated_at = :now, updated_by = :changed_by,
    paced_until = :paced_until, finished_at = :finished_at
WHERE id = :id AND state = :expected_state
  AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
RETURNING *;

-- fragment: redrive_next_pending
-- The task :task_id's next :limit pending items (`next`: tenant, dead letter and job, in id
-- order): its pending blocks' ids after :after and after the task's `moved_through`, less those a
-- committed claim took, or, when none is left there, after :after alone (see
-- select_pending_redrive_items, which reads them, and claim_pending_redrive_items, which takes
-- them). The blocks are read a place at a time in order (a place's ids all lie below the next
-- place's), each place's thousand sorted on its own, until the limit: the places are a series
-- and each one's ids a lateral subquery, whose rows a nested loop gives in order (ORDER BY
-- place, id over all of them sorted every pinned id each read: 20,000, 31 ms).
bound AS MATERIALIZED (
    SELECT GREATEST(CAST(:after AS text),
                    (SELECT moved_through FROM redrive_tasks WHERE id = :task_id)) AS after
), claimed_above AS MATERIALIZED (
    SELECT taken.id FROM redrive_task_claims AS claim
    CROSS JOIN unnest(claim.dead_letter_ids) AS taken(id)
    WHERE claim.task_id = :task_id AND claim.last_id > (SELECT after FROM bound)
), above AS (
    SELECT ids.tenant_id, ids.id, ids.job_id
    FROM generate_series(
        (SELECT min(place) FROM redrive_task_pins
         WHERE task_id = :task_id AND state = 'pending' AND last_id > (SELECT after FROM bound)),
        (SELECT max(place) FROM redrive_task_pins WHERE task_id = :task_id)) AS places(place)
    CROSS JOIN LATERAL (
        SELECT pin.tenant_id, pinned.id, pinned.job_id FROM redrive_task_pins AS pin
        CROSS JOIN unnest(pin.dead_letter_ids, pin.job_ids) AS pinned(id, job_id)
        WHERE pin.task_id = :task_id AND pin.place = places.place AND pin.state = 'pending'
          AND pinned.id > (SELECT after FROM bound)
          AND pinned.id NOT IN (SELECT id FROM claimed_above)
        ORDER BY pinned.id
    ) AS ids
    LIMIT :limit
), claimed_after AS MATERIALIZED (
    SELECT taken.id FROM redrive_task_claims AS claim
    CROSS JOIN unnest(claim.dead_letter_ids) AS taken(id)
    WHERE claim.task_id = :task_id AND claim.last_id > CAST(:after AS text)
), behind AS (
    SELECT ids.tenant_id, ids.id, ids.job_id
    FROM generate_series(
        (SELECT min(place) FROM redrive_task_pins
         WHERE task_id = :task_id AND state = 'pending' AND last_id > CAST(:after AS text)
           AND NOT EXISTS (SELECT FROM above)),
        (SELECT max(place) FROM redrive_task_pins WHERE task_id = :task_id)) AS places(place)
    CROSS JOIN LATERAL (
        SELECT pin.tenant_id, pinned.id, pinned.job_id FROM redrive_task_pins AS pin
        CROSS JOIN unnest(pin.dead_letter_ids, pin.job_ids) AS pinned(id, job_id)
        WHERE pin.task_id = :task_id AND pin.place = places.place AND pin.state = 'pending'
          AND pinned.id > CAST(:after AS text)
          AND pinned.id NOT IN (SELECT id FROM claimed_after)
        ORDER BY pinned.id
    ) AS ids
    LIMIT :limit
), next AS (
    SELECT tenant_id, id, job_id FROM above
    UNION ALL
    SELECT tenant_id, id, job_id FROM behind
)

-- name: select_pending_redrive_items
-- The task's next dead letters to move, by id after :after and after the task's `moved_through`
-- (the last item a committed chunk moved: a claim took those before it); when none is left there,
-- by id after :after alone (the chunks over the write lanes commit in any order: one that never
-- committed, its process gone, left its items behind the mark). Not locked: one transaction at a
-- time advances the tasks (the advisory lock of RedriveService.advance), and its write lanes read
-- their chunks one after the other. One row: their ids and their jobs' ids, two JSON arrays in
-- step, in the order read.
WITH {redrive_next_pending}
SELECT json_agg(id) AS dead_letter_ids, json_agg(job_id) AS job_ids FROM next;

-- name: claim_pending_redrive_items
-- A chunk's items, taken to move in this transaction: the task's next pending dead letters, read
-- as select_pending_redrive_items reads them, claimed in one row per tenant of their ids
-- (migration 0046: 5,000 items' marks, a row each, were ~7 times the backend time). The claim
-- locks no pin block: a cancel meanwhile lets go of the blocks and waits for nothing, and what
-- this chunk took stays moved once it commits. retry_dead_letters then moves their dead letters;
-- what it skips, skip_redrive_items sets right, and an item an upcaster refuses,
-- fail_redrive_item, in the same transaction (undone with it, as the claim). One row, as the
-- read's.
WITH {redrive_next_pending}, taken AS MATERIALIZED (
    SELECT tenant_id, id, job_id FROM next
), claimed AS (
    INSERT INTO redrive_task_claims (task_id, first_id, tenant_id, last_id, dead_letter_ids)
    SELECT :task_id, min(id), tenant_id, max(id), array_agg(id ORDER BY id)
    FROM taken
    GROUP BY tenant_id
)
SELECT json_agg(id) AS dead_letter_ids, json_agg(job_id) AS job_ids FROM taken;

-- name: select_pending_redrive_dead_letters
-- The dead letters a task pins of these types, by id after :after (a dry run of their upcasts
-- when it starts, before any claim).
SELECT dead_letters.*, {snapshot} FROM redrive_task_pins AS pin
CROSS JOIN unnest(pin.dead_letter_ids) AS pinned(id)
JOIN dead_letters ON dead_letters.id = pinned.id
WHERE pin.task_id = :task_id AND pin.state = 'pending' AND pin.last_id > :after
  AND pinned.id > :after AND dead_letters.type = ANY(CAST(:types AS text[]))
ORDER BY pinned.id
LIMIT :limit;

-- name: fail_redrive_item
-- A pinned dead letter an upcaster refused, claimed by this transaction's chunk
-- (claim_pending_redrive_items): its item is `failed` with the error, in a row of its own (and
-- the dead letter stays dead).
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
-- last item it took (:through, '' for none): the next reads of pending items start after it.
UPDATE redrive_tasks SET moved = moved + :moved, skipped = skipped + :skipped,
    failed = failed + :failed,
    paced_until = GREATEST(paced_until, :paced_until), updated_at = :now,
    moved_through = GREATEST(moved_through, CAST(:through AS text))
WHERE id = :id
RETURNING *;

-- fragment: redriven_by_task
-- A job the task :task_id requeued carries its id and its item's dead letter (the episode the
-- task just moved: its snapshot names the job, and it names the task as its mover, as
-- service.redrives.moved_by writes it; a task pins one episode of a job at most), so that its end
-- finds its item by the items' key; a job redriven without a task keeps those it had.
redrive_task_id = COALESCE(CAST(:task_id AS text), jobs.redrive_task_id),
redrive_dead_letter_id = CASE WHEN CAST(:task_id AS text) IS NULL THEN jobs.redrive_dead_letter_id
    ELSE (SELECT dead.id FROM dead_letter_snapshots AS snapshot
          JOIN dead_letters AS dead ON dead.id = snapshot.id
          WHERE snapshot.job_id = jobs.id AND dead.status = 'retried'
            AND dead.moved_by = 'redrive:' || CAST(:task_id AS text)
          LIMIT 1) END

-- name: mark_redriven_jobs
-- The jobs a task requeued other than in place (upcast, or from the snapshot) carry its id and
-- their item's, so that their end updates the task.
UPDATE jobs SET {redriven_by_task} WHERE id = ANY(CAST(:ids AS text[]));

-- name: record_redrive_outcomes
-- Redriven jobs that ended (:rows): their items, found by the key (task, dead letter: the job
-- names both, see redriven_by_task), succeed or die again, once: a moved item has no row of its
-- own (migration 0046) and gets one, its tenant and queue the job's, its incident the dead
-- letter's (if an age prune has not deleted it); one that has a row changes only from `moved`
-- (moved before 0046). In key order, so two batches take their rows in one order.
INSERT INTO redrive_task_items AS item (
    task_id, tenant_id, dead_letter_id, job_id, queue, incident_id, state, died_fingerprint,
    died_incident_id
)
SELECT DISTINCT ON (r.task_id, r.dead_letter_id)
    r.task_id, jobs.tenant_id, r.dead_letter_id, jobs.id, jobs.queue, dead.incident_id,
    r.state, r.fingerprint, r.incident_id
FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
    task_id text, dead_letter_id text, job_id text, state text, fingerprint text,
    incident_id text
)
JOIN jobs ON jobs.id = r.job_id
LEFT JOIN dead_letters AS dead ON dead.id = r.dead_letter_id
ORDER BY r.task_id, r.dead_letter_id
ON CONFLICT (task_id, dead_letter_id) DO UPDATE
SET state = excluded.state, died_fingerprint = excluded.died_fingerprint,
    died_incident_id = excluded.died_incident_id
WHERE item.state = 'moved'
RETURNING item.task_id, item.state, item.incident_id, item.died_incident_id;

-- name: count_redrive_outcomes
UPDATE redrive_tasks AS task
SET succeeded = task.succeeded + r.succeeded, dead_again = task.dead_again + r.dead_again
FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(id text, succeeded integer, dead_again integer)
WHERE task.id = r.id
RETURNING task.*;

-- name: select_redrive_items
-- A task's items in id order, up to :limit, of the state :state (any for NULL), each as its row
-- in redrive_task_items has it: those with a row of their own as it is, the others from their pin
-- block (moved if a claim took them, else the block's state; migration 0046).
WITH recorded AS MATERIALIZED (
    SELECT * FROM redrive_task_items WHERE task_id = :task_id
), claimed AS MATERIALIZED (
    SELECT taken.id FROM redrive_task_claims AS claim
    CROSS JOIN unnest(claim.dead_letter_ids) AS taken(id)
    WHERE claim.task_id = :task_id
), pinned AS (
    SELECT pin.tenant_id, pinned.id, pinned.job_id, pin.queue, pin.incident_id,
        CASE WHEN pinned.id IN (SELECT id FROM claimed) THEN 'moved' ELSE pin.state END AS state
    FROM redrive_task_pins AS pin
    CROSS JOIN unnest(pin.dead_letter_ids, pin.job_ids) AS pinned(id, job_id)
    WHERE pin.task_id = :task_id
      AND pinned.id NOT IN (SELECT dead_letter_id FROM recorded)
)
SELECT task_id, tenant_id, dead_letter_id, job_id, queue, incident_id, state, died_fingerprint,
    died_incident_id, error_code, error_message
FROM recorded
WHERE CAST(:state AS text) IS NULL OR state = :state
UNION ALL
SELECT CAST(:task_id AS text), tenant_id, id, job_id, queue, incident_id, state, NULL, NULL,
    NULL, NULL
FROM pinned
WHERE CAST(:state AS text) IS NULL OR state = :state
ORDER BY dead_letter_id
LIMIT :limit;

-- name: select_queue_redrive_holders
SELECT queue, task_id FROM redrive_task_queues
WHERE queue = ANY(CAST(:queues AS text[]))
  AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
ORDER BY queue;
