-- redrive schema 44 (SQLite): as on PostgreSQL, a job a redrive task requeued names the dead
-- letter it moved (jobs.redrive_dead_letter_id), its end finds its item by the items' key, and
-- the index of the items by job, which each pin wrote, goes. The jobs a task moved whose end is
-- not recorded yet name theirs here, through the index before it goes.
ALTER TABLE jobs ADD COLUMN redrive_dead_letter_id TEXT;
UPDATE jobs SET redrive_dead_letter_id = (
    SELECT item.dead_letter_id FROM redrive_task_items AS item
    WHERE item.task_id = jobs.redrive_task_id AND item.job_id = jobs.id AND item.state = 'moved'
)
WHERE redrive_task_id IS NOT NULL;
DROP INDEX redrive_task_items_job;
