-- redrive schema 33 (SQLite): as on PostgreSQL, no unique index of the pinned dead letters
-- (`redrive_task_items_pinned`): the pin leaves out what the unfinished tasks pin by reading
-- `redrive_task_items_pending` (the store has one writer, so pins take turns), and writes one
-- index entry an item fewer.
DROP INDEX redrive_task_items_pinned;
