-- redrive schema 36 (SQLite): a task remembers the last item a committed chunk moved, as on
-- PostgreSQL (whose items lost their partial indexes on `state` so that a mark is a heap-only
-- update, and whose reads of pending items start there). SQLite keeps its partial indexes (it
-- rewrites a row's index entries on every update anyway) and reads pending items through them.
ALTER TABLE redrive_tasks ADD COLUMN moved_through TEXT NOT NULL DEFAULT '';
