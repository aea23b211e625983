-- redrive schema 36 (SQLite): as on PostgreSQL, no index of a redrive task's items names `state`
-- (an item's marks, pending -> moved -> succeeded or dead again, then rewrite only its row, not
-- an entry of each partial index whose predicate it left or entered); a redriven job's end finds
-- its item by (task, job) among all its task's items; pending items are read by the key, after
-- `redrive_tasks.moved_through`, the last item a committed batch took.
DROP INDEX redrive_task_items_pending;
DROP INDEX redrive_task_items_moved;
CREATE INDEX redrive_task_items_job ON redrive_task_items (task_id, job_id);
ALTER TABLE redrive_tasks ADD COLUMN moved_through TEXT NOT NULL DEFAULT '';
