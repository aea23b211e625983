-- redrive schema 27 (PostgreSQL): a redriven job's end finds its task item through an index of
-- the moved items only (record_redrive_outcomes asks for state = 'moved'), not one of every item
-- a task pins. Pinning a dead letter then writes three index entries, not four: a critical task
-- pinning 20,000 wrote 17.9 MB of WAL, now 14.3 MB; moving an item still adds one entry here, and
-- its end none.
DROP INDEX redrive_task_items_job;
CREATE INDEX redrive_task_items_moved ON redrive_task_items (task_id, job_id) WHERE state = 'moved';
