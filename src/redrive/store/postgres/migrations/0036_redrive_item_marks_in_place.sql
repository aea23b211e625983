-- redrive schema 36 (PostgreSQL): a redrive task's item changes state in place. Its indexes named
-- `state` in their predicates (`redrive_task_items_pending`, `redrive_task_items_moved`), so each
-- mark (pending -> moved as its dead letter moves, moved -> succeeded or dead again as its job
-- ends) wrote a new row version and an entry in two indexes; with no index on `state` and room
-- left on each page (fillfactor 50: an item is written by the pin, then rewritten by its mark and
-- its outcome) the mark is a heap-only update: a chunk of 5,000 marks, 35 -> 7 ms of backend
-- time and 3.2 MB -> 0.4 MB of WAL (EXPLAIN ANALYZE, after a pin of 20,000). A redriven job's end
-- finds its item by (task, job) among all its task's items; pending items are read by the key,
-- after `redrive_tasks.moved_through`, the last item a committed chunk moved (a task's items
-- move in id order), so a paced task's tick does not step over every item already moved.
DROP INDEX redrive_task_items_pending;
DROP INDEX redrive_task_items_moved;
CREATE INDEX redrive_task_items_job ON redrive_task_items (task_id, job_id);
ALTER TABLE redrive_task_items SET (fillfactor = 50);
ALTER TABLE redrive_tasks ADD COLUMN moved_through text NOT NULL DEFAULT '';
