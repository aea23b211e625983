-- redrive schema 16 (PostgreSQL): what stopped a redrive task, or one of its dead letters. A
-- pinned dead letter whose payload an upcaster refuses is marked `failed` with the error (it
-- stays dead, and the task moves on); the task counts them. A task that cannot go on (no
-- upcaster for a version step, or an unexpected error in a batch) ends `failed` with the
-- reason and the job it stopped at.
ALTER TABLE redrive_tasks ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE redrive_tasks ADD COLUMN failure_code TEXT;
ALTER TABLE redrive_tasks ADD COLUMN failure_message TEXT;
ALTER TABLE redrive_tasks ADD COLUMN failure_job_id TEXT;
ALTER TABLE redrive_task_items ADD COLUMN error_code TEXT;
ALTER TABLE redrive_task_items ADD COLUMN error_message TEXT;
