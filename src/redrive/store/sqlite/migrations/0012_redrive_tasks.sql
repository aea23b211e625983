-- redrive schema 12 (SQLite): paced, tracked redrive tasks. A task pins the dead letters its
-- filter (or incident) matched when it started (redrive_task_items, one row each), moves them out
-- of the dead-letter queue at its rate, a batch per maintenance tick, and follows the redriven
-- jobs to their end: jobs.redrive_task_id marks a job a task requeued, so that its ack or its
-- death updates the task's counts in the same transaction. A dead letter is pinned by at most one
-- task while it waits (the partial unique index), and a queue has at most one unfinished task
-- (redrive_task_queues, released when the task ends).
CREATE TABLE redrive_tasks (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    state TEXT NOT NULL,
    filter TEXT NOT NULL,
    incident_id TEXT,
    rate_per_minute INTEGER NOT NULL,
    critical INTEGER NOT NULL,
    reason TEXT,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    finished_at INTEGER,
    paced_until INTEGER NOT NULL,
    to_move INTEGER NOT NULL,
    moved INTEGER NOT NULL,
    skipped INTEGER NOT NULL,
    succeeded INTEGER NOT NULL,
    dead_again INTEGER NOT NULL,
    queues TEXT NOT NULL
);
CREATE INDEX redrive_tasks_recent ON redrive_tasks (tenant_id, created_at DESC, id DESC);
CREATE INDEX redrive_tasks_running ON redrive_tasks (id) WHERE state = 'running';

CREATE TABLE redrive_task_items (
    task_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    dead_letter_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    incident_id TEXT,
    state TEXT NOT NULL,
    died_fingerprint TEXT,
    died_incident_id TEXT,
    PRIMARY KEY (task_id, dead_letter_id)
);
CREATE UNIQUE INDEX redrive_task_items_pinned ON redrive_task_items (dead_letter_id)
    WHERE state = 'pending';
-- Where a redriven job's end finds its item.
CREATE INDEX redrive_task_items_job ON redrive_task_items (task_id, job_id);
CREATE INDEX redrive_task_items_pending ON redrive_task_items (task_id, dead_letter_id)
    WHERE state = 'pending';

CREATE TABLE redrive_task_queues (
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (tenant_id, queue)
);

ALTER TABLE jobs ADD COLUMN redrive_task_id TEXT;
