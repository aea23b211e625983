-- redrive schema 44 (PostgreSQL): a job a redrive task requeued names the dead letter it moved
-- (jobs.redrive_dead_letter_id, beside redrive_task_id), so that its end finds its item by the
-- items' key (task, dead letter), and the index of the items by job goes: the pin of a task's
-- items wrote each into it, 20,000 pins 69.5 -> 48.2 ms of backend CPU without it (fresh copies
-- of 20,000 dead letters, after a CHECKPOINT, medians of 5 interleaved; a hash index on the
-- job, 60.2, left the outcome's lookup a sequential scan when planned without statistics); the
-- requeue writes the column, 5,000 jobs 58.9 -> 62.6 ms, in the chunks the lanes move side by
-- side. The jobs a task moved whose end is not recorded yet name theirs here, through the index
-- before it goes.
-- An identifier, bytewise like the others since 0039.
ALTER TABLE jobs ADD COLUMN redrive_dead_letter_id TEXT COLLATE "C";
UPDATE jobs SET redrive_dead_letter_id = item.dead_letter_id
FROM redrive_task_items AS item
WHERE item.task_id = jobs.redrive_task_id AND item.job_id = jobs.id AND item.state = 'moved';
DROP INDEX redrive_task_items_job;
